"""The ``torch`` adapter: the kit's own faithful PyTorch port of every operation.

Dtype policy (clause ROPE-PRECISION / SIN-PRECISION): inverse frequencies are computed in
float64 and held in float32 (float64 for float64 activations); angles, cos/sin and the
rotation are computed in that precision and the result is rounded once to the activation
dtype (the Meta / torchtune policy).  Devices: ``cpu``, and ``cuda`` when present.  Rows and
positions are range-checked before any indexing, so an out-of-range index never reaches a GPU
kernel (clause LEARNED-ROW-RANGE).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from posenc.spec.errors import PositionOutOfRange

from .base import Adapter

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_rows(rows: torch.Tensor, num_rows: int) -> None:
    """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows`` (before indexing)."""
    if rows.numel():
        lo, hi = int(rows.min()), int(rows.max())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, pairing: str) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]``; cos/sin ``[B, T, r/2]``.

    Computed in ``cos.dtype``, rounded once to ``x.dtype``; the tail is returned as is.
    """
    xr = x[..., :rotary_dim].to(cos.dtype)
    c, s = cos[:, None], sin[:, None]
    if pairing == "half":
        h = rotary_dim // 2
        x1, x2 = xr[..., :h], xr[..., h:]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return torch.cat((y.to(x.dtype), x[..., rotary_dim:]), dim=-1)


class TorchRope:
    """Prepared RoPE for one parameter set, dtype and device (see module docstring)."""

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype, self.device = params, dtype, device
        self.compute = compute_dtype(dtype)
        r = params.rdim
        expo = torch.arange(0, r, 2, dtype=torch.float64, device=device) / r
        self._inv_freq = (params.rope_theta ** -expo).to(self.compute)

    def inv_freq(self):
        return self._inv_freq, float(self.p.attention_factor)

    def _cos_sin(self, position_ids):
        phi = position_ids.to(self.compute)[..., None] * self._inv_freq
        a = self.p.attention_factor
        return a * torch.cos(phi), a * torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        r, pr = self.p.rdim, self.p.pairing
        return rotate(q, c, s, r, pr), rotate(k, c, s, r, pr)


class TorchAdapter(Adapter):
    name = "torch"
    framework = "torch"
    devices = ("cpu", "cuda")
    range_probe_devices = ("cpu", "cuda")  # rows are checked before indexing
    notes = "kit's own port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype"

    def versions(self):
        return {"torch": torch.__version__}

    def device_available(self, device):
        return device == "cpu" or (device == "cuda" and torch.cuda.is_available())

    def from_numpy(self, array, dtype, device):
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t.to(device=device, dtype=DTYPES[dtype])

    def to_numpy(self, x):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.to(torch.float32)
        return x.numpy()

    def dtype_of(self, x):
        return str(x.dtype).removeprefix("torch.")

    def device_of(self, x):
        return x.device.type

    # ---- RoPE ----------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        return TorchRope(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        cd = compute_dtype(q.dtype)
        c, s = cos.to(cd), sin.to(cd)
        return rotate(q, c, s, params.rdim, params.pairing), rotate(k, c, s, params.rdim, params.pairing)

    # ---- sinusoidal --------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        dt = DTYPES[dtype]
        cd = compute_dtype(dt)
        D = params.dim
        j = torch.arange(D, dtype=torch.float64, device=device)
        if params.layout == "interleaved":
            expo = 2 * torch.div(j, 2, rounding_mode="floor") / D
            is_sin = (torch.arange(D, device=device) % 2) == 0
        else:
            ns = (D + 1) // 2
            expo = torch.cat((2 * j[:ns] / D, 2 * j[: D - ns] / D))
            is_sin = torch.arange(D, device=device) < ns
        w = (params.base ** -expo).to(cd)
        phi = position_ids.to(cd)[..., None] * w
        return torch.where(is_sin, torch.sin(phi), torch.cos(phi)).to(dt)

    # ---- learned -------------------------------------------------------------------------
    def lookup(self, table, rows):
        check_rows(rows, table.shape[0])
        return F.embedding(rows, table)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                B, T = input_ids.shape
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            return self.lookup(wte, input_ids) + self.lookup(wpe, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            B, T = input_ids.shape
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            if position_ids is None:
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            x = self.lookup(w["word_embeddings"], input_ids) + self.lookup(w["token_type_embeddings"], token_type_ids)
            x = x + self.lookup(w["position_embeddings"], position_ids)
            return F.layer_norm(x, (x.shape[-1],), w["layer_norm_weight"], w["layer_norm_bias"], params.layer_norm_eps)
        return call

    def opt_positions(self, attention_mask, cache_length):
        m = attention_mask.to(torch.int64)
        return (torch.cumsum(m, dim=-1) * m - 1)[:, cache_length:]

    def opt_rows(self, positions):
        return positions + 2

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

    # ---- position ids --------------------------------------------------------------------
    def position_ids(self, rule, *, device, **x):
        if rule in ("prefill", "decode"):
            start = x.get("cache_length", 0) if rule == "decode" else 0
            return (start + torch.arange(x["seq_len"], device=device)).expand(x["batch"], x["seq_len"])
        if rule == "left_pad":
            m = x["attention_mask"].to(torch.int64)
            pos = (torch.cumsum(m, dim=-1) - 1).masked_fill(m == 0, 0)
            return pos[:, x["cache_length"]:]
        if rule == "packed":
            cu = x["cu_seqlens"].to(torch.int64)
            lengths = cu[1:] - cu[:-1]
            starts = torch.repeat_interleave(cu[:-1], lengths)
            return (torch.arange(int(cu[-1]), device=cu.device) - starts)[None]
        raise ValueError(f"unknown position_ids rule {rule!r}")


ADAPTER = TorchAdapter
