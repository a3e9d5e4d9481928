"""ALiBi (ALIBI-*): slopes and the causal, symmetric, BLOOM and MPT bias forms."""

from __future__ import annotations

import torch

from ._common import DTYPES, compute_dtype


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


def alibi_slopes(params, dtype: torch.dtype, device) -> torch.Tensor:
    """``[H]`` slopes ``2^(-e)``: c = 2^floor(log2 n) slopes, then every other slope of 2c."""
    n, B = params.num_heads, params.alibi_bias_max
    c = 1 << (n.bit_length() - 1)
    e = [B * k / c for k in range(1, c + 1)] + [B * (2 * j + 1) / (2 * c) for j in range(n - c)]
    return torch.exp2(-torch.tensor(e, dtype=torch.float64, device=device)).to(dtype)


class Ops:
    """ALiBi operations of the torch port."""

    # ---- ALiBi ---------------------------------------------------------------------------
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES: exact ``2^(-e)`` from float64 exponents, held in float32 (float64 for
        float64 activations)."""
        return self._slopes(params, compute_dtype(DTYPES[dtype]), device)

    def _slopes(self, params, dtype: torch.dtype, device) -> torch.Tensor:
        return alibi_slopes(params, dtype, device)

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-CAUSAL / -SYMMETRIC / -BLOOM / -MPT: computed in the compute dtype from integer
        distances, rounded once to ``dtype``; ``[H, Tq, Tk]`` (bloom ``[B, H, Tq, Tk]``)."""
        dt = DTYPES[dtype]
        cd = compute_dtype(dt)
        m = self._slopes(params, cd, device)
        if params.form == "bloom":
            if attention_mask is None:
                raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
            mask = attention_mask.to(torch.int64)
            B, tk = mask.shape
            _check_lengths(query_length, tk)
            pos = (torch.cumsum(mask, dim=-1) - 1) * mask
            out = m[None, :, None, None] * pos[:, None, None, :].to(cd)
            return out.expand(B, params.num_heads, query_length, tk).to(dt).contiguous()
        _check_lengths(query_length, key_length)
        i = torch.arange(query_length, device=device) + (key_length - query_length)
        j = torch.arange(key_length, device=device)
        d = (i[:, None] - j[None, :]).to(cd)
        if params.form == "causal":
            out = -m[:, None, None] * d
        elif params.form == "symmetric":
            out = -m[:, None, None] * d.abs()
        elif params.form == "mpt":
            row = (j - (key_length - 1)).to(cd)
            out = (m[:, None, None] * row[None, None, :]).expand(params.num_heads, query_length, key_length)
        else:
            raise ValueError(f"unknown ALiBi form {params.form!r}")
        return out.to(dt).contiguous()
