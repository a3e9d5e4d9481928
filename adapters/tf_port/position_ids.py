"""Position ids (POS-*): prefill, decode, left padding and packed sequences."""

from __future__ import annotations

from ._common import I64, KernelRunner, k_arange_positions, tf


def k_left_pad_positions(attention_mask, cache_length):
    """POS-LEFT-PAD: ``cumsum(mask) - 1``, 0 at padded slots, the last T columns."""
    m = tf.cast(attention_mask, I64)
    pos = tf.where(m == 0, tf.zeros_like(m), tf.cumsum(m, axis=-1) - 1)
    return pos[:, cache_length:]


def k_packed_positions(cu_seqlens):
    """POS-PACKED: positions restart at every ``cu_seqlens`` boundary, ``[1, total]``."""
    cu = tf.cast(cu_seqlens, I64)
    starts = tf.repeat(cu[:-1], cu[1:] - cu[:-1])
    return (tf.range(cu[-1], dtype=I64) - starts)[None]


class Ops(KernelRunner):
    """Adapter methods of the position_ids family."""

    def position_ids(self, rule, *, device, **x):
        if rule in ("prefill", "decode"):
            start = x.get("cache_length", 0) if rule == "decode" else 0
            return self.run(k_arange_positions, x["batch"], x["seq_len"], start, device=device)
        if rule == "left_pad":
            return self.run(k_left_pad_positions, x["attention_mask"], x["cache_length"], device=device)
        if rule == "packed":
            return self.run(k_packed_positions, x["cu_seqlens"], device=device)
        raise ValueError(f"unknown position_ids rule {rule!r}")
