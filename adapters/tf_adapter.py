"""The ``tensorflow`` and ``tensorflow-function`` adapters: the kit's own TensorFlow port.

Written from the spec's formulas and the kit's torch port (``adapters/torch_adapter.py``),
operation by operation, in native TensorFlow ops: ``_rotate`` follows its ``rotate``,
``_scaled_inv_freq`` its ``scaled_inv_freq`` and ``TorchRope._update``, ``_t5_buckets``,
``_alibi_slopes`` and ``k_attention_probs`` its ``t5_buckets``, ``alibi_slopes`` and
``attention_probs``, every other kernel the adapter method of the same name.  Layouts and
dtypes are those of ``adapters/base.py``.  There is one code path for the math: every
array computation is a *kernel*, a plain function of tensors (positional) and static Python
parameters (keywords: the spec's parameter models, dtypes, widths).  The two adapters differ
only in how a kernel runs (:meth:`TFAdapter.run`):

``tensorflow``            eagerly.
``tensorflow-function``   through ``tf.function`` (``reduce_retracing=True``), one function
                          per ``(kernel, static parameters)``, cached on the adapter.  Everything
                          that changes between calls -- positions, ``cache_length``,
                          ``seq_len``, ``batch``, query/key lengths, the dynamic-NTK state --
                          is passed as a tensor (Python ints become int64 scalars), never
                          baked into the graph as a trace-time constant; a kernel's static
                          parameters are part of the function's cache key.  So decode loops,
                          changing ``cache_length`` and dynamic-NTK grow/reset sequences run
                          through the same traced graph with correct, changing values.

Dtype policy (ROPE-PRECISION, SIN-PRECISION, as the torch port): frequencies are computed in
float64 and held in float32 (float64 for float64 activations); angles, cos/sin, the rotation,
sinusoids, ALiBi biases, LayerNorm and attention logits are computed in that compute dtype and
rounded once to the activation dtype.  TensorFlow runs every op used here in bfloat16 and
float16 on CPU (only gathers, slices, adds, casts and concatenations touch those dtypes), so all four
dtypes are supported and no op needs a cast around it.

State (SCALE-DYNAMIC-GROW): a prepared RoPE keeps ``(cached length, theta')`` as int64 /
float64 tensors on the Python object; each call passes them into the kernel and stores the
updated values the kernel returns (the kernel itself is pure, so eager and compiled runs agree).

Row range (LEARNED-ROW-RANGE): ``tf.gather`` raises on CPU but returns zeros on GPU.  Every
gather is preceded by a host-side check of the rows (computed by their own kernel when they are
derived, e.g. OPT's ``cumsum(mask) * mask + 1``) that raises :class:`PositionOutOfRange` before
any indexing, in both adapters and on every device; the gather kernel also asserts the range
inside the graph (``tf.debugging``), so no path can return zeros silently.  Hence
``range_probe_devices`` lists every device.

Devices: ``cpu``; ``cuda``, ``cuda:N``, ``gpu``, ``gpu:N`` all mean TensorFlow's ``/GPU:N``
(N defaults to 0).  Arrays are placed with ``tf.device``; an operation without a ``device``
argument runs on the device of its first tensor input.  :meth:`TFAdapter.device_of` reports
``cpu`` or ``cuda:N`` (the suite passes ``--device gpu[:N]`` on as ``cuda[:N]``).

Log noise: ``TF_CPP_MIN_LOG_LEVEL`` is set to ``1`` (hide TensorFlow's C++ INFO lines, such as
the CPU-feature banner; warnings and errors stay visible) only when the user has not set it and
tensorflow is not imported yet -- it has no effect after the import.  TensorFlow 2.21 writes its
first lines (oneDNN, the CUDA stub, cuInit) before absl's logging is initialised, and those
ignore the variable.

Graph rewrites: grappler may reorder multiplications (BERT's LayerNorm ``(x - mean) * rstd * w``
differs from the eager result by an ulp, well within tolerance) and rewrites a division by a
constant into a multiplication by its reciprocal, which moves T5's bucket boundaries; divisions
whose rounding matters go through :func:`exact_div`.
"""

# The code lives in ``posenc.adapters.tf_port``: one module per spec family (its kernels and a mixin
# ``Ops`` with its adapter methods) and ``_common`` (what the families share, the kernel runner).
# This module composes the adapters and re-exports the port's names (to patch a kernel's helper,
# patch it in the port module that uses it).

from __future__ import annotations

import numpy as np

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange  # noqa: F401 - re-exported

