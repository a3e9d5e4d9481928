"""The ``rotary-embedding-torch`` adapter: a thin wrapper around lucidrains' ``RotaryEmbedding``.

Every number this adapter returns is computed by rotary-embedding-torch 0.9.1
(``rotary_embedding_torch/rotary_embedding_torch.py``) on torch.  The wrapper builds a
``RotaryEmbedding`` from the spec's parameters and calls the library's own entry points; it
never imports ``posenc.reference`` and never re-implements what the library computes.  What the
library cannot express raises :class:`~posenc.adapters.base.Unsupported` with the reason.

=====================================  =====================================================
spec                                   rotary-embedding-torch
=====================================  =====================================================
``rope_theta``, ``rotary_dim``         ``RotaryEmbedding(dim=rotary_dim, theta=rope_theta)``
                                       (``freqs_for='lang'``: ``theta^(-2i/dim)``); a
                                       head wider than ``dim`` keeps its tail
                                       (``apply_rotary_emb``'s ``t_right``: ROPE-PARTIAL)
pairing                                interleaved only (``rotate_half`` pairs ``(2i, 2i+1)``,
                                       ``freqs`` repeated ``'... n -> ... (n r)', r=2``)
``rope_type`` linear, ``factor``       ``interpolate_factor=factor`` (``get_seq_pos`` divides
                                       the positions by it; ``factor >= 1`` is asserted)
``condense_ratio`` (ROPE-CONDENSE)     ``interpolate_factor=condense_ratio``: the same division of
                                       the positions, the library's own condensing
``attention_factor``                   the ``scale`` argument of ``rotate_queries_or_keys``
                                       (``apply_rotary_emb`` multiplies cos and sin by it)
``RopeOp.apply``                       ``rotate_queries_or_keys(x, seq_dim=-2, offset=o,
                                       scale=...)`` on q and k, one call per batch row whose
                                       positions are ``o + arange(T)`` (the only positions the
                                       method takes)
``RopeOp.inv_freq``                    the ``freqs`` parameter (float32) [rotary_dim/2]
``RopeOp.cos_sin``                     ``forward(position_ids)`` (angles for any positions,
                                       cast to the float32 of ``freqs`` by the library), then
                                       ``apply_rotary_emb(freqs, e, scale=...)`` on the probe
                                       ``e`` = (1, 0) in every pair, in the requested dtype:
                                       the library's rotation returns (cos, sin) per pair
=====================================  =====================================================

Dtype policy (ROPE-PRECISION), measured as the library does it: ``rotate_queries_or_keys``
builds the positions with ``get_seq_pos(seq_len, dtype=t.dtype, offset=offset)`` -- in the
*activation* dtype --, then ``forward`` casts them to float32 and multiplies by the float32
``freqs``; ``apply_rotary_emb`` rotates in float32 (bf16/f16 activations are promoted by the
float32 cos/sin) and casts back with ``.type(dtype)``.  ``forward(t)`` with explicit positions
casts them straight to float32.  The module keeps its default ``cache_if_possible=True``: the
angles of offset-0 calls are cached (``cached_freqs``) and reused by later calls, as in a model.

Not expressible (``Unsupported``): half pairing in ``apply``; positions that are not
``offset + arange(T)`` per row in ``apply``; rope_types other than default and linear
(``theta_rescale_factor`` is a static NTK rescale fixed at construction, not the per-call
dynamic rule); ``factor < 1``; a linear ``inv_freq`` / ``cos_sin`` (the library scales
positions, never its ``freqs``, and ``forward(t)`` takes positions as given); rotation with
given cos/sin (``apply_rotary_emb`` takes angles); a rotated width given as a fraction
(``RotaryEmbedding`` takes ``dim``, a width); cos/sin of condensed positions (``forward(t)`` takes
positions as given).  ``inv_freq`` and ``cos_sin`` do not depend
on the pairing and are served for half-pairing parameters too.  Devices: ``cpu``, and ``cuda``
when present.
"""

from __future__ import annotations

import importlib.metadata

