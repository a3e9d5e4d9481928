"""What the TensorFlow port's families share: dtypes, devices, :func:`exact_div`, the shared
kernels (rotation, arange and padding-aware positions, the range-checked gather) and
:class:`KernelRunner`, which runs a kernel eagerly or through ``tf.function``.

Importing this module sets ``TF_CPP_MIN_LOG_LEVEL`` before tensorflow loads (see
``posenc.adapters.tf_adapter``); every family module imports it before anything else of the port.
"""

from __future__ import annotations

import functools
import os
import sys

if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import tensorflow as tf  # noqa: E402

from posenc.spec.errors import PositionOutOfRange  # noqa: E402

DTYPES = {"float64": tf.float64, "float32": tf.float32, "bfloat16": tf.bfloat16, "float16": tf.float16,
          "int64": tf.int64, "int32": tf.int32, "bool": tf.bool}
F64, I64 = tf.float64, tf.int64
ROW_RANGE_TAG = "LEARNED-ROW-RANGE"


def compute_dtype(dtype: tf.DType) -> tf.DType:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return tf.float64 if dtype == tf.float64 else tf.float32


def tf_device(device: str) -> str:
    """TensorFlow's device name for ``cpu``, ``cuda[:N]`` or ``gpu[:N]``.

    Raises ``ValueError`` for any other spelling.
    """
    kind, _, index = device.partition(":")
    if kind == "cpu" and not index:
        return "/CPU:0"
    if kind in ("cuda", "gpu") and (not index or index.isdigit()):
        return f"/GPU:{int(index or 0)}"
    raise ValueError(f"unknown device {device!r}: use cpu, cuda[:N] or gpu[:N]")


# ---- kernels shared by several families: pure functions of tensors (positional) and static
# ---- parameters (keywords) ---------------------------------------------------------------------


def exact_div(x, c):
    """``x / c`` for a trace-time constant ``c != 0``, rounded as IEEE division in graphs too.

    Grappler's constant folding (``ConstantFolding::ReduceDivToReciprocalMul``,
    tensorflow/core/grappler/optimizers/constant_folding.cc) strength-reduces ``Div(x, const)``
    to ``Mul(x, 1 / const)`` inside a ``tf.function``, so ``log(8) / log(16)`` gives
    0.7499999999999999 instead of 0.75 and T5's bucket boundary at |relative position| 64 moves
    (bucket 13 instead of 14).  ``DivNoNan`` (``x / y``, 0 where ``y == 0``) is not rewritten.
    """
    x = tf.convert_to_tensor(x)
    return tf.math.divide_no_nan(x, tf.constant(c, x.dtype))


