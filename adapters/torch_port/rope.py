"""RoPE core (ROPE-*): the prepared :class:`TorchRope` and the rotation with given cos/sin."""

from __future__ import annotations

import torch

from ._common import DTYPES, LayoutForms, compute_dtype, rotate
from .rope_scaling import scaled_inv_freq


class TorchRope(LayoutForms):
    """Prepared RoPE for one parameter set, dtype and device (see module docstring).

    ``dynamic`` and ``longrope`` recompute their frequencies from each call's
    ``max(position_ids) + 1``; ``dynamic_policy='grow_until_reset'`` keeps transformers' state
    across calls (SCALE-DYNAMIC-GROW).
    """

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype, self.device = params, dtype, device
        self.compute = compute_dtype(dtype)
        self._grow = params.rope_type == "dynamic" and params.dynamic_policy == "grow_until_reset"
        self._cached, self._theta = params.max_position_embeddings, None
        w, self._af = scaled_inv_freq(params, None, device)
        self._inv_freq = w.to(self.compute)

    def _update(self, position_ids) -> None:
        p = self.p
        if p.rope_type not in ("dynamic", "longrope"):
            return
        seq_len = int(position_ids.max()) + 1 if position_ids.numel() else 0
        if self._grow:
            lmax = p.max_position_embeddings
            if seq_len > self._cached:
                self._theta = p.rope_theta * (p.factor * seq_len / lmax - (p.factor - 1)) ** (p.rdim / (p.rdim - 2))
                self._cached = seq_len
            if seq_len < lmax and self._cached > lmax:
                self._theta, self._cached = None, lmax
            w, self._af = scaled_inv_freq(p, seq_len, self.device, theta=self._theta)
        else:
            w, self._af = scaled_inv_freq(p, seq_len, self.device)
        self._inv_freq = w.to(self.compute)

    def inv_freq(self):
        return self._inv_freq, float(self._af)

    def _cos_sin(self, position_ids):
        self._update(position_ids)
        pos = position_ids.to(self.compute)
        if self.p.condense_ratio is not None:  # ROPE-CONDENSE: the positions divided before the angle
            pos = pos / self.p.condense_ratio
        phi = pos[..., None] * self._inv_freq
        return self._af * torch.cos(phi), self._af * torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        r, pr = self.p.pair_dim, self.p.pairing
        s = s * self.p.sin_sign  # a turn by -phi is sin negated (ROPE-ROTATION-NEGATIVE)
        return rotate(q, c, s, r, pr), rotate(k, c, s, r, pr)

    def apply_offsets(self, q, k, offsets):
        """rope.apply_row_offsets: row b's positions ``offsets[b] + t``."""
        t = torch.arange(q.shape[2], device=offsets.device, dtype=offsets.dtype)
        return self.apply(q, k, offsets[:, None] + t)

    def apply_offset(self, q, k, offset: int):
        """rope.apply_offset: every row at positions ``offset + t``."""
        pos = offset + torch.arange(q.shape[2], device=q.device, dtype=torch.int64)
        return self.apply(q, k, pos.expand(q.shape[0], -1))

    def apply_packed(self, q, k, cu_seqlens, offsets):
        """rope.apply_packed: q, k ``[N, H, D]``; document d is tokens ``cu_seqlens[d] .. cu_seqlens[d + 1]`` at
        positions ``offsets[d] + t``."""
        cu = cu_seqlens.to(torch.int64)
        doc = torch.searchsorted(cu, torch.arange(q.shape[0], device=cu.device), right=True) - 1
        pos = offsets[doc] + torch.arange(q.shape[0], device=cu.device) - cu[doc]
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], pos[None])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)


class Ops:
    """RoPE operations of the torch port."""

    # ---- RoPE ----------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        return TorchRope(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        cd = compute_dtype(q.dtype)
        c, s = cos.to(cd), sin.to(cd) * params.sin_sign
        r = params.pair_dim
        return rotate(q, c, s, r, params.pairing), rotate(k, c, s, r, params.pairing)

    def rope_apply_with_cos_sin_hidden(self, q, k, cos, sin, params):
        """rope.apply_with_cos_sin_hidden: q, k ``[B, T, H * D]``, D = ``params.head_dim``."""
        B, T, D = q.shape[0], q.shape[1], params.head_dim
        yq, yk = self.rope_apply_with_cos_sin(q.reshape(B, T, -1, D).transpose(1, 2),
                                              k.reshape(B, T, -1, D).transpose(1, 2), cos, sin, params)
        return yq.transpose(1, 2).reshape(B, T, -1), yk.transpose(1, 2).reshape(B, T, -1)

    def rope_apply_with_cos_sin_cache(self, q, k, cos_cache, sin_cache, position_ids, params):
        """rope.apply_with_cos_sin_cache: cos, sin rows ``cache[position_ids]``."""
        return self.rope_apply_with_cos_sin(q, k, cos_cache[position_ids], sin_cache[position_ids], params)
