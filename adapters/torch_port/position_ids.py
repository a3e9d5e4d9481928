"""Position ids (POS-*): prefill, decode, left padding and packed sequences."""

from __future__ import annotations

import torch


class Ops:
    """Position-id operations of the torch port."""

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
