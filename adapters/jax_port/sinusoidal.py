"""Sinusoidal tables (SIN-*): Vaswani and the h - 1 divisor variants (T2T, fairseq, Whisper), in
either block order (SIN-ORDER-COS-FIRST), in radians or turns (SIN-UNITS-TURNS), times an output
scale (SIN-OUTPUT-SCALE); and fairseq's padding-aware positions."""

from __future__ import annotations

import math

import jax.numpy as jnp

from posenc.spec.errors import DegenerateWidth

from ._common import DTYPES, compute_dtype, kernel, padding_aware_positions


@kernel("params", "dtype")
def sinusoidal(position_ids, params, dtype):
    """SIN-VASWANI-* (interleaved or [sin | cos] / [cos | sin]) and the h - 1 divisor variants SIN-T2T /
    SIN-FAIRSEQ-POSITIONS / SIN-WHISPER; frequencies in float64 (times 2π in turns), angles, sin / cos
    and the output scale in the compute dtype; ``[B, T, D]`` rounded once to ``dtype``."""
    cd = compute_dtype(dtype)
    D, v = params.dim, params.variant
    turns = 2 * math.pi if params.units == "turns" else 1.0
    if v == "vaswani":
        j = jnp.arange(D, dtype=jnp.float64)
        if params.layout == "interleaved":
            expo = 2 * jnp.floor(j / 2) / D
            is_sin = jnp.arange(D) % 2 == 0
        else:
            first = (D + 1) // 2 if params.order == "sin_first" else D // 2
            expo = jnp.concatenate((2 * j[:first] / D, 2 * j[: D - first] / D))
            is_sin = (jnp.arange(D) < first) if params.order == "sin_first" else (jnp.arange(D) >= first)
        w = (turns * params.base ** -expo).astype(cd)
        phi = position_ids.astype(cd)[..., None] * w
        return _scaled(jnp.where(is_sin, jnp.sin(phi), jnp.cos(phi)), params).astype(dtype)
    h = D // 2
    i = jnp.arange(h, dtype=jnp.float64)
    w = (turns * params.base ** (-i / max(h - 1, 1))).astype(cd)
    phi = position_ids.astype(cd)[..., None] * w
    parts = [jnp.sin(phi), jnp.cos(phi)][:: 1 if params.order == "sin_first" else -1]
    if D % 2:
        parts.append(jnp.zeros(phi.shape[:-1] + (1,), cd))
    pe = jnp.concatenate(parts, axis=-1)
    if v == "fairseq":
        pe = jnp.where((position_ids == params.padding_idx)[..., None], 0.0, pe)
    return _scaled(pe, params).astype(dtype)


def _scaled(pe, params):
    """SIN-OUTPUT-SCALE: the table times ``params.scale`` in its compute dtype (unchanged at 1)."""
    return pe if params.scale == 1.0 else pe * params.scale


def check_sinusoid_width(params) -> None:
    """DegenerateWidth for the widths SIN-WHISPER / SIN-FAIRSEQ-POSITIONS cannot build."""
    D, v = params.dim, params.variant
    if v == "whisper" and D % 2:
        raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
    if v in ("fairseq", "whisper") and D // 2 == 1:
        raise DegenerateWidth("SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS", D,
                              f"h = D // 2 = 1 makes the {v} divisor h - 1 zero")


class Ops:
    """Sinusoidal operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def sinusoidal(self, position_ids, params, *, dtype, device):
        check_sinusoid_width(params)
        return self.run(sinusoidal, position_ids, params=params, dtype=DTYPES[dtype])

    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``(cumsum(mask) + cache_length) * mask + padding_idx``."""
        return self.run(padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)
