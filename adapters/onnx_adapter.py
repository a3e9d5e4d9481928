"""The ``onnx`` and ``onnxruntime`` adapters: the ONNX ``RotaryEmbedding`` operator (opset 23).

Both adapters build the same single-graph ONNX model (:func:`rotary_model`) -- two
``RotaryEmbedding`` nodes of the default domain, one for q and one for k, sharing the cos/sin
inputs, so q and k may have different head counts (GQA) -- and run it:

* ``onnx``: ``onnx.reference.ReferenceEvaluator``, whose kernel is
  ``onnx/reference/ops/op_rotary_embedding.py`` (``RotaryEmbedding._run`` ->
  ``rotary_embedding``, the algorithm printed in the operator's documentation,
  ``onnx/defs/nn/defs.cc`` ``RotaryEmbedding_ver23_doc``);
* ``onnxruntime``: ``onnxruntime.InferenceSession`` on ``CPUExecutionProvider`` (its native
  ``RotaryEmbedding`` kernel of the ONNX domain, opset 23, for float and float16).

Operator contract (opset 23, checked with ``onnx.checker.check_model(full_check=True)``):
inputs ``X`` 4-D ``[batch, num_heads, seq_len, head_size]`` -- the canonical layout, no
transpose --, ``cos_cache`` / ``sin_cache`` ``[batch, seq_len, rotary_dim/2]`` (the form without
``position_ids``); attributes ``interleaved`` (1: pairs (2i, 2i+1), ROPE-PAIR-INTERLEAVED; 0:
pairs (i, i + r/2), ROPE-PAIR-HALF) and ``rotary_embedding_dim`` (partial rotary, the tail
passed through, ROPE-PARTIAL; left at its default 0 = head_size for full rotation).
``num_heads`` is only read for 3-D input, set there.

Operations: ``rope_apply_with_cos_sin(q [B, Hq, T, D], k [B, Hk, T, D], cos, sin
[B, T, pair_dim/2], params)`` -> ``(q, k)`` in the input dtype, and the operator's other input
forms as call forms of it (``call_forms``, clause ROPE-CALL-FORM): the 3-D input ``q [B, T, Hq D]``
with ``num_heads`` (``rope.apply_with_cos_sin_hidden``) and ``cos_cache`` / ``sin_cache``
``[max_position_id_plus_1, r/2]`` gathered by ``position_ids [B, T]``
(``rope.apply_with_cos_sin_cache``; ``tests/test_onnx_is_real.py`` checks the gather's range
behaviour besides).  Everything else is unsupported: the operator takes cos/sin as inputs and
computes no ``inv_freq``, angles, attention factor or scaling (ROPE-INV-FREQ, ROPE-ANGLE,
ROPE-PRECISION, SCALE-*), so an end-to-end ``rope`` would have this wrapper, not ONNX, compute
what those clauses check.

Dtypes: the operator's type constraint T is float, float16, bfloat16: float64 is unsupported.
Arrays are NumPy arrays (bfloat16 as ``ml_dtypes.bfloat16``).  Dtype policy: the reference
evaluator computes in the input dtype with NumPy (every product and sum rounded to it, as the
documented algorithm reads); onnxruntime's CPU kernel has float and float16 only (float16 is
rotated in float32 and rounded once: bit-identical to that in a check with onnxruntime 1.32.0).
For bfloat16 onnxruntime falls back to the operator's function body, whose ``Mul`` has no
bfloat16 CPU kernel, so session creation fails with NOT_IMPLEMENTED and the case is reported
unsupported with that error.
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from .base import Adapter, Unsupported, positive_rotation_only
from .reference_adapter import NP_DTYPES

OPSET = 23
IR_VERSION = 10  # the IR version of opset 23 (onnx 1.18+), read by onnxruntime 1.32
ELEM_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
NO_FLOAT64 = ("ONNX RotaryEmbedding-23 constrains T to float, float16, bfloat16 (onnx/defs/nn/defs.cc, "
              "TypeConstraint 'T'): a float64 graph is invalid")
NO_ROPE = ("ONNX RotaryEmbedding-23 takes cos_cache/sin_cache as inputs and computes no inv_freq, angles, "
           "attention factor or scaling; an end-to-end rope (and RopeOp.inv_freq / cos_sin) would have the "
           "wrapper, not ONNX, compute what ROPE-INV-FREQ / ROPE-ANGLE / ROPE-PRECISION / SCALE-* check "
           "(the op is tested at the rope_apply_with_cos_sin level)")


def rotary_model(dtype: str, interleaved: int, rotary_embedding_dim: int, position_ids: bool = False,
                 heads: Optional[tuple[int, int]] = None) -> onnx.ModelProto:
    """A checked opset-23 model: ``RotaryEmbedding`` on ``q`` and on ``k`` with shared caches.

    Graph inputs ``q [B, Hq, S, D]``, ``k [B, Hk, S, D]`` (``dtype``; with ``heads = (Hq, Hk)`` the
    operator's 3-D input ``q [B, S, Hq D]``, ``k [B, S, Hk D]``, each node's ``num_heads`` its count),
    ``cos_cache`` and ``sin_cache`` (``[B, S, R]``, or ``[P, R]`` with ``position_ids [B, S]`` int64 when
    ``position_ids``); outputs ``q_out``, ``k_out`` with the inputs' shapes.  Attributes as named;
    ``rotary_embedding_dim`` 0 means head_size (the operator's default).
    """
    if dtype not in ELEM_TYPES:
        raise Unsupported(NO_FLOAT64 if dtype == "float64" else f"RotaryEmbedding-23 has no {dtype} type")
    t = ELEM_TYPES[dtype]
    cache = ["P", "R"] if position_ids else ["B", "S", "R"]
    shape = {x: (["B", "S", f"{x}_hidden"] if heads else ["B", f"H{x}", "S", "D"]) for x in ("q", "k")}
    inputs = [helper.make_tensor_value_info("q", t, shape["q"]),
              helper.make_tensor_value_info("k", t, shape["k"]),
              helper.make_tensor_value_info("cos_cache", t, cache),
              helper.make_tensor_value_info("sin_cache", t, cache)]
    tail = []
    if position_ids:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["B", "S"]))
        tail = ["position_ids"]
    attrs = {"interleaved": int(interleaved)}
    if rotary_embedding_dim:
        attrs["rotary_embedding_dim"] = int(rotary_embedding_dim)
    nodes = [helper.make_node("RotaryEmbedding", [x, "cos_cache", "sin_cache", *tail], [f"{x}_out"], name=f"rope_{x}",
                              **attrs, **({"num_heads": int(h)} if heads else {})) for x, h in zip(("q", "k"), heads or (0, 0))]
    outputs = [helper.make_tensor_value_info("q_out", t, shape["q"]),
               helper.make_tensor_value_info("k_out", t, shape["k"])]
    model = helper.make_model(helper.make_graph(nodes, "posenc_rotary_embedding", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


class OnnxAdapter(Adapter):
    """``onnx.reference.ReferenceEvaluator`` running :func:`rotary_model` (see the module docstring)."""

    name = "onnx"
    framework = "onnx"
    #: the operator's other input forms: 3-D q / k (``num_heads``) and cos/sin caches gathered by ``position_ids``
    call_forms = ("rope.apply_with_cos_sin_hidden", "rope.apply_with_cos_sin_cache")
    notes = ("ONNX RotaryEmbedding-23 via onnx.reference (NumPy): cos/sin given by the caller; rotation "
             "computed and rounded in the activation dtype; no float64 (type constraint)")

    def versions(self):
        return {"onnx": onnx.__version__, "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}

    # ---- arrays --------------------------------------------------------------------------
    def from_numpy(self, array, dtype, device):
        if device != "cpu":
            raise ValueError(f"{self.name}: arrays live on the host; device {device!r} is not supported")
        return np.ascontiguousarray(np.asarray(array).astype(NP_DTYPES[dtype]))

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float32) if x.dtype in (np.float16, ml_dtypes.bfloat16) else x.copy()

    def dtype_of(self, x):
        return str(np.asarray(x).dtype)

    # ---- running the graph ---------------------------------------------------------------
    def run_model(self, model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
        """Run ``model`` on ``feeds`` with the reference evaluator; returns the outputs in order."""
        return ReferenceEvaluator(model).run(None, feeds)

    # ---- operations ----------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        raise Unsupported(NO_ROPE)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        """ROPE-PAIR-HALF / ROPE-PAIR-INTERLEAVED / ROPE-PARTIAL (/ ROPE-ATTENTION-FACTOR carried by
        the given cos/sin): q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]``, cos/sin ``[B, T, pair_dim/2]``,
        all of one dtype; returns ``(q, k)`` rotated by RotaryEmbedding, in that dtype."""
        if q.ndim != 4 or k.ndim != 4 or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
            raise ValueError(f"q and k must be [B, H, T, D] with equal B, T, D; got {q.shape} and {k.shape}")
        B, _, T, D = q.shape
        return self._rotary(q, k, params, D, (B, T), {"cos_cache": cos, "sin_cache": sin})

    def rope_apply_with_cos_sin_hidden(self, q, k, cos, sin, params):
        """rope.apply_with_cos_sin_hidden: the operator's 3-D input, q ``[B, T, Hq D]``, k ``[B, T, Hk D]``,
        each node's ``num_heads`` = its hidden size / ``params.head_dim``."""
        if q.ndim != 3 or k.ndim != 3 or q.shape[:2] != k.shape[:2]:
            raise ValueError(f"q and k must be [B, T, H * D] with equal B, T; got {q.shape} and {k.shape}")
        D = params.head_dim
        if q.shape[2] % D or k.shape[2] % D:
            raise ValueError(f"hidden sizes {q.shape[2]}, {k.shape[2]} are not multiples of head_dim {D}")
        return self._rotary(q, k, params, D, q.shape[:2], {"cos_cache": cos, "sin_cache": sin},
                            heads=(q.shape[2] // D, k.shape[2] // D))

    def rope_apply_with_cos_sin_cache(self, q, k, cos_cache, sin_cache, position_ids, params):
        """rope.apply_with_cos_sin_cache: the operator's ``position_ids`` input, cos/sin caches ``[P, pair_dim/2]``
        gathered by the operator at ``position_ids [B, T]`` (int64)."""
        if q.ndim != 4 or k.ndim != 4 or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
            raise ValueError(f"q and k must be [B, H, T, D] with equal B, T, D; got {q.shape} and {k.shape}")
        if np.shape(position_ids) != (q.shape[0], q.shape[2]):
            raise ValueError(f"position_ids must be [B, T] = {[q.shape[0], q.shape[2]]}; got {list(np.shape(position_ids))}")
        return self._rotary(q, k, params, q.shape[3], None, {"cos_cache": cos_cache, "sin_cache": sin_cache,
                                                             "position_ids": np.asarray(position_ids, np.int64)})

    def _rotary(self, q, k, params, D: int, rows, feeds: dict, heads=None):
        """Run :func:`rotary_model` on q, k and the cos/sin ``feeds`` (``rows``: the ``(B, T)`` the caches
        must have, None for caches gathered by ``position_ids``)."""
        dtype = self.dtype_of(q)
        if dtype == "float64":
            raise Unsupported(NO_FLOAT64)
        positive_rotation_only(params, "ONNX RotaryEmbedding")
        if params.pairing not in ("half", "interleaved"):
            raise Unsupported(f"ONNX RotaryEmbedding has half (interleaved=0) and interleaved (interleaved=1) "
                              f"pairs, each written back in place; pairing {params.pairing!r} writes another layout")
        r = params.pair_dim
        if D != params.head_dim or r % 2 or r > D:
            raise ValueError(f"head_dim {params.head_dim}, pair_dim {r}: need D == head_dim ({D}) and an even pair_dim <= D")
        cos, sin = feeds["cos_cache"], feeds["sin_cache"]
        want = [*rows, r // 2] if rows is not None else [np.shape(cos)[0], r // 2]
        if list(np.shape(cos)) != want or np.shape(sin) != np.shape(cos):
            raise ValueError(f"cos/sin must be {want}; got {list(np.shape(cos))}, {list(np.shape(sin))}")
        if {self.dtype_of(a) for a in (k, cos, sin)} != {dtype}:
            raise ValueError(f"q, k, cos, sin must share one dtype; got {[self.dtype_of(a) for a in (q, k, cos, sin)]}")
        model = rotary_model(dtype, params.pairing == "interleaved", 0 if r == D else r,
                             position_ids="position_ids" in feeds, heads=heads)
        yq, yk = self.run_model(model, {"q": q, "k": k, **feeds})
        return yq, yk

class OnnxRuntimeAdapter(OnnxAdapter):
    """The same graph on ``onnxruntime.InferenceSession`` (``CPUExecutionProvider`` only)."""

    name = "onnxruntime"
    framework = "onnxruntime"
    notes = ("onnxruntime CPU kernel for ONNX RotaryEmbedding-23: cos/sin given by the caller; float16 rotated "
             "in float32 and rounded once; no bfloat16 CPU kernel, no float64 (type constraint)")

    def versions(self):
        return {**super().versions(), "onnxruntime": onnxruntime.__version__}

    def session(self, model: onnx.ModelProto) -> onnxruntime.InferenceSession:
        """A CPU-only session (one intra-op thread: the rotation is elementwise, threads change no value).

        NOT_IMPLEMENTED at session creation becomes :class:`Unsupported` only for element types the
        CPU kernel is not registered for (``onnxruntime/core/providers/cpu/llm/rotary_embedding.cc``:
        float, MLFloat16); for those it is a failure.
        """
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 1
        try:
            return onnxruntime.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except onnxruntime.capi.onnxruntime_pybind11_state.NotImplemented as e:
            elem = model.graph.input[0].type.tensor_type.elem_type
            if elem in (TensorProto.FLOAT, TensorProto.FLOAT16):
                raise
            raise Unsupported(f"onnxruntime {onnxruntime.__version__} CPUExecutionProvider has no "
                              f"{TensorProto.DataType.Name(elem)} RotaryEmbedding kernel (registered: float, float16); "
                              f"the function-body fallback fails: {str(e).strip()}") from e

    def run_model(self, model, feeds):
        sess = self.session(model)
        if sess.get_providers() != ["CPUExecutionProvider"]:
            raise RuntimeError(f"onnxruntime chose providers {sess.get_providers()}, expected CPUExecutionProvider only")
        return sess.run(None, feeds)


ADAPTER = OnnxAdapter
ORT_ADAPTER = OnnxRuntimeAdapter
