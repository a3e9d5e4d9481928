"""Sinusoidal tables (SIN-*): the Vaswani layouts and the h - 1 divisor variants (t2t, fairseq,
whisper), in either block order (SIN-ORDER-COS-FIRST), in radians or turns (SIN-UNITS-TURNS), times
an output scale (SIN-OUTPUT-SCALE); fairseq's padding-aware positions."""

from __future__ import annotations

import math

from posenc.spec.errors import DegenerateWidth

from ._common import DTYPES, F64, KernelRunner, compute_dtype, k_padding_aware_positions, tf


def k_sinusoidal(position_ids, *, p, dt):
    """SIN-VASWANI-* (and, for the other variants, the h - 1 divisor of SIN-T2T, -FAIRSEQ, -WHISPER):
    frequencies in float64 (times 2π in turns), angles, sin / cos and the output scale in the compute
    dtype, ``[B, T, D]`` cast once to ``dt``."""
    cd = compute_dtype(dt)
    D = p.dim
    if p.variant != "vaswani":
        h = D // 2
        w = tf.cast(_turns(p) * tf.pow(tf.constant(p.base, F64), -tf.range(h, dtype=F64) / max(h - 1, 1)), cd)
        phi = tf.cast(position_ids, cd)[..., None] * w
        # the zero column of an odd D (from the positions' shape: at D = 1, phi has no column to copy)
        zero = tf.zeros(tf.concat([tf.shape(position_ids), [1]], 0), cd)
        parts = [tf.sin(phi), tf.cos(phi)][:: 1 if p.order == "sin_first" else -1] + ([zero] if D % 2 else [])
        pe = tf.concat(parts, axis=-1)
        if p.variant == "fairseq":
            pe = tf.where((position_ids == p.padding_idx)[..., None], tf.zeros_like(pe), pe)
        return tf.cast(_scaled(pe, p), dt)
    j = tf.range(D, dtype=F64)
    if p.layout == "interleaved":
        expo = 2 * tf.floor(j / 2) / D
        is_sin = tf.range(D) % 2 == 0
    else:
        first = (D + 1) // 2 if p.order == "sin_first" else D // 2
        expo = tf.concat([2 * j[:first] / D, 2 * j[: D - first] / D], 0)
        is_sin = tf.range(D) < first if p.order == "sin_first" else tf.range(D) >= first
    w = tf.cast(_turns(p) * tf.pow(tf.constant(p.base, F64), -expo), cd)
    phi = tf.cast(position_ids, cd)[..., None] * w
    return tf.cast(_scaled(tf.where(is_sin, tf.sin(phi), tf.cos(phi)), p), dt)


def _turns(p) -> float:
    """SIN-UNITS-TURNS: 2π from turns to radians (1 for radians)."""
    return 2 * math.pi if p.units == "turns" else 1.0


def _scaled(pe, p):
    """SIN-OUTPUT-SCALE: the table times ``p.scale`` in its compute dtype (unchanged at 1)."""
    return pe if p.scale == 1.0 else pe * p.scale


class Ops(KernelRunner):
    """Adapter methods of the sinusoidal family."""

    def sinusoidal(self, position_ids, params, *, dtype, device):
        D, v = params.dim, params.variant
        if v == "whisper" and D % 2:
            raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
        if v in ("fairseq", "whisper") and D // 2 == 1:
            raise DegenerateWidth("SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS", D,
                                  f"h = D // 2 = 1 makes the {v} divisor h - 1 zero")
        return self.run(k_sinusoidal, position_ids, device=device, p=params, dt=DTYPES[dtype])

    def fairseq_positions(self, input_ids, params, cache_length):
        return self.run(k_padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)
