"""T5 relative position buckets and bias (T5-*)."""

from __future__ import annotations

import math

import torch

from ._common import check_rows


def t5_buckets(relative_position: torch.Tensor, params) -> torch.Tensor:
    rel = relative_position.to(torch.int64)
    nb = params.num_buckets
    out = torch.zeros_like(rel)
    if params.bidirectional:
        nb //= 2
        out = out + (rel > 0).to(torch.int64) * nb
        n = rel.abs()
    else:
        n = (-rel).clamp(min=0)
    e = nb // 2
    safe = n.clamp(min=e).to(torch.float64)
    large = e + torch.trunc(torch.log(safe / e) / math.log(params.max_distance / e) * (nb - e)).to(torch.int64)
    large = large.clamp(max=nb - 1)
    return out + torch.where(n < e, n, large)


class Ops:
    """T5 operations of the torch port."""

    # ---- T5 ------------------------------------------------------------------------------
    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: float64 log, never of 0, truncated."""
        return self._buckets(relative_position, params)

    def _buckets(self, relative_position, params) -> torch.Tensor:
        return t5_buckets(relative_position, params)

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS: ``table[bucket(j - i - cache_length)]`` ``[H, Tq, Tk]``; buckets range-checked."""
        table = weights["table"]
        if table.ndim != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], got {list(table.shape)}")

        def call(query_length, key_length, cache_length=0):
            ctx = torch.arange(query_length, device=table.device)[:, None] + cache_length
            mem = torch.arange(key_length, device=table.device)[None, :]
            b = self._buckets(mem - ctx, params)
            check_rows(b, table.shape[0])
            return table[b].permute(2, 0, 1).contiguous()
        return call
