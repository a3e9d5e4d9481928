"""Axial RoPE (AXIAL-*) through transformers' own vision rotary modules and apply functions: the
Qwen2.5-VL vision tower (split, height first), Step 3.7 (split, width first), Pixtral (split,
alternating frequencies), Gemma 4 vision (blocks), SAM 2 video (interleaved, height first),
Inkling 2 (interleaved, width first), Kimi K2.5 (alternate, width first) and MiniMax-M3 (three
axes, split, pass-through tail)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from transformers.models.gemma4 import modeling_gemma4 as hf_gemma4
from transformers.models.inkling2 import modeling_inkling2 as hf_inkling2
from transformers.models.kimi_k25 import modeling_kimi_k25 as hf_kimi
from transformers.models.minimax_m3_vl import modeling_minimax_m3_vl as hf_minimax
from transformers.models.pixtral import modeling_pixtral as hf_pixtral
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as hf_qwen25vl
from transformers.models.sam2_video import modeling_sam2_video as hf_sam2v
from transformers.models.step3p7 import modeling_step3p7 as hf_step

from posenc.spec.errors import AdapterError

from ..base import Unsupported


#: (num_axes, frequencies, layout, axis order) -> (rotary module class, apply, q layout)
_MODELS = {
    (2, "shared", "split", (0, 1)): (hf_qwen25vl.Qwen2_5_VLVisionRotaryEmbedding,
                                     hf_qwen25vl.apply_rotary_pos_emb_vision, "seq"),
    (2, "shared", "split", (1, 0)): (hf_step.Step3p7VisionRotaryEmbedding, hf_step.apply_rotary_pos_emb_vision, "seq"),
    (2, "alternating", "split", (0, 1)): (hf_pixtral.PixtralVisionRotaryEmbedding, hf_pixtral.apply_rotary_pos_emb,
                                          "pixtral"),
    (2, "shared", "blocks", (0, 1)): (hf_gemma4.Gemma4VisionRotaryEmbedding, hf_gemma4.apply_multidimensional_rope,
                                      "gemma4"),
    # SAM 3 ViT has the same layout but its module needs torchvision
    (2, "shared", "interleaved", (0, 1)): (hf_sam2v.Sam2VideoVisionRotaryEmbedding, hf_sam2v.apply_rotary_pos_emb_2d,
                                           "sam"),
    (2, "shared", "interleaved", (1, 0)): (hf_inkling2.Inkling2VisionRotaryEmbedding,
                                           hf_inkling2.apply_rotary_pos_emb_vision, "seq"),
    (2, "shared", "alternate", (1, 0)): (hf_kimi.Kimi_K25VisionRotaryEmbedding, hf_kimi.apply_rotary_pos_emb_vision,
                                         "seq"),
    (3, "shared", "split", (0, 1, 2)): (hf_minimax.MiniMaxM3VLVisionRotaryEmbedding,
                                        hf_minimax.apply_rotary_pos_emb_vision, "seq"),
}


class _Axial:
    """One transformers vision rotary module (built from a config holding only what its
    ``compute_axial_rope_parameters`` reads: ``rope_parameters``, ``head_dim``) and its model's
    apply function, called per batch row with positions ``[T, A]`` (Gemma 4: ``[1, T, A]``) and q
    laid out as that model's attention lays it out."""

    def __init__(self, params, dtype: torch.dtype, device):
        key = (params.num_axes, params.frequencies, params.layout, params.order)
        if key not in _MODELS:
            raise Unsupported(f"no transformers vision model has axial RoPE with {params.num_axes} axes, "
                              f"{params.frequencies} frequencies, layout {params.layout}, axis order "
                              f"{list(params.order)}")
        if params.axis_dim is not None and params.axis_dim != 2 * (params.head_dim // (2 * params.num_axes)):
            raise Unsupported("transformers' axial modules derive the axis width from head_dim (axis_dim not settable)")
        if params.num_axes == 2 and params.head_dim % 4:
            raise Unsupported(f"head_dim {params.head_dim} is not a multiple of 4: transformers' two-axis modules "
                              f"take head_dim // 2 = {params.head_dim // 2} (odd) dims per axis, rotating more "
                              f"dims than the head has (Pixtral: height and width of different widths), where "
                              f"AXIAL-PARTIAL passes the last 2 through")
        cls, self.fn, self.form = _MODELS[key]
        D = params.head_dim
        cfg = SimpleNamespace(rope_parameters={"rope_type": "axial", "rope_theta": float(params.rope_theta)},
                              head_dim=D, hidden_size=D, num_attention_heads=1, memory_attention_hidden_size=D,
                              memory_attention_downsample_rate=1, memory_attention_num_attention_heads=1)
        self.p, self.dtype, self.device = params, dtype, device
        self.rotary = cls(cfg).to(device)

    def _row(self, position_ids, b):
        pos = position_ids[:, b].T.contiguous()  # [T, A]
        return pos[None] if self.form == "gemma4" else pos

    @torch.no_grad()
    def _full(self, position_ids, b, x):
        return self.rotary(x, self._row(position_ids, b))

    def _per_pair(self, full):
        """The module's per-dim cos ``[T, R]`` (SAM's ``[1, T, R]``) back to one entry per pair."""
        full = full.reshape(full.shape[-2], full.shape[-1])
        n, R = self.p.adim // 2, self.p.rdim
        if self.p.layout == "interleaved":
            a, b = full[..., 0::2], full[..., 1::2]
        elif self.p.layout == "blocks":
            a = torch.cat([full[..., i * 2 * n:i * 2 * n + n] for i in range(self.p.num_axes)], -1)
            b = torch.cat([full[..., i * 2 * n + n:(i + 1) * 2 * n] for i in range(self.p.num_axes)], -1)
        else:
            a, b = full[..., :R // 2], full[..., R // 2:R]
        if not torch.equal(a, b):
            raise AdapterError(f"hf-transformers: the vision cos/sin is not the {self.p.layout} layout's duplicate")
        return a

    def _check(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != self.p.num_axes:
            raise ValueError(f"position_ids must be [{self.p.num_axes}, B, T], got {list(position_ids.shape)}")

    @torch.no_grad()
    def cos_sin(self, position_ids):
        self._check(position_ids)
        x = torch.empty(0, dtype=self.dtype, device=position_ids.device)
        cs = [self._full(position_ids, b, x) for b in range(position_ids.shape[1])]
        return tuple(torch.stack([self._per_pair(c[i]) for c in cs]).to(self.dtype) for i in (0, 1))

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        self._check(position_ids)
        qs, ks = [], []
        for b in range(q.shape[0]):
            cos, sin = self._full(position_ids, b, q)
            qb, kb = q[b], k[b]  # [H, T, D]
            if self.form == "seq":  # [T, H, D]
                yq, yk = self.fn(qb.transpose(0, 1), kb.transpose(0, 1), cos, sin)
                yq, yk = yq.transpose(0, 1), yk.transpose(0, 1)
            elif self.form == "pixtral":  # [1, H, T, D], cos [T, D] unsqueezed at 0
                yq, yk = self.fn(qb[None], kb[None], cos, sin, unsqueeze_dim=0)
                yq, yk = yq[0], yk[0]
            elif self.form == "sam":  # [1, H, T, D], cos [1, T, D]
                yq, yk = self.fn(qb[None], kb[None], cos, sin)
                yq, yk = yq[0], yk[0]
            else:  # Gemma 4: x [1, T, H, D], position_ids [1, T, A]
                pos = self._row(position_ids, b)
                yq = self.fn(qb.transpose(0, 1)[None], cos, sin, pos)[0].transpose(0, 1)
                yk = self.fn(kb.transpose(0, 1)[None], cos, sin, pos)[0].transpose(0, 1)
            qs.append(yq.to(q.dtype))
            ks.append(yk.to(k.dtype))
        return torch.stack(qs), torch.stack(ks)


class Ops:
    """The axial RoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def axial(self, params, *, dtype, device):
        """AXIAL-* through the transformers vision rotary module of the model with that layout."""
        from ..torch_adapter import DTYPES
        return _Axial(params, DTYPES[dtype], device)