from .base import Adapter, compiled_call_forms, family_ports, roberta_from_bert  # noqa: F401 - re-exported
# The port's _common, imported before any other port module, sets TF_CPP_MIN_LOG_LEVEL before
# tensorflow is imported.
from .tf_port._common import (  # noqa: F401 - re-exported
    DTYPES, F64, I64, ROW_RANGE_TAG, KernelRunner, _gather, _rotate, compute_dtype, exact_div,
    k_arange_positions, k_padding_aware_positions, k_row_span, tf, tf_device,
)
from .tf_port.alibi import _alibi_slopes, _check_lengths, k_alibi_bias, k_alibi_bloom, k_alibi_slopes  # noqa: F401
from .tf_port.learned import (  # noqa: F401 - re-exported
    k_bart_rows, k_bert, k_default_positions, k_gpt2, k_lookup, k_opt_positions, k_opt_rows, k_zeros_like,
)
from .tf_port.mrope import TFMRope, k_mrope, k_mrope_apply, k_mrope_cos_sin, mrope_axes  # noqa: F401
from .tf_port.nope import k_nope_layer_flags  # noqa: F401 - re-exported
from .tf_port.position_ids import k_left_pad_positions, k_packed_positions  # noqa: F401 - re-exported
from .tf_port.rope import (  # noqa: F401 - re-exported
    TFRope, _angles_cos_sin, _seq_len, k_rope_apply, k_rope_cos_sin, k_rope_inv_freq, k_rotate_with_cos_sin,
)
from .tf_port.rope_scaling import (  # noqa: F401 - re-exported
    _base, _dynamic_theta, _mscale, _scaled_inv_freq, _yarn_scale, attention_factor, k_attention_probs,
    softmax_scale,
)
from .tf_port.sinusoidal import k_sinusoidal  # noqa: F401 - re-exported
from .tf_port.t5 import _t5_buckets, k_t5_bias, k_t5_bias_buckets, k_t5_buckets  # noqa: F401 - re-exported

# ---- the adapters -------------------------------------------------------------------------------


class TFAdapter(*family_ports("posenc.adapters.tf_port"), Adapter):
    """The kit's TensorFlow port; ``compiled`` runs every kernel through ``tf.function``."""

    name = "tensorflow"
    framework = "tensorflow"
    devices = ("cpu", "cuda", "gpu")
    range_probe_devices = ("cpu", "cuda", "gpu")  # rows are checked on the host before any gather
    notes = "kit's own TF port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype; eager"
    compiled = False
    #: the call forms TensorFlow has (no strided views, no in-place writes: its tensors are immutable)
    call_forms = ("rope.apply_int32", "rope.apply_offset", "rope.apply_row_offsets", "rope.apply_tokens", "rope.apply_token_major", "rope.apply_packed",
                  "rope.apply_with_cos_sin_hidden", "rope.apply_with_cos_sin_cache",
                  *(f"{op}_{form}" for op in ("mrope.apply", "axial.apply") for form in ("int32", "tokens", "token_major")))

    # ---- environment and arrays ------------------------------------------------------------
    def versions(self):
        return {"tensorflow": tf.__version__}

    def device_available(self, device):
        try:
            name = tf_device(device)
        except ValueError:
            return False
        if name == "/CPU:0":
            return True
        return int(name.rsplit(":", 1)[1]) < len(tf.config.list_physical_devices("GPU"))

    def from_numpy(self, array, dtype, device):
        with tf.device(tf_device(device)):
            a = np.ascontiguousarray(array)
            if dtype == "bfloat16":  # via float32: golden values are exact in bfloat16
                return tf.cast(tf.constant(a.astype(np.float32)), tf.bfloat16)
            return tf.constant(a, DTYPES[dtype])

    def to_numpy(self, x):
        if x.dtype in (tf.bfloat16, tf.float16):
            x = tf.cast(x, tf.float32)
        return np.asarray(x.numpy())

    def dtype_of(self, x):
        return x.dtype.name

    def device_of(self, x):
        spec = tf.DeviceSpec.from_string(x.device)
        return "cpu" if spec.device_type == "CPU" else f"cuda:{spec.device_index or 0}"


class TFFunctionAdapter(TFAdapter):
    """``tensorflow-function``: the same kernels, every one run through ``tf.function``."""

    name = "tensorflow-function"
    notes = "kit's own TF port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype; tf.function"
    compiled = True
    #: the forms that reach the compiled kernels with inputs of another kind (int32 positions)
    call_forms = compiled_call_forms(TFAdapter.call_forms)


ADAPTER = TFAdapter
FUNCTION_ADAPTER = TFFunctionAdapter

