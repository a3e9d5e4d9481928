"""Axial RoPE (AXIAL-*) through transformers' own vision rotary modules and apply functions: the
Qwen2.5-VL vision tower (split, height first), Step 3.7 (split, width first), Pixtral (split,
alternating frequencies), Gemma 4 vision (blocks), SAM 2 video (interleaved, height first),
Inkling 2 (interleaved, width first), Kimi K2.5 (alternate, width first) and MiniMax-M3 (three
axes, split, pass-through tail); centred coordinates (AXIAL-COORDINATES-CENTRED) through
EoMT-DINOv3's rotary module, which takes pixel values and tabulates every patch of the image's
grid itself (split, height first)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as hf_eomt
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

    @torch.no_grad()
    def apply_tokens(self, q, k, positions):
        """axial.apply_tokens: q, k ``[N, H, D]`` at positions ``[A, N]`` in one call -- the vision towers' own
        layout (Qwen2.5-VL, Step 3.7, Inkling 2, Kimi K2.5, MiniMax-M3 put every image's patches in one
        sequence ``[seq, heads, dim]`` with positions ``[seq, A]``)."""
        if self.form != "seq":
            raise Unsupported(f"the transformers model with this layout ({self.p.layout}, axis order "
                              f"{list(self.p.order)}) rotates a batch layout, not a sequence of tokens")
        if positions.dim() != 2 or positions.shape[0] != self.p.num_axes:
            raise ValueError(f"positions must be [{self.p.num_axes}, N], got {list(positions.shape)}")
        cos, sin = self.rotary(q, positions.T.contiguous())
        yq, yk = self.fn(q, k, cos, sin)
        return yq.to(q.dtype), yk.to(k.dtype)


class _CentredAxial:
    """EoMT-DINOv3's ``EomtDinov3RotaryEmbedding`` (built from an ``EomtDinov3Config`` with the case's
    head width as hidden_size over one head and its rope_theta; eval mode: no coordinate
    augmentation) and its ``apply_rotary_pos_emb``.  The module's forward takes pixel values and
    tabulates every patch of their grid (H // patch_size, W // patch_size) row by row, so a case is
    expressible only where every batch row's positions are exactly that full grid, in that order;
    pixel values ``[1, 3, n_h patch, n_w patch]`` in the activation dtype (the model passes them in
    its hidden states' dtype, which its cos / sin take)."""

    def __init__(self, params, dtype: torch.dtype, device):
        layout = (params.num_axes, params.frequencies, params.layout, params.order)
        if layout != (2, "shared", "split", (0, 1)):
            raise Unsupported(f"transformers' centred-coordinate axial RoPE (EoMT-DINOv3's, run here; DINOv3-ViT's "
                              f"is the same rule) is 2 axes, shared "
                              f"frequencies, split, height first; not {params.num_axes} axes, {params.frequencies} "
                              f"frequencies, layout {params.layout}, axis order {list(params.order)}")
        if params.axis_dim is not None and params.axis_dim != params.head_dim // 2:
            raise Unsupported("EoMT-DINOv3's rotary module derives the axis width from the head (axis_dim not settable)")
        if params.head_dim % 4:
            raise Unsupported(f"head_dim {params.head_dim} is not a multiple of 4: EomtDinov3RotaryEmbedding takes "
                              f"arange(0, 1, 4 / head_dim) frequencies per axis, which no AXIAL-* layout matches there")
        if math.ceil(1 / (4 / params.head_dim)) != params.head_dim // 4:  # torch's arange length rule
            raise Unsupported(f"head_dim {params.head_dim}: EomtDinov3RotaryEmbedding's arange(0, 1, 4 / head_dim) has "
                              f"{math.ceil(1 / (4 / params.head_dim))} entries, not head_dim / 4: its apply cannot "
                              f"run at this width (a transformers defect)")
        cfg = hf_eomt.EomtDinov3Config(hidden_size=params.head_dim, num_attention_heads=1,
                                       rope_parameters={"rope_type": "default", "rope_theta": float(params.rope_theta)})
        self.patch = cfg.patch_size
        self.p, self.dtype, self.device = params, dtype, device
        self.rotary = hf_eomt.EomtDinov3RotaryEmbedding(cfg).to(device).eval()

    def _check(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != 2:
            raise ValueError(f"position_ids must be [2, B, T], got {list(position_ids.shape)}")
        n_h, n_w = self.p.grid_size
        i = torch.arange(n_h * n_w, device=position_ids.device)
        full = torch.stack([i // n_w, i % n_w])  # every patch, row by row
        if position_ids.shape[2] != n_h * n_w or not all(torch.equal(position_ids[:, b], full)
                                                         for b in range(position_ids.shape[1])):
            raise Unsupported(f"EomtDinov3RotaryEmbedding tabulates every patch of the image's {n_h} x {n_w} grid row "
                              f"by row (its forward takes pixel values, no positions): only position_ids that are "
                              f"that full grid, in that order, in every batch row, are expressible")

    @torch.no_grad()
    def _table(self):
        """The module's cos, sin ``[n_h n_w, head_dim]`` for a ``[1, 3, n_h patch, n_w patch]`` image."""
        n_h, n_w = self.p.grid_size
        pixels = torch.zeros(1, 3, n_h * self.patch, n_w * self.patch, dtype=self.dtype, device=self.device)
        return self.rotary(pixels)

    @torch.no_grad()
    def cos_sin(self, position_ids):
        self._check(position_ids)
        B, R = position_ids.shape[1], self.p.rdim
        out = []
        for full in self._table():  # tile(2): cat(a, a) over the head
            a, b = full[..., :R // 2], full[..., R // 2:R]
            if not torch.equal(a, b):
                raise AdapterError("hf-transformers: EoMT-DINOv3's cos/sin is not the split layout's duplicate")
            out.append(a[None].expand(B, -1, -1).to(self.dtype))
        return tuple(out)

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        self._check(position_ids)
        cos, sin = self._table()
        yq, yk = hf_eomt.apply_rotary_pos_emb(q, k, cos, sin)  # q [B, H, T, D]: every token a patch here
        return yq.to(q.dtype), yk.to(k.dtype)

    def apply_tokens(self, q, k, positions):
        raise Unsupported("EomtDinov3RotaryEmbedding tabulates one image's whole grid (its forward takes pixel "
                          "values): it has no form of tokens at given positions")


class Ops:
    """The axial RoPE operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def axial(self, params, *, dtype, device):
        """AXIAL-* through the transformers vision rotary module of the model with that layout (centred
        coordinates: EoMT-DINOv3's; the index-coordinate modules never see a centred case)."""
        from ..torch_adapter import DTYPES
        if params.coordinates == "centred":
            return _CentredAxial(params, DTYPES[dtype], device)
        return _Axial(params, DTYPES[dtype], device)
