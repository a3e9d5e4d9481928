"""ALiBi (ALIBI-*): slopes and the causal, symmetric, MPT and BLOOM biases."""

from __future__ import annotations

from ._common import DTYPES, F64, I64, KernelRunner, compute_dtype, tf


def _alibi_slopes(p, cd):
    """ALIBI-SLOPES: ``2^(-e)`` from float64 exponents (c = 2^floor(log2 n) slopes, then every other
    slope of 2c), held in ``cd``."""
    n, B = p.num_heads, p.alibi_bias_max
    c = 1 << (n.bit_length() - 1)
    e = [B * k / c for k in range(1, c + 1)] + [B * (2 * j + 1) / (2 * c) for j in range(n - c)]
    return tf.cast(tf.pow(tf.constant(2.0, F64), -tf.constant(e, F64)), cd)


def k_alibi_slopes(*, p, cd):
    """ALIBI-SLOPES ``[H]`` in ``cd`` (float32, or float64 for float64 activations)."""
    return _alibi_slopes(p, cd)


def k_alibi_bias(query_length, key_length, *, p, dt):
    """ALIBI-CAUSAL / -SYMMETRIC / -MPT ``[H, Tq, Tk]``: queries are the last Tq keys."""
    cd = compute_dtype(dt)
    m = _alibi_slopes(p, cd)
    i = tf.range(query_length, dtype=I64) + (key_length - query_length)
    j = tf.range(key_length, dtype=I64)
    d = tf.cast(i[:, None] - j[None, :], cd)
    if p.form == "causal":
        out = -m[:, None, None] * d
    elif p.form == "symmetric":
        out = -m[:, None, None] * tf.abs(d)
    elif p.form == "mpt":
        row = tf.cast(j - (key_length - 1), cd)
        out = tf.broadcast_to(m[:, None, None] * row[None, None, :],
                              tf.stack([tf.constant(p.num_heads, I64), query_length, key_length]))
    else:
        raise ValueError(f"unknown ALiBi form {p.form!r}")
    return tf.cast(out, dt)


def k_alibi_bloom(attention_mask, query_length, *, p, dt):
    """ALIBI-BLOOM ``[B, H, Tq, Tk]``: slope times ``(cumsum(mask) - 1) * mask`` of each key."""
    cd = compute_dtype(dt)
    m = _alibi_slopes(p, cd)
    mask = tf.cast(attention_mask, I64)
    pos = (tf.cumsum(mask, axis=-1) - 1) * mask
    out = m[None, :, None, None] * tf.cast(pos, cd)[:, None, None, :]
    s = tf.shape(mask, out_type=I64)
    return tf.cast(tf.broadcast_to(out, tf.stack([s[0], p.num_heads, query_length, s[1]])), dt)


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


class Ops(KernelRunner):
    """Adapter methods of the alibi family."""

    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES ``[H]`` float32 (float64 for float64 activations)."""
        return self.run(k_alibi_slopes, device=device, p=params, cd=compute_dtype(DTYPES[dtype]))

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        dt = DTYPES[dtype]
        if params.form == "bloom":
            if attention_mask is None:
                raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
            _check_lengths(query_length, int(attention_mask.shape[-1]))
            return self.run(k_alibi_bloom, attention_mask, query_length, device=device, p=params, dt=dt)
        _check_lengths(query_length, key_length)
        return self.run(k_alibi_bias, query_length, key_length, device=device, p=params, dt=dt)
