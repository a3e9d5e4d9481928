"""Sinusoidal tables (SIN-*): Vaswani and the h - 1 divisor variants (T2T, fairseq, Whisper), and
fairseq's padding-aware positions."""

from __future__ import annotations

import jax.numpy as jnp

from posenc.spec.errors import DegenerateWidth

from ._common import DTYPES, compute_dtype, kernel, padding_aware_positions


@kernel("params", "dtype")
def sinusoidal(position_ids, params, dtype):
    """SIN-VASWANI-* (interleaved or [sin | cos]) and the h - 1 divisor variants SIN-T2T /
    SIN-FAIRSEQ-POSITIONS / SIN-WHISPER; ``[B, T, D]`` rounded once to ``dtype``."""
    cd = compute_dtype(dtype)
    D, v = params.dim, params.variant
    if v == "vaswani":
        j = jnp.arange(D, dtype=jnp.float64)
        if params.layout == "interleaved":
            expo = 2 * jnp.floor(j / 2) / D
            is_sin = jnp.arange(D) % 2 == 0
        else:
            ns = (D + 1) // 2
            expo = jnp.concatenate((2 * j[:ns] / D, 2 * j[: D - ns] / D))
            is_sin = jnp.arange(D) < ns
        w = (params.base ** -expo).astype(cd)
        phi = position_ids.astype(cd)[..., None] * w
        return jnp.where(is_sin, jnp.sin(phi), jnp.cos(phi)).astype(dtype)
    h = D // 2
    i = jnp.arange(h, dtype=jnp.float64)
    w = (params.base ** (-i / max(h - 1, 1))).astype(cd)
    phi = position_ids.astype(cd)[..., None] * w
    parts = [jnp.sin(phi), jnp.cos(phi)]
    if D % 2:
        parts.append(jnp.zeros(phi.shape[:-1] + (1,), cd))
    pe = jnp.concatenate(parts, axis=-1)
    if v == "fairseq":
        pe = jnp.where((position_ids == params.padding_idx)[..., None], 0.0, pe)
    return pe.astype(dtype)


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
