"""The ``jax`` and ``jax-jit`` adapters: the kit's own faithful JAX (``jax.numpy``) port of every operation.

One adapter class, :class:`JaxAdapter`, with a ``compiled`` flag and one code path for the math: every
array computation is a module-level *kernel* (a plain ``jax.numpy`` function).  ``jax`` (``ADAPTER``)
calls the kernels eagerly, op by op; ``jax-jit`` (``JIT_ADAPTER``) calls each kernel's ``jax.jit``
version.  Static (compile-time) arguments of a kernel are only structural values -- shapes, widths,
pairings, dtypes and the frozen spec parameter models; positions, ``cache_length`` and every
``seq_len``-dependent value (dynamic-NTK theta', LongRoPE's short/long switch) are traced arguments
or computed inside the compiled function, so one compiled function serves a whole decode loop or a
dynamic-NTK grow/reset sequence.  The dynamic-NTK grow-until-reset state (SCALE-DYNAMIC-GROW) lives
on the prepared :class:`JaxRope` object between calls; its theta' enters the kernel as a traced
float64 scalar.  ``TRACE_COUNTS[kernel]`` counts how often each jitted kernel was traced.
The kernels port ``adapters/torch_adapter.py`` function by function (same names where they exist);
shapes are the adapter contract's (``adapters/base.py``): q/k ``[B, H, T, D]``, position_ids int64
``[B, T]`` (M-RoPE ``[3, B, T]``), half-width cos/sin ``[B, T, rotary_dim/2]``.

Dtype policy (ROPE-PRECISION / SIN-PRECISION, M-RoPE alike; the same as ``adapters/torch_adapter.py``):
inverse frequencies are computed in float64 and held in float32 (float64 for float64 activations);
angles, cos/sin and the rotation are computed in that precision and the result is rounded once to
the activation dtype.  Matrix products use ``Precision.HIGHEST`` (no TF32 on GPUs).

**Global side effect**: importing this module runs ``jax.config.update("jax_enable_x64", True)``
(float64 activations and int64 positions need it); this changes JAX's default integer and float
widths for the whole process.

Devices: ``cpu``; ``cuda``, ``cuda:N``, ``gpu``, ``gpu:N`` map to JAX's GPU devices
(``jax.devices("gpu")``).  Arrays are placed with ``jax.device_put``; ``device_of`` reports
``cpu`` or ``cuda:N``.  Out-of-range rows: JAX gathers clamp silently (DIV-LEARNED-CLAMPED-LOOKUP),
so every table lookup range-checks its rows on the host *before* any gather kernel runs and raises
:class:`~posenc.spec.errors.PositionOutOfRange` (LEARNED-ROW-RANGE); hence every device is safe for
the row-range probe.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

import jax

jax.config.update("jax_enable_x64", True)  # noqa: E402 - before any array is made (see module docstring)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange  # noqa: E402

from .base import Adapter, roberta_from_bert  # noqa: E402

DTYPES = {"float64": jnp.float64, "float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16,
          "int64": jnp.int64, "int32": jnp.int32, "bool": jnp.bool_}
HIGHEST = lax.Precision.HIGHEST

#: How often each kernel's jitted version was traced (compiled), by kernel name.
TRACE_COUNTS: Counter = Counter()


def kernel(*static: str):
    """Mark a jnp function as a kernel: ``f`` runs eagerly, ``f.jit`` is its ``jax.jit`` version with
    ``static`` argument names (structural values only), counting its traces in ``TRACE_COUNTS``."""
    def deco(f):
        @functools.wraps(f)
        def traced(*args, **kwargs):
            TRACE_COUNTS[f.__name__] += 1
            return f(*args, **kwargs)
        f.jit = jax.jit(traced, static_argnames=static)
        return f
    return deco


def compute_dtype(dtype) -> jnp.dtype:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return jnp.dtype(jnp.float64) if jnp.dtype(dtype) == jnp.float64 else jnp.dtype(jnp.float32)


def jax_device(device: str):
    """The JAX device for ``cpu``, ``cuda[:N]`` or ``gpu[:N]``; raises ``ValueError`` when absent."""
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda", "gpu") or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise ValueError(f"unknown device {device!r}: use cpu, cuda, cuda:N, gpu or gpu:N")
    try:
        devs = jax.devices("cpu" if kind == "cpu" else "gpu")
    except RuntimeError as e:
        raise ValueError(f"device {device!r} is not available: {e}") from e
    i = int(index or 0)
    if i >= len(devs):
        raise ValueError(f"device {device!r} is not available: {len(devs)} {kind} device(s)")
    return devs[i]


def check_rows(rows, num_rows: int) -> None:
    """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows``; checked on the host."""
    r = np.asarray(jax.device_get(rows))
    if r.size:
        lo, hi = int(r.min()), int(r.max())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows)


# ---- RoPE -----------------------------------------------------------------------------------------


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def attention_factor(p) -> float:
    """The cos/sin factor of ``p.rope_type`` (ROPE-ATTENTION-FACTOR, SCALE-YARN- / SCALE-LONGROPE-
    ATTENTION-FACTOR); it depends on the parameters only, never on positions."""
    if p.attention_factor is not None:
        return p.attention_factor
    if p.rope_type == "yarn":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
        return _mscale(s, p.mscale) / _mscale(s, p.mscale_all_dim) if p.mscale and p.mscale_all_dim else _mscale(s)
    if p.rope_type == "longrope":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
        return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))
    return 1.0


def scaled_inv_freq(p, seq_len, theta):
    """float64 ``[pair_dim/2]`` frequencies of ``p.rope_type`` (SCALE-*), as in the torch port's
    ``scaled_inv_freq``.  ``seq_len`` (traced int: ``max(position_ids) + 1``, 0 before any call) drives
    dynamic (per-call policy) and longrope; ``theta`` (traced float64) is the grow policy's theta'."""
    r, t = p.rdim, p.rope_type

    def base(th, dim, n=None):
        i = jnp.arange(dim // 2 if n is None else n, dtype=jnp.float64)
        return jnp.asarray(th, jnp.float64) ** (-2 * i / dim)

    if t == "default":
        return base(p.rope_theta, r)
    if t == "linear":
        return base(p.rope_theta, r) / p.factor
    if t == "dynamic":
        if p.dynamic_policy == "grow_until_reset":
            return base(theta, r)
        lmax = p.max_position_embeddings
        L = jnp.maximum(jnp.asarray(seq_len, jnp.int64), lmax).astype(jnp.float64)
        return base(p.rope_theta * (p.factor * L / lmax - (p.factor - 1)) ** (r / (r - 2)), r)
    if t == "yarn":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings

        def corr(beta):
            L = p.original_max_position_embeddings
            return r * math.log(L / (beta * 2 * math.pi)) / (2 * math.log(p.rope_theta))
        low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
        if p.truncate is None or p.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = jnp.clip((jnp.arange(r // 2, dtype=jnp.float64) - low) / (high - low), 0, 1)
        w = base(p.rope_theta, r)
        return w / s * ramp + w * (1 - ramp)
    if t == "llama3":
        w = base(p.rope_theta, r)
        L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
        wavelen = 2 * math.pi / w
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
        return jnp.where(wavelen < L / hi, w, jnp.where(wavelen > L / lo, w / p.factor, blended))
    if t == "longrope":
        use_long = jnp.asarray(seq_len) > p.original_max_position_embeddings
        ext = jnp.where(use_long, jnp.asarray(p.long_factor, jnp.float64), jnp.asarray(p.short_factor, jnp.float64))
        return base(p.rope_theta, r) / ext
    if t == "proportional":
        D = p.head_dim
        w = jnp.concatenate([base(p.rope_theta, D, r // 2), jnp.zeros(D // 2 - r // 2, jnp.float64)])
        return w / (p.factor or 1.0)
    raise ValueError(f"unknown rope_type {t!r}")


def rotate(x, cos, sin, rotary_dim: int, pairing: str):
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]``; cos/sin ``[B, T, r/2]``.

    Computed in ``cos.dtype``, rounded once to ``x.dtype``; the tail is returned as is.
    """
    xr = x[..., :rotary_dim].astype(cos.dtype)
    c, s = cos[:, None], sin[:, None]
    if pairing == "half":
        h = rotary_dim // 2
        x1, x2 = xr[..., :h], xr[..., h:]
        y = jnp.concatenate((x1 * c - x2 * s, x2 * c + x1 * s), axis=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = jnp.stack((x1 * c - x2 * s, x2 * c + x1 * s), axis=-1).reshape(xr.shape)
    elif pairing == "deinterleave":  # ROPE-PAIR-DEINTERLEAVE: pairs (2i, 2i + 1) in, written to (i, i + r/2)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = jnp.concatenate((x1 * c - x2 * s, x2 * c + x1 * s), axis=-1)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return jnp.concatenate((y.astype(x.dtype), x[..., rotary_dim:]), axis=-1)


def _rope_angles(position_ids, theta, p, cd):
    """``(af cos, af sin, inv_freq)`` in ``cd``; seq_len is taken from the (traced) positions."""
    seq_len = jnp.max(position_ids, initial=-1) + 1
    w = scaled_inv_freq(p, seq_len, theta).astype(cd)
    phi = position_ids.astype(cd)[..., None] * w
    af = jnp.asarray(attention_factor(p), cd)
    return af * jnp.cos(phi), af * jnp.sin(phi), w


@kernel("p", "cd")
def rope_inv_freq(theta, p, cd):
    """ROPE-INV-FREQ / SCALE-*: the frequencies before any call (seq_len 0), held in ``cd``."""
    return scaled_inv_freq(p, 0, theta).astype(cd)


@kernel("p", "cd", "dtype")
def rope_cos_sin(position_ids, theta, p, cd, dtype):
    """ROPE-ANGLE: ``af (cos, sin)`` ``[B, T, pair_dim/2]`` in ``dtype``, and the call's inv_freq."""
    c, s, w = _rope_angles(position_ids, theta, p, cd)
    return c.astype(dtype), s.astype(dtype), w


@kernel("p", "cd")
def rope_apply(q, k, position_ids, theta, p, cd):
    """ROPE-PAIR-HALF / -INTERLEAVED / -DEINTERLEAVE, ROPE-PARTIAL: rotated q, k (and the call's inv_freq)."""
    c, s, w = _rope_angles(position_ids, theta, p, cd)
    return rotate(q, c, s, p.pair_dim, p.pairing), rotate(k, c, s, p.pair_dim, p.pairing), w


@kernel("rotary_dim", "pairing")
def rope_apply_cos_sin(q, k, cos, sin, rotary_dim, pairing):
    """Rotate with given half-width cos/sin (upcast to q's compute dtype)."""
    cd = compute_dtype(q.dtype)
    c, s = cos.astype(cd), sin.astype(cd)
    return rotate(q, c, s, rotary_dim, pairing), rotate(k, c, s, rotary_dim, pairing)


class JaxRope:
    """Prepared RoPE for one parameter set, dtype and device (see the module docstring).

    ``dynamic`` (per-call policy) and ``longrope`` take each call's ``max(position_ids) + 1`` inside the
    kernel; ``dynamic_policy='grow_until_reset'`` keeps transformers' state here, on the Python object
    (SCALE-DYNAMIC-GROW), and passes theta' to the kernel as a traced scalar.
    """

    def __init__(self, adapter: "JaxAdapter", params, dtype: str, device: str):
        self.a, self.p, self.dtype, self.device = adapter, params, DTYPES[dtype], device
        self.cd = compute_dtype(self.dtype)
        self._grow = params.rope_type == "dynamic" and params.dynamic_policy == "grow_until_reset"
        self._cached, self._theta = params.max_position_embeddings, params.rope_theta
        with jax.default_device(jax_device(device)):
            self._w = adapter.run(rope_inv_freq, self._theta_arg(), p=params, cd=self.cd)

    def _theta_arg(self):
        return jnp.asarray(self._theta, jnp.float64)

    def _update(self, position_ids) -> None:
        """SCALE-DYNAMIC-GROW (grow policy only): reads seq_len on the host, keeps theta' here."""
        if not self._grow:
            return
        p, lmax = self.p, self.p.max_position_embeddings
        pid = np.asarray(jax.device_get(position_ids))
        seq_len = int(pid.max()) + 1 if pid.size else 0
        if seq_len > self._cached:
            self._theta = p.rope_theta * (p.factor * seq_len / lmax - (p.factor - 1)) ** (p.rdim / (p.rdim - 2))
            self._cached = seq_len
        if seq_len < lmax and self._cached > lmax:
            self._theta, self._cached = p.rope_theta, lmax

    def inv_freq(self):
        return self._w, float(attention_factor(self.p))

    def cos_sin(self, position_ids):
        self._update(position_ids)
        c, s, self._w = self.a.run(rope_cos_sin, position_ids, self._theta_arg(), p=self.p, cd=self.cd,
                                   dtype=self.dtype)
        return c, s

    def apply(self, q, k, position_ids):
        self._update(position_ids)
        yq, yk, self._w = self.a.run(rope_apply, q, k, position_ids, self._theta_arg(), p=self.p, cd=self.cd)
        return yq, yk


# ---- M-RoPE, NoPE -----------------------------------------------------------------------------------


@kernel("head_dim", "theta", "axes", "cd")
def mrope_cos_sin(position_ids, head_dim, theta, axes, cd):
    """MROPE-SECTIONS / MROPE-INTERLEAVED: cos/sin ``[B, T, D/2]`` from ``position_ids [3, B, T]``,
    each frequency at the position of its axis (``axes``)."""
    w = (theta ** -(jnp.arange(0, head_dim, 2, dtype=jnp.float64) / head_dim)).astype(cd)
    pos = jnp.transpose(position_ids[jnp.asarray(axes)], (1, 2, 0))  # [B, T, D/2]
    phi = pos.astype(cd) * w
    return jnp.cos(phi), jnp.sin(phi)


@kernel("head_dim", "theta", "axes", "cd", "dtype")
def mrope_cos_sin_out(position_ids, head_dim, theta, axes, cd, dtype):
    c, s = mrope_cos_sin(position_ids, head_dim, theta, axes, cd)
    return c.astype(dtype), s.astype(dtype)


@kernel("head_dim", "theta", "axes", "cd")
def mrope_apply(q, k, position_ids, head_dim, theta, axes, cd):
    c, s = mrope_cos_sin(position_ids, head_dim, theta, axes, cd)
    return rotate(q, c, s, head_dim, "half"), rotate(k, c, s, head_dim, "half")


class JaxMRope:
    """Prepared M-RoPE (MROPE-*): float64 inv_freq held in the compute dtype, per-frequency axis
    positions gathered from ``position_ids [3, B, T]``, half pairing over the whole head."""

    def __init__(self, adapter: "JaxAdapter", params, dtype: str):
        self.a, self.p, self.dtype = adapter, params, DTYPES[dtype]
        self.kw = dict(head_dim=params.head_dim, theta=params.rope_theta, axes=tuple(params.axes),
                       cd=compute_dtype(self.dtype))

    def _check(self, position_ids):
        if position_ids.ndim != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {list(position_ids.shape)}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(mrope_cos_sin_out, position_ids, **self.kw, dtype=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(mrope_apply, q, k, position_ids, **self.kw)


def nope_flags_host(params) -> list[int]:
    """NOPE-LAYER-FLAGS on the host: 1 where the layer uses RoPE, 0 where NoPE."""
    n = params.num_hidden_layers
    if params.no_rope_layers is not None:
        return list(params.no_rope_layers[:n])
    return [int((i + 1) % params.no_rope_layer_interval != 0) for i in range(n)]


@kernel("num_hidden_layers", "flags", "interval")
def nope_layer_flags(num_hidden_layers, flags, interval):
    """NOPE-LAYER-FLAGS: the given flags, or every ``interval``-th layer NoPE."""
    if flags is not None:
        return jnp.asarray(flags[:num_hidden_layers], jnp.int64)
    i = jnp.arange(num_hidden_layers, dtype=jnp.int64)
    return ((i + 1) % interval != 0).astype(jnp.int64)


# ---- sinusoidal ---------------------------------------------------------------------------------------


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


@kernel("padding_idx")
def padding_aware_positions(input_ids, cache_length, padding_idx):
    """fairseq ``make_positions`` with HF's cache offset: ``(cumsum(mask) + C) * mask + padding_idx``
    (SIN-FAIRSEQ-POSITIONS, LEARNED-ROBERTA-POSITIONS)."""
    m = (input_ids != padding_idx).astype(jnp.int64)
    return (jnp.cumsum(m, axis=-1) + cache_length) * m + padding_idx


# ---- learned, position ids -------------------------------------------------------------------------


@kernel()
def take(table, rows):
    """``table[rows]`` -- only ever called with host-checked rows."""
    return jnp.take(table, rows, axis=0)


@kernel()
def gpt2_sum(wte, wpe, input_ids, position_ids):
    """LEARNED-GPT2-*: ``wte[input_ids] + wpe[position_ids]`` in the table dtype (host-checked rows)."""
    return jnp.take(wte, input_ids, axis=0) + jnp.take(wpe, position_ids, axis=0)


@kernel("eps")
def bert_sum_norm(word, token_type, position, weight, bias, input_ids, token_type_ids, position_ids, eps):
    """LEARNED-BERT-*: word + token_type + position rows, LayerNorm over the last axis; summed and
    normalised in the compute dtype, rounded once (host-checked rows; token_type_ids None reads row 0)."""
    dt = word.dtype
    cd = compute_dtype(dt)
    if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
    x = (jnp.take(word, input_ids, axis=0).astype(cd) + jnp.take(token_type, token_type_ids, axis=0).astype(cd)
         + jnp.take(position, position_ids, axis=0).astype(cd))
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
    y = (x - mu) * lax.rsqrt(var + jnp.asarray(eps, cd)) * weight.astype(cd) + bias.astype(cd)
    return y.astype(dt)


@kernel("batch", "seq_len")
def arange_positions(start, batch, seq_len):
    """POS-PREFILL / POS-DECODE: ``start + arange(seq_len)`` for every row, ``[batch, seq_len]``."""
    return jnp.broadcast_to(start + jnp.arange(seq_len, dtype=jnp.int64), (batch, seq_len))


@kernel("seq_len")
def opt_positions(attention_mask, cache_length, seq_len):
    """LEARNED-OPT-POSITIONS: ``cumsum(mask) * mask - 1``, the last ``seq_len`` columns."""
    m = attention_mask.astype(jnp.int64)
    return lax.dynamic_slice_in_dim(jnp.cumsum(m, axis=-1) * m - 1, cache_length, seq_len, axis=1)


@kernel()
def opt_rows(positions):
    """LEARNED-OPT-OFFSET: table row = position + 2."""
    return positions + 2


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


def _last_columns(attention_mask, cache_length: int) -> int:
    """Number of returned columns ``Tk - cache_length``; rejects a cache_length outside ``[0, Tk]``."""
    tk = attention_mask.shape[-1]
    if attention_mask.ndim != 2 or not 0 <= cache_length <= tk:
        raise ValueError(f"attention_mask must be [B, cache_length + T] with 0 <= cache_length <= its "
                         f"{tk} columns; got shape {list(attention_mask.shape)}, cache_length {cache_length}")
    return tk - cache_length


# ---- ALiBi, T5, attention ----------------------------------------------------------------------------


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


def exact_div(a, c: float):
    """``a / c`` correctly rounded.  XLA rewrites a division by a broadcast scalar into a multiplication
    by its reciprocal (one more rounding: ln 8 / ln 16 becomes 0.7499999999999999, and T5 bucket 14 at
    distance 64 becomes 13); dividing by a full array behind an optimization barrier keeps the division."""
    return a / lax.optimization_barrier(jnp.full(a.shape, c, a.dtype))


@kernel("params")
def t5_buckets(relative_position, params):
    """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: float64 log, never of 0, truncated; always in
    ``[0, num_buckets)``."""
    rel = relative_position.astype(jnp.int64)
    nb = params.num_buckets
    out = jnp.zeros_like(rel)
    if params.bidirectional:
        nb //= 2
        out = out + (rel > 0).astype(jnp.int64) * nb
        n = jnp.abs(rel)
    else:
        n = jnp.maximum(-rel, 0)
    e = nb // 2
    safe = jnp.maximum(n, e).astype(jnp.float64)
    ratio = exact_div(jnp.log(exact_div(safe, e)), math.log(params.max_distance / e))
    large = e + jnp.trunc(ratio * (nb - e)).astype(jnp.int64)
    large = jnp.minimum(large, nb - 1)
    return out + jnp.where(n < e, n, large)


@kernel("params", "query_length", "key_length")
def t5_relative_buckets(cache_length, params, query_length, key_length):
    """T5-BIAS buckets of ``key position - query position``, queries at ``cache_length + arange(Tq)``."""
    ctx = jnp.arange(query_length, dtype=jnp.int64)[:, None] + cache_length
    mem = jnp.arange(key_length, dtype=jnp.int64)[None, :]
    return t5_buckets(mem - ctx, params)


@kernel()
def t5_gather(table, buckets):
    """T5-BIAS: ``table[bucket]`` as ``[H, Tq, Tk]`` (host-checked buckets)."""
    return jnp.transpose(jnp.take(table, buckets, axis=0), (2, 0, 1))


@kernel("scale")
def attention_probs(q, k, scale):
    """SCALE-YARN-SOFTMAX-SCALE: row softmax of ``q k^T * scale`` (k heads repeated to q's), computed
    in the compute dtype with full-precision products, rounded once to ``q.dtype``."""
    hq, hk = q.shape[1], k.shape[1]
    cd = compute_dtype(q.dtype)
    kk = jnp.repeat(k.astype(cd), hq // hk, axis=1)
    logits = jnp.matmul(q.astype(cd), jnp.swapaxes(kk, -1, -2), precision=HIGHEST) * scale
    return jax.nn.softmax(logits, axis=-1).astype(q.dtype)


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    p = params.rope
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    return params.qk_head_dim ** -0.5 * _mscale(s, p.mscale_all_dim) ** 2


# ---- the adapter -------------------------------------------------------------------------------------


class JaxAdapter(Adapter):
    """The kit's own JAX port; ``compiled=True`` runs every kernel through ``jax.jit``."""

    framework = "jax"
    devices = ("cpu", "cuda", "gpu")
    range_probe_devices = ("cpu", "cuda", "gpu")  # rows are checked on the host before any gather

    def __init__(self, compiled: bool = False):
        self.compiled = compiled
        self.name = "jax-jit" if compiled else "jax"
        self.notes = ("kit's own port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype; "
                      + ("every kernel jax.jit-compiled, positions traced; " if compiled else "eager jax.numpy; ")
                      + "imports set jax_enable_x64=True process-wide")

    def run(self, f, *args, **kwargs):
        """Call kernel ``f``: its ``jax.jit`` version when compiled, else eagerly."""
        return (f.jit if self.compiled else f)(*args, **kwargs)

    def versions(self):
        import jaxlib
        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def device_available(self, device):
        try:
            jax_device(device)
        except ValueError:
            return False
        return True

    def from_numpy(self, array, dtype, device):
        return jax.device_put(np.asarray(array).astype(DTYPES[dtype]), jax_device(device))

    def to_numpy(self, x):
        a = np.asarray(jax.device_get(x))
        return a.astype(np.float32) if a.dtype in (jnp.bfloat16, np.float16) else a

    def dtype_of(self, x):
        return str(x.dtype)

    def device_of(self, x):
        (d,) = x.devices()
        if d.platform == "cpu":
            return "cpu"
        return f"cuda:{jax.devices(d.platform).index(d)}"

    # ---- RoPE, M-RoPE, NoPE ------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        return JaxRope(self, params, dtype, device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        return self.run(rope_apply_cos_sin, q, k, cos, sin, rotary_dim=params.pair_dim, pairing=params.pairing)

    def mrope(self, params, *, dtype, device):
        return JaxMRope(self, params, dtype)

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = nope_flags_host(params)
        if not 0 <= layer_idx < len(flags) or flags[layer_idx] != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        flags = tuple(params.no_rope_layers) if params.no_rope_layers is not None else None
        with jax.default_device(jax_device(device)):
            return self.run(nope_layer_flags, num_hidden_layers=params.num_hidden_layers, flags=flags,
                            interval=params.no_rope_layer_interval)

    # ---- sinusoidal --------------------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        check_sinusoid_width(params)
        return self.run(sinusoidal, position_ids, params=params, dtype=DTYPES[dtype])

    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``(cumsum(mask) + cache_length) * mask + padding_idx``."""
        return self.run(padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)

    # ---- learned -----------------------------------------------------------------------------------
    def lookup(self, table, rows):
        """LEARNED-ROW-RANGE: rows checked on the host, then ``table[rows]``."""
        check_rows(rows, table.shape[0])
        return self.run(take, table, rows)

    def _positions(self, input_ids, cache_length):
        B, T = input_ids.shape
        with jax.default_device(next(iter(input_ids.devices()))):
            return self.run(arange_positions, cache_length, batch=B, seq_len=T)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-GPT2-*: ``wte[input_ids] + wpe[cache_length + arange(T)]`` (or given position_ids)."""
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self._positions(input_ids, cache_length)
            check_rows(input_ids, wte.shape[0])
            check_rows(position_ids, wpe.shape[0])
            return self.run(gpt2_sum, wte, wpe, input_ids, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            if position_ids is None:
                position_ids = self._positions(input_ids, cache_length)
            for rows, name in ((input_ids, "word_embeddings"), (token_type_ids, "token_type_embeddings"),
                               (position_ids, "position_embeddings")):
                if rows is not None:
                    check_rows(rows, w[name].shape[0])
            return self.run(bert_sum_norm, w["word_embeddings"], w["token_type_embeddings"],
                            w["position_embeddings"], w["layer_norm_weight"], w["layer_norm_bias"],
                            input_ids, token_type_ids, position_ids, eps=float(params.layer_norm_eps))
        return call

    def roberta_positions(self, input_ids, params, cache_length):
        """LEARNED-ROBERTA-POSITIONS: rows from padding_idx + 1; pads read padding_idx."""
        return self.run(padding_aware_positions, input_ids, cache_length, padding_idx=params.padding_idx)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
        table = weights["table"]

        def call(input_ids, attention_mask=None, cache_length=0):
            return self.lookup(table, self.run(opt_rows, self._positions(input_ids, cache_length)))
        return call

    def opt_positions(self, attention_mask, cache_length):
        T = _last_columns(attention_mask, cache_length)
        return self.run(opt_positions, attention_mask, cache_length, seq_len=T)

    def opt_rows(self, positions):
        return self.run(opt_rows, positions)

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

    # ---- position ids ------------------------------------------------------------------------------
    def position_ids(self, rule, *, device, **x):
        with jax.default_device(jax_device(device)):
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

    # ---- ALiBi, T5 ----------------------------------------------------------------------------------
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES: exact ``2^(-e)`` from float64 exponents, held in float32 (float64 for
        float64 activations)."""
        with jax.default_device(jax_device(device)):
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
        with jax.default_device(jax_device(device)):
            return self.run(alibi_bias, params=params, query_length=query_length, key_length=key_length, dtype=dt)

    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL."""
        return self.run(t5_buckets, relative_position, params=params)

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS: ``table[bucket(j - i - cache_length)]`` ``[H, Tq, Tk]``; buckets range-checked on
        the host before the gather; ``cache_length`` is traced."""
        table = weights["table"]
        if table.ndim != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], got {list(table.shape)}")
        dev = jax_device(device)

        def call(query_length, key_length, cache_length=0):
            with jax.default_device(dev):
                b = self.run(t5_relative_buckets, cache_length, params=params, query_length=query_length,
                             key_length=key_length)
            check_rows(b, table.shape[0])
            return self.run(t5_gather, table, b)
        return call

    # ---- YaRN softmax scale -------------------------------------------------------------------------
    def attention_probs(self, q, k, params):
        """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)`` over all keys, ``[B, Hq, Tq, Tk]``; the
        scale (a Python float) is applied in the compute dtype."""
        if q.shape[1] % k.shape[1]:
            raise ValueError(f"q heads {q.shape[1]} are not a multiple of k heads {k.shape[1]}")
        return self.run(attention_probs, q, k, scale=softmax_scale(params))


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


ADAPTER = JaxAdapter(compiled=False)
JIT_ADAPTER = JaxAdapter(compiled=True)