import torch
import rotary_embedding_torch.rotary_embedding_torch as rer  # module attributes: patchable, as the library calls them

from .base import Adapter, Unsupported, for_rotation, forms_unsupported
from .torch_adapter import DTYPES, TorchAdapter, torch_device_available

_ROPE_TYPES = ("default", "linear")


class _LucidrainsRope:
    """A prepared ``RotaryEmbedding`` (one module: its ``cached_freqs`` carry over between calls).

    ``apply``: q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]``, position_ids int64 ``[B, T]`` -> q, k
    in their dtype.  ``cos_sin``: ``[B, T, rotary_dim/2]`` in the requested dtype.
    ``inv_freq``: the float32 ``freqs`` ``[rotary_dim/2]`` and the attention factor.
    """

    def __init__(self, params, dtype: torch.dtype, device):
        self.p, self.dtype = params, dtype
        self.af = params.attention_factor
        factor = params.factor if params.rope_type == "linear" else (params.condense_ratio or 1.0)
        self.rotary = rer.RotaryEmbedding(dim=params.rdim, theta=float(params.rope_theta),
                                      interpolate_factor=float(factor)).to(device)

    def _linear(self, what: str) -> None:
        if self.p.condense_ratio is not None and what != "scaled inv_freq":
            raise Unsupported(f"condensed positions have no {what} in rotary-embedding-torch: interpolate_factor divides "
                              "the positions inside get_seq_pos (offset + arange only); forward(t) takes positions as given")
        if self.p.rope_type == "linear":
            raise Unsupported(f"linear scaling has no {what} in rotary-embedding-torch: interpolate_factor divides "
                              "the positions inside get_seq_pos (offset + arange only); freqs stay unscaled and "
                              "forward(t) takes positions as given")

    def inv_freq(self):
        """ROPE-INV-FREQ: the library's ``freqs`` (``1 / theta^(arange(0, dim, 2) / dim)``, float32)."""
        self._linear("scaled inv_freq")
        return self.rotary.freqs.detach(), 1.0 if self.af is None else float(self.af)

    @torch.no_grad()
    def cos_sin(self, position_ids):
        """ROPE-ANGLE, ROPE-ATTENTION-FACTOR: ``forward(position_ids)`` rotated onto the probe (1, 0)."""
        self._linear("cos/sin for arbitrary positions")
        freqs = self.rotary(position_ids)[:, None]  # [B, 1, T, r], pairs repeated (n r)
        probe = torch.zeros(freqs.shape, dtype=self.dtype, device=freqs.device)
        probe[..., 0::2] = 1
        y = rer.apply_rotary_emb(freqs, probe, scale=1.0 if self.af is None else float(self.af))[:, 0]
        return y[..., 0::2], y[..., 1::2]

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        """ROPE-PAIR-INTERLEAVED, ROPE-PARTIAL, ROPE-ANGLE: ``rotate_queries_or_keys`` per batch row."""
        p = self.p
        if p.pairing != "interleaved":
            raise Unsupported(f"{p.pairing} pairing: rotary-embedding-torch's rotate_half pairs (x[2i], x[2i+1]) and "
                              "writes them back in place (freqs repeated per adjacent pair); it has no half (GPT-NeoX) "
                              "or de-interleaved layout")
        T = position_ids.shape[-1]
        ar = torch.arange(T, device=position_ids.device)
        offsets = position_ids[:, :1]
        if not torch.equal(position_ids, offsets + ar):
            raise Unsupported("position_ids that are not offset + arange(T) per row: rotate_queries_or_keys takes "
                              f"only a sequence offset (got {position_ids.tolist()})")
        scale = None if self.af is None else float(self.af)
        out = []
        for x in (q, k):
            rows = [self.rotary.rotate_queries_or_keys(x[b:b + 1], seq_dim=-2, offset=int(offsets[b, 0]), scale=scale)
                    for b in range(x.shape[0])]
            out.append(torch.cat(rows, dim=0))
        return tuple(out)

    @torch.no_grad()
    def apply_offset(self, q, k, offset):
        """rope.apply_offset: ``rotate_queries_or_keys(x, seq_dim=-2, offset=offset)`` on the whole batch, the
        library's own call (a cache length; no loop over rows)."""
        if self.p.pairing != "interleaved":
            return self.apply(q, k, None)  # its Unsupported, with the reason
        scale = None if self.af is None else float(self.af)
        return tuple(self.rotary.rotate_queries_or_keys(x, seq_dim=-2, offset=int(offset), scale=scale) for x in (q, k))

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: ``rotate_queries_or_keys(x, seq_dim=-3, offset=o)`` on ``[B, T, H, D]`` per row
        (the library broadcasts its angles over the heads for ``seq_dim=-3``)."""
        if self.p.pairing != "interleaved":
            return self.apply(q, k, position_ids)
        ar = torch.arange(position_ids.shape[-1], device=position_ids.device)
        offsets = position_ids[:, :1]
        if not torch.equal(position_ids, offsets + ar):
            raise Unsupported("position_ids that are not offset + arange(T) per row: rotate_queries_or_keys takes "
                              f"only a sequence offset (got {position_ids.tolist()})")
        scale = None if self.af is None else float(self.af)
        return tuple(torch.cat([self.rotary.rotate_queries_or_keys(x[b:b + 1], seq_dim=-3, offset=int(offsets[b, 0]),
                                                                   scale=scale) for b in range(x.shape[0])], dim=0)
                     for x in (q, k))


class RotaryEmbeddingTorchAdapter(Adapter):
    """rotary-embedding-torch 0.9.1's ``RotaryEmbedding`` (see the module docstring)."""

    name = "rotary-embedding-torch"
    #: rope.apply as one ``offset`` for the batch (``rotate_queries_or_keys(offset=...)``), with int32 positions,
    #: and on ``[B, T, H, D]`` (``seq_dim=-3``)
    call_forms = ("rope.apply_offset", "rope.apply_int32", "rope.apply_token_major")
    framework = "torch"
    devices = ("cpu", "cuda")
    notes = ("rotary-embedding-torch 0.9.1: float32 freqs; rotate_queries_or_keys builds positions in the "
             "activation dtype (get_seq_pos), angles and rotation in float32, cast back")

    from_numpy = TorchAdapter.from_numpy
    to_numpy = TorchAdapter.to_numpy
    dtype_of = TorchAdapter.dtype_of
    device_of = TorchAdapter.device_of

    def versions(self):
        return {"torch": torch.__version__,
                "rotary-embedding-torch": importlib.metadata.version("rotary-embedding-torch")}

    def device_available(self, device):
        return torch_device_available(device)

    def rope(self, params, *, dtype, device):
        """ROPE-*, SCALE-LINEAR: a ``RotaryEmbedding`` for the parameters (see the module docstring)."""
        forms_unsupported(params, "rotary-embedding-torch", condense=True)
        t = params.rope_type
        if t not in _ROPE_TYPES:
            raise Unsupported(f"rope_type {t!r}: RotaryEmbedding has plain RoPE, linear position interpolation "
                              "(interpolate_factor) and a static NTK theta_rescale_factor fixed at construction; "
                              "no " + ("per-call dynamic NTK" if t == "dynamic" else t) + " rule")
        if params.rdim == 2:
            raise Unsupported("rotary_dim 2: RotaryEmbedding.__init__ computes theta_rescale_factor ** (dim / (dim - 2)) "
                              "and raises ZeroDivisionError at dim 2 (rotary-embedding-torch 0.9.1)")
        if t == "linear" and params.factor < 1:
            raise Unsupported(f"linear factor {params.factor:g} < 1: RotaryEmbedding asserts interpolate_factor >= 1")
        return for_rotation(_LucidrainsRope(params, DTYPES[dtype], device), params, "rotary-embedding-torch")

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        raise Unsupported("rotary-embedding-torch has no rotation with given cos/sin: apply_rotary_emb takes the "
                          "angles (freqs) and computes cos and sin itself")


ADAPTER = RotaryEmbeddingTorchAdapter
