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

Layout: the operations and kernels live in ``adapters/jax_port/``, one module per spec family (a
mixin ``Ops`` each, composed here with :func:`~posenc.adapters.base.family_ports`); shared helpers
and the ``jax_enable_x64`` switch are in ``jax_port/_common.py``, imported first by this module.
The port's names (kernels, ``TRACE_COUNTS``, :class:`JaxRope`, ...) are re-exported here.
"""

from __future__ import annotations

import jax

from .jax_port import _common  # noqa: F401 - first: switches jax_enable_x64 on (see module docstring)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange  # noqa: E402,F401 - re-exported, as before

from .base import Adapter, family_ports, int32_call_forms, roberta_from_bert  # noqa: E402,F401

# Re-exports: the port's names, importable from this module as before the split.
from .jax_port._common import (  # noqa: E402,F401
    DTYPES, HIGHEST, TRACE_COUNTS, _last_columns, arange_positions, check_rows, compute_dtype, exact_div,
    jax_device, kernel, padding_aware_positions, rotate)
from .jax_port.alibi import (  # noqa: E402,F401
    _check_lengths, alibi_bias, alibi_bloom, alibi_exponents, alibi_slopes)
from .jax_port.learned import bert_sum_norm, gpt2_sum, opt_positions, opt_rows, take  # noqa: E402,F401
from .jax_port.mrope import JaxMRope, mrope_apply, mrope_cos_sin, mrope_cos_sin_out  # noqa: E402,F401
from .jax_port.nope import nope_flags_host, nope_layer_flags  # noqa: E402,F401
from .jax_port.position_ids import left_pad_positions, packed_positions  # noqa: E402,F401
from .jax_port.rope import (  # noqa: E402,F401
    JaxRope, _rope_angles, rope_apply, rope_apply_cos_sin, rope_cos_sin, rope_inv_freq)
from .jax_port.rope_scaling import (  # noqa: E402,F401
    _mscale, attention_factor, attention_probs, scaled_inv_freq, softmax_scale)
from .jax_port.sinusoidal import check_sinusoid_width, sinusoidal  # noqa: E402,F401
from .jax_port.t5 import t5_buckets, t5_gather, t5_relative_buckets  # noqa: E402,F401


class JaxAdapter(*family_ports("posenc.adapters.jax_port"), Adapter):
    """The kit's own JAX port; ``compiled=True`` runs every kernel through ``jax.jit``."""

    framework = "jax"
    devices = ("cpu", "cuda", "gpu")
    range_probe_devices = ("cpu", "cuda", "gpu")  # rows are checked on the host before any gather
    generated_examples = 2  # compile-bound: XLA compiles every new shape (README, "Generated cases")
    #: the call forms JAX has (no strided views, no in-place writes: its arrays are immutable)
    call_forms = ("rope.apply_int32", "rope.apply_offset", "rope.apply_row_offsets", "rope.apply_tokens", "rope.apply_token_major", "rope.apply_packed",
                  "rope.apply_with_cos_sin_hidden", "rope.apply_with_cos_sin_cache",
                  *(f"{op}_{form}" for op in ("mrope.apply", "axial.apply") for form in ("int32", "tokens", "token_major")))

    def __init__(self, compiled: bool = False):
        self.compiled = compiled
        self.name = "jax-jit" if compiled else "jax"
        if not compiled:
            # JAX's forms (offsets, tokens, the token-major layout, packed buffers, the cos/sin caches) are the
            # port's glue around the same kernels: checked once, in the jax-jit column, where a kernel at the
            # new shapes a form makes is one XLA compilation, not one per operation as eagerly (the forms took
            # 135 s eagerly and 57 s compiled at float32, measured in one run); the eager column keeps the int32
            # forms, which reach its op-by-op kernels with positions of another dtype. (tensorflow's eager column
            # is the other way round: its compiled variant retraces per shape; adapters.base.compiled_call_forms)
            self.call_forms = int32_call_forms(type(self).call_forms)
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


ADAPTER = JaxAdapter(compiled=False)
JIT_ADAPTER = JaxAdapter(compiled=True)
