"""Helpers the JAX port's families share: the ``kernel`` decorator and its ``TRACE_COUNTS``,
dtypes, devices, host row checks, the exact division, the rotation, and the position kernels
used by more than one family.

**Global side effect**: importing this module (``posenc.adapters.jax_adapter`` imports it first)
runs ``jax.config.update("jax_enable_x64", True)``; see ``adapters/jax_adapter.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter

import jax

jax.config.update("jax_enable_x64", True)  # noqa: E402 - before any array is made (see module docstring)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from posenc.spec.errors import PositionOutOfRange  # noqa: E402

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


def on_device(device):
    """Context placing new arrays on ``device`` (a device string or a JAX device).

    JAX keys its caches of compiled primitives and jitted kernels on the ``jax_default_device``
    setting, so entering ``jax.default_device(d)`` makes every operation compile once more even when
    ``d`` is where arrays go anyway.  When ``d`` is the process's default placement (no
    ``jax_default_device`` set and ``d`` is ``jax.devices()[0]``), nothing is entered: the same arrays
    land on the same device, computed by the same compiled code, without the second compilation.
    """
    d = jax_device(device) if isinstance(device, str) else device
    if jax.config.jax_default_device is None and d == jax.devices()[0]:
        return contextlib.nullcontext()
    return jax.default_device(d)


def check_rows(rows, num_rows: int) -> None:
    """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows``; checked on the host."""
    r = np.asarray(jax.device_get(rows))
    if r.size:
        lo, hi = int(r.min()), int(r.max())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows)


def exact_div(a, c: float):
    """``a / c`` correctly rounded.  XLA rewrites a division by a broadcast scalar into a multiplication
    by its reciprocal (one more rounding: ln 8 / ln 16 becomes 0.7499999999999999, and T5 bucket 14 at
    distance 64 becomes 13); dividing by a full array behind an optimization barrier keeps the division."""
    return a / lax.optimization_barrier(jnp.full(a.shape, c, a.dtype))


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


@kernel("layout")
def to_bhtd(q, k, layout: str):
    """q, k in ``layout`` (``thd``: tokens ``[N, H, D]``, one row; ``bthd``: token-major) as ``[B, H, T, D]``."""
    if layout == "thd":
        return jnp.swapaxes(q, 0, 1)[None], jnp.swapaxes(k, 0, 1)[None]
    return jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2)


@kernel("layout")
def from_bhtd(q, k, layout: str):
    """The inverse of :func:`to_bhtd`."""
    if layout == "thd":
        return jnp.swapaxes(q[0], 0, 1), jnp.swapaxes(k[0], 0, 1)
    return jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2)


@kernel()
def one_row(positions):
    """Tokens' positions ``[N]`` (``[A, N]``) as one row, ``[1, N]`` (``[A, 1, N]``)."""
    return positions[..., None, :]


class LayoutForms:
    """The call forms of a prepared rotation whose ``apply(q, k, position_ids)`` takes q, k ``[B, H, T, D]`` at
    positions ``[B, T]`` (M-RoPE's and axial's ``[A, B, T]``): tokens and the token-major layout (spec
    ``<op>_tokens``, ``<op>_token_major``; ROPE-CALL-FORM).  int32 positions are ``apply`` itself.  The layout
    changes are kernels of their own (compiled, one XLA program each, not one per operation; the rotation's
    kernel stays the one ``apply`` compiles)."""

    def apply_tokens(self, q, k, positions):
        """q, k ``[N, H, D]``, token n at ``positions[..., n]``: one row of N tokens."""
        yq, yk = self.apply(*self.a.run(to_bhtd, q, k, layout="thd"), self.a.run(one_row, positions))
        return self.a.run(from_bhtd, yq, yk, layout="thd")

    def apply_token_major(self, q, k, position_ids):
        """q, k ``[B, T, H, D]``."""
        yq, yk = self.apply(*self.a.run(to_bhtd, q, k, layout="bthd"), position_ids)
        return self.a.run(from_bhtd, yq, yk, layout="bthd")


@kernel("batch", "seq_len")
def arange_positions(start, batch, seq_len):
    """POS-PREFILL / POS-DECODE: ``start + arange(seq_len)`` for every row, ``[batch, seq_len]``; ``start`` a
    scalar, or one per row ``[batch]`` (rope.apply_row_offsets: row b at ``start[b] + t``)."""
    return jnp.broadcast_to(jnp.reshape(start, (-1, 1)) + jnp.arange(seq_len, dtype=jnp.int64), (batch, seq_len))


@kernel("padding_idx")
def padding_aware_positions(input_ids, cache_length, padding_idx):
    """fairseq ``make_positions`` with HF's cache offset: ``(cumsum(mask) + C) * mask + padding_idx``
    (SIN-FAIRSEQ-POSITIONS, LEARNED-ROBERTA-POSITIONS)."""
    m = (input_ids != padding_idx).astype(jnp.int64)
    return (jnp.cumsum(m, axis=-1) + cache_length) * m + padding_idx


def _last_columns(attention_mask, cache_length: int) -> int:
    """Number of returned columns ``Tk - cache_length``; rejects a cache_length outside ``[0, Tk]``."""
    tk = attention_mask.shape[-1]
    if attention_mask.ndim != 2 or not 0 <= cache_length <= tk:
        raise ValueError(f"attention_mask must be [B, cache_length + T] with 0 <= cache_length <= its "
                         f"{tk} columns; got shape {list(attention_mask.shape)}, cache_length {cache_length}")
    return tk - cache_length
