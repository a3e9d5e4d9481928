"""Position ids (POS-*): prefill, decode, left padding and packed sequences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._common import _last_columns, arange_positions, kernel, on_device


@kernel("seq_len")
def left_pad_positions(attention_mask, cache_length, seq_len):
    """POS-LEFT-PAD: ``cumsum(mask) - 1`` at real tokens, 0 at pads; the last ``seq_len`` columns."""
    m = attention_mask.astype(jnp.int64)
    pos = jnp.where(m == 0, 0, jnp.cumsum(m, axis=-1) - 1)
    return lax.dynamic_slice_in_dim(pos, cache_length, seq_len, axis=1)


@kernel("total")
def packed_positions(cu_seqlens, total):
    """POS-PACKED: each token's offset from the start of its sequence, ``[1, total]``."""
    t = jnp.arange(total, dtype=jnp.int64)
    seq = jnp.searchsorted(cu_seqlens, t, side="right") - 1
    return (t - cu_seqlens[seq])[None]


class Ops:
    """Position-id operation of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def position_ids(self, rule, *, device, **x):
        with on_device(device):
            if rule in ("prefill", "decode"):
                start = x.get("cache_length", 0) if rule == "decode" else 0
                return self.run(arange_positions, start, batch=x["batch"], seq_len=x["seq_len"])
            if rule == "left_pad":
                m, c = x["attention_mask"], x["cache_length"]
                return self.run(left_pad_positions, m, c, seq_len=_last_columns(m, c))
            if rule == "packed":
                cu = np.asarray(jax.device_get(x["cu_seqlens"]))
                if cu.ndim != 1 or cu.size < 1 or cu[0] != 0 or (np.diff(cu) < 0).any():
                    raise ValueError(f"cu_seqlens must be a non-decreasing 1-D array starting at 0, got {cu.tolist()}")
                return self.run(packed_positions, x["cu_seqlens"], total=int(cu[-1]))
        raise ValueError(f"unknown position_ids rule {rule!r}")
