"""ALiBi (ALIBI-*): exact slopes and the causal, symmetric, MPT and BLOOM biases."""

from __future__ import annotations

import jax.numpy as jnp

from ._common import DTYPES, compute_dtype, kernel, on_device


def alibi_exponents(params) -> tuple[float, ...]:
    """ALIBI-SLOPES exponents e of ``2^(-e)``: c = 2^floor(log2 n) slopes, then every other slope of 2c."""
    n, B = params.num_heads, params.alibi_bias_max
    c = 1 << (n.bit_length() - 1)
    return tuple([B * k / c for k in range(1, c + 1)] + [B * (2 * j + 1) / (2 * c) for j in range(n - c)])


@kernel("exponents", "cd")
def alibi_slopes(exponents, cd):
    """ALIBI-SLOPES: ``2^(-e)`` from float64 exponents, held in ``cd``."""
    return jnp.exp2(-jnp.asarray(exponents, jnp.float64)).astype(cd)


@kernel("params", "query_length", "key_length", "dtype")
def alibi_bias(params, query_length, key_length, dtype):
    """ALIBI-CAUSAL / -SYMMETRIC / -MPT ``[H, Tq, Tk]`` (queries are the last Tq keys), computed in the
    compute dtype from integer distances, rounded once to ``dtype``."""
    cd = compute_dtype(dtype)
    m = alibi_slopes(alibi_exponents(params), cd)
    i = jnp.arange(query_length) + (key_length - query_length)
    j = jnp.arange(key_length)
    d = (i[:, None] - j[None, :]).astype(cd)
    if params.form == "causal":
        out = -m[:, None, None] * d
    elif params.form == "symmetric":
        out = -m[:, None, None] * jnp.abs(d)
    elif params.form == "mpt":
        row = (j - (key_length - 1)).astype(cd)
        out = jnp.broadcast_to(m[:, None, None] * row[None, None, :], (params.num_heads, query_length, key_length))
    else:
        raise ValueError(f"unknown ALiBi form {params.form!r}")
    return out.astype(dtype)


@kernel("params", "query_length", "dtype")
def alibi_bloom(attention_mask, params, query_length, dtype):
    """ALIBI-BLOOM: ``m_h pos_j`` with ``pos = (cumsum(mask) - 1) * mask``, ``[B, H, Tq, Tk]``."""
    cd = compute_dtype(dtype)
    m = alibi_slopes(alibi_exponents(params), cd)
    mask = attention_mask.astype(jnp.int64)
    B, tk = mask.shape
    pos = (jnp.cumsum(mask, axis=-1) - 1) * mask
    out = m[None, :, None, None] * pos[:, None, None, :].astype(cd)
    return jnp.broadcast_to(out, (B, params.num_heads, query_length, tk)).astype(dtype)


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


class Ops:
    """ALiBi operations of :class:`~posenc.adapters.jax_adapter.JaxAdapter`."""

    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES: exact ``2^(-e)`` from float64 exponents, held in float32 (float64 for
        float64 activations)."""
        with on_device(device):
            return self.run(alibi_slopes, exponents=alibi_exponents(params), cd=compute_dtype(DTYPES[dtype]))

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-CAUSAL / -SYMMETRIC / -BLOOM / -MPT: ``[H, Tq, Tk]`` (bloom ``[B, H, Tq, Tk]``)."""
        dt = DTYPES[dtype]
        if params.form == "bloom":
            if attention_mask is None:
                raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
            _check_lengths(query_length, attention_mask.shape[-1])
            return self.run(alibi_bloom, attention_mask, params=params, query_length=query_length, dtype=dt)
        _check_lengths(query_length, key_length)
        with on_device(device):
            return self.run(alibi_bias, params=params, query_length=query_length, key_length=key_length, dtype=dt)
