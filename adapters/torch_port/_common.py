"""Helpers the torch port's families share: dtypes, devices, row checks, the rotation."""

from __future__ import annotations

import torch

from posenc.spec.errors import PositionOutOfRange

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def torch_device_available(device: str) -> bool:
    """``cpu``, ``cuda`` or ``cuda:N`` present on this machine (N < torch.cuda.device_count())."""
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return not index
    if kind != "cuda" or not torch.cuda.is_available():
        return False
    return not index or (index.isdigit() and int(index) < torch.cuda.device_count())


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
    elif pairing == "deinterleave":  # pairs (2i, 2i + 1) in, written to (i, i + r/2)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return torch.cat((y.to(x.dtype), x[..., rotary_dim:]), dim=-1)


class LayoutForms:
    """The call forms of a prepared rotation whose ``apply(q, k, position_ids)`` takes q, k ``[B, H, T, D]`` at
    positions ``[B, T]`` (M-RoPE's and axial's ``[A, B, T]``): tokens, the token-major layout, in place (spec
    ``<op>_tokens``, ``<op>_token_major``, ``<op>_inplace``; ROPE-CALL-FORM).  int32 positions and strided
    views are ``apply`` itself."""

    def apply_tokens(self, q, k, positions):
        """q, k ``[N, H, D]``, token n at ``positions[..., n]``: one row of N tokens."""
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], positions[..., None, :])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)

    def apply_token_major(self, q, k, position_ids):
        """q, k ``[B, T, H, D]``."""
        q2, k2 = self.apply(q.transpose(1, 2), k.transpose(1, 2), position_ids)
        return q2.transpose(1, 2), k2.transpose(1, 2)

    def apply_(self, q, k, position_ids):
        """q and k (strided views) overwritten with their rotation."""
        q2, k2 = self.apply(q, k, position_ids)
        q.copy_(q2)
        k.copy_(k2)


def padding_aware_positions(input_ids: torch.Tensor, padding_idx: int, cache_length: int) -> torch.Tensor:
    """fairseq ``make_positions`` with HF's cache offset: ``(cumsum(mask) + C) * mask + padding_idx``."""
    m = (input_ids != padding_idx).to(torch.int64)
    return (torch.cumsum(m, dim=-1) + cache_length) * m + padding_idx