def _rotate(x, cos, sin, rotary_dim: int, pairing: str):
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]``; cos/sin ``[B, T, r/2]``.

    ``pairing``: ``half`` (i, i + r/2), ``interleaved`` (2i, 2i + 1), ``deinterleave`` (pairs
    (2i, 2i + 1) in, written to (i, i + r/2)) -- ROPE-PAIR-HALF / -INTERLEAVED / -DEINTERLEAVE.

    Computed in ``cos.dtype``, rounded once to ``x.dtype``; the tail is returned as is.
    """
    xr = tf.cast(x[..., :rotary_dim], cos.dtype)
    c, s = cos[:, None], sin[:, None]
    if pairing == "half":
        h = rotary_dim // 2
        x1, x2 = xr[..., :h], xr[..., h:]
        y = tf.concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = tf.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
        y = tf.reshape(y, tf.concat([tf.shape(y)[:-2], [rotary_dim]], 0))
    elif pairing == "deinterleave":  # ROPE-PAIR-DEINTERLEAVE: pairs (2i, 2i + 1) in, written to (i, i + r/2)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = tf.concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return tf.concat([tf.cast(y, x.dtype), x[..., rotary_dim:]], axis=-1)


def k_padding_aware_positions(input_ids, cache_length, *, padding_idx):
    """SIN-FAIRSEQ-POSITIONS, LEARNED-ROBERTA-POSITIONS: ``(cumsum(mask) + C) * mask + padding_idx``."""
    m = tf.cast(input_ids != padding_idx, I64)
    return (tf.cumsum(m, axis=-1) + cache_length) * m + padding_idx


def k_arange_positions(batch, seq_len, start):
    """POS-PREFILL / POS-DECODE: ``start + arange(seq_len)`` broadcast to ``[batch, seq_len]``."""
    return tf.broadcast_to(start + tf.range(seq_len, dtype=I64)[None], tf.stack([batch, seq_len]))


def k_row_span(rows):
    """``[min, max]`` of a non-empty int tensor (the host-side range check reads it)."""
    rows = tf.cast(rows, I64)
    return tf.stack([tf.reduce_min(rows), tf.reduce_max(rows)])


def _gather(table, rows):
    """``table[rows]``, asserting ``0 <= rows < len(table)`` in the graph first (LEARNED-ROW-RANGE)."""
    rows = tf.cast(rows, I64)
    n = tf.shape(table, out_type=I64)[0]
    with tf.control_dependencies([
        tf.debugging.assert_non_negative(rows, message=f"{ROW_RANGE_TAG}: negative row"),
        tf.debugging.assert_less(rows, n, message=f"{ROW_RANGE_TAG}: row past the end of the table"),
    ]):
        return tf.gather(table, rows)


class LayoutForms:
    """The call forms of a prepared rotation whose ``apply(q, k, position_ids)`` takes q, k ``[B, H, T, D]`` at
    positions ``[B, T]`` (M-RoPE's and axial's ``[A, B, T]``): tokens and the token-major layout (spec
    ``<op>_tokens``, ``<op>_token_major``; ROPE-CALL-FORM).  int32 positions are ``apply`` itself."""

    def apply_tokens(self, q, k, positions):
        """q, k ``[N, H, D]``, token n at ``positions[..., n]``: one row of N tokens."""
        yq, yk = self.apply(tf.transpose(q, [1, 0, 2])[None], tf.transpose(k, [1, 0, 2])[None], positions[..., None, :])
        return tf.transpose(yq[0], [1, 0, 2]), tf.transpose(yk[0], [1, 0, 2])

    def apply_token_major(self, q, k, position_ids):
        """q, k ``[B, T, H, D]``."""
        yq, yk = self.apply(tf.transpose(q, [0, 2, 1, 3]), tf.transpose(k, [0, 2, 1, 3]), position_ids)
        return tf.transpose(yq, [0, 2, 1, 3]), tf.transpose(yk, [0, 2, 1, 3])


# ---- running kernels ----------------------------------------------------------------------------


class KernelRunner:
    """Runs the port's kernels: eagerly, or (``compiled``) each through its cached ``tf.function``.

    The base of every family's ``Ops`` mixin; ``compiled`` is set by the adapter class.
    """

    compiled: bool

    def __init__(self):
        self.functions: dict = {}  # (kernel, static parameters) -> tf.function (compiled only)

    def function(self, kernel, **static):
        """The cached ``tf.function`` running ``kernel(*tensors, **static)``."""
        key = (kernel, tuple(sorted(static.items())))
        fn = self.functions.get(key)
        if fn is None:
            fn = self.functions[key] = tf.function(functools.partial(kernel, **static), reduce_retracing=True,
                                                  autograph=False)  # kernels branch on static values only
        return fn

    def run(self, kernel, *args, device: str | None = None, **static):
        """Run ``kernel`` on ``args`` (Python ints become int64 scalar tensors) with its static
        parameters: eagerly, or through :meth:`function`.  ``device`` (a kit name) defaults to the
        device of the first tensor argument."""
        where = tf_device(device) if device is not None else next(
            (a.device for a in args if isinstance(a, tf.Tensor)), None)
        if where is None:
            raise ValueError(f"{kernel.__name__}: no device given and no tensor argument to take it from")
        with tf.device(where):
            args = tuple(tf.constant(a, I64) if isinstance(a, int) and not isinstance(a, bool) else a for a in args)
            if self.compiled:
                return self.function(kernel, **static)(*args)
            return kernel(*args, **static)

    def check_rows(self, rows, num_rows: int, what: str = "row") -> None:
        """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows`` (host-side, before indexing)."""
        if rows.shape.num_elements() == 0:
            return
        lo, hi = (int(v) for v in self.run(k_row_span, rows).numpy())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows, what)

    def _gather_checked(self, kernel, tables_rows: list, *args, **static):
        for table, rows in tables_rows:
            self.check_rows(rows, int(table.shape[0]))
        return self.run(kernel, *args, **static)
