"""The onnx and onnxruntime adapters really run ONNX's RotaryEmbedding: patch onnx's reference
kernel, or alter the graph the wrapper hands to onnxruntime, and watch the conformance run fail
(and pass without the change).  Also the operator's position_ids (cache-gather) form, which the
conformance suite does not reach: its gather, and what each runtime does with ids out of range."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference.ops.op_rotary_embedding as onnx_rope
import onnxruntime  # noqa: F401 - import before pytester snapshots sys.modules
import pytest
from onnx import helper

import posenc.adapters.onnx_adapter as onnx_adapter
from posenc.adapters.onnx_adapter import OnnxAdapter, OnnxRuntimeAdapter, rotary_model

SELECT = ("-k", "rope-apply-cos-sin")


def _outcomes(r):
    return r.ret, r.parseoutcomes()


def test_patched_reference_kernel_fails_onnx_only(run_suite, monkeypatch):
    """onnx's RotaryEmbedding._run with the pairing flipped: the onnx run fails with the pairing
    divergence diagnosed; the onnxruntime run, which never calls onnx.reference, still passes."""
    ret, base = _outcomes(run_suite("onnx", *SELECT, "--dtype", "float32,bfloat16"))
    assert ret == 0 and base.get("passed", 0) >= 4, base
    ret, ort_base = _outcomes(run_suite("onnxruntime", *SELECT))
    assert ret == 0 and ort_base.get("passed", 0) >= 2, ort_base
    run = onnx_rope.RotaryEmbedding._run

    def swapped(self, *args, interleaved=None, **kwargs):
        return run(self, *args, interleaved=0 if interleaved else 1, **kwargs)

    monkeypatch.setattr(onnx_rope.RotaryEmbedding, "_run", swapped)
    r = run_suite("onnx", *SELECT, "--dtype", "float32,bfloat16")
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed") == base["passed"], out[-2000:]
    assert "    DIV-ROPE-PAIRING-SWAPPED (violates" in out, out[-2000:]
    assert _outcomes(run_suite("onnxruntime", *SELECT)) == (0, ort_base)


@pytest.mark.parametrize("patch, form", [("position_ids", "cache"), ("num_heads", "hidden")])
def test_patched_reference_kernel_fails_its_call_form_only(run_suite, monkeypatch, patch, form):
    """The operator's other input forms are onnx's own code paths: its gather by position_ids made a read by
    token index, or its 3-D input split with the heads minor, fails that form's tests alone (the 4-D, cache-free
    call the primary tests make never reaches them)."""
    sel = ("-k", "rope-apply-cos-sin and not negative and not deinterleave", "--dtype", "float32")
    ret, base = _outcomes(run_suite("onnx", *sel))
    assert ret == 0 and base.get("passed", 0) >= 9, base
    run = onnx_rope.RotaryEmbedding._run

    def wrong(self, x, cos_cache, sin_cache, position_ids=None, **kwargs):
        if patch == "position_ids" and position_ids is not None:
            position_ids = np.arange(position_ids.size).reshape(position_ids.shape)
        if patch == "num_heads" and x.ndim == 3:
            b, s, hd = x.shape
            h = kwargs["num_heads"]
            x = x.reshape(b, s, hd // h, h).swapaxes(2, 3).reshape(b, s, hd)
            y, = run(self, x, cos_cache, sin_cache, position_ids, **kwargs)
            return (y.reshape(b, s, h, hd // h).swapaxes(2, 3).reshape(b, s, hd),)
        return run(self, x, cos_cache, sin_cache, position_ids, **kwargs)

    monkeypatch.setattr(onnx_rope.RotaryEmbedding, "_run", wrong)
    r = run_suite("onnx", *sel)
    out = r.stdout.str()
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert r.ret == 1 and failed and all(f"~{form}@" in line for line in failed), out[-3000:]
    assert f"through rope.apply_with_cos_sin_{form}" in out, out[-3000:]


def _flip_interleaved(model):
    for node in model.graph.node:
        for a in node.attribute:
            if a.name == "interleaved":
                a.i = 1 - a.i
    return model


def _negate_q(model):
    """An extra node: q's RotaryEmbedding writes q_rot, and Neg(q_rot) becomes q_out."""
    g = model.graph
    next(n for n in g.node if n.name == "rope_q").output[0] = "q_rot"
    g.node.append(helper.make_node("Neg", ["q_rot"], ["q_out"]))
    return model


@pytest.mark.parametrize("edit,divergence", [(_flip_interleaved, "DIV-ROPE-PAIRING-SWAPPED"), (_negate_q, None)],
                         ids=["flipped-interleaved", "extra-neg-node"])
def test_altered_graph_fails_onnxruntime(run_suite, monkeypatch, edit, divergence):
    """onnxruntime executes the graph the wrapper builds: an altered attribute or an extra node
    (still a valid model) makes its run fail, in float32 and in its float16 kernel."""
    ret, base = _outcomes(run_suite("onnxruntime", *SELECT, "--dtype", "float32,float16"))
    assert ret == 0 and base.get("passed", 0) >= 4, base

    def altered(*args, **kwargs):
        m = edit(rotary_model(*args, **kwargs))
        onnx.checker.check_model(m, full_check=True)
        return m

    monkeypatch.setattr(onnx_adapter, "rotary_model", altered)
    r = run_suite("onnxruntime", *SELECT, "--dtype", "float32,float16")
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed") == base["passed"], out[-2000:]
    if divergence:
        assert f"    {divergence} (violates" in out, out[-2000:]


# ---- the position_ids form: cos_cache [P, r/2] gathered by position_ids [B, T] -------------
B, HQ, HK, T, D, R = 2, 3, 1, 4, 16, 8


def _inputs(dtype):
    rng = np.random.default_rng(7)
    vals = lambda *s: (rng.integers(-128, 128, s) / 64).astype(onnx_adapter.NP_DTYPES[dtype])  # noqa: E731
    return vals(B, HQ, T, D), vals(B, HK, T, D), vals(B, T, R // 2), vals(B, T, R // 2)


@pytest.mark.parametrize("adapter_cls", [OnnxAdapter, OnnxRuntimeAdapter], ids=["onnx", "onnxruntime"])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_position_ids_gather(adapter_cls, interleaved):
    """Rows of a shuffled cache picked by position_ids give bit-identically the output of the
    form without position_ids (cos/sin [B, T, r/2] given directly); ignoring position_ids, or
    reading row b * T + t, would read the wrong rows."""
    a = adapter_cls()
    q, k, cos, sin = _inputs("float32")
    perm = np.random.default_rng(3).permutation(B * T)
    cache_cos, cache_sin = np.empty_like(cos.reshape(B * T, -1)), np.empty_like(sin.reshape(B * T, -1))
    cache_cos[perm], cache_sin[perm] = cos.reshape(B * T, -1), sin.reshape(B * T, -1)
    pid = perm.reshape(B, T).astype(np.int64)
    assert not np.array_equal(pid, np.arange(B * T).reshape(B, T))
    direct = a.run_model(rotary_model("float32", interleaved, R), {"q": q, "k": k, "cos_cache": cos, "sin_cache": sin})
    gathered = a.run_model(rotary_model("float32", interleaved, R, position_ids=True),
                           {"q": q, "k": k, "cos_cache": cache_cos, "sin_cache": cache_sin, "position_ids": pid})
    for d, g in zip(direct, gathered):
        np.testing.assert_array_equal(g, d)
    assert not np.array_equal(direct[0][..., :R], q[..., :R])  # the rotation did something


def _gather_with(adapter, pid, P=5):
    q, k, *_ = _inputs("float32")
    cache = np.arange(P * R // 2, dtype=np.float32).reshape(P, R // 2) / 64
    feeds = {"q": q[:, :, :2], "k": k[:, :, :2], "cos_cache": cache, "sin_cache": cache + 0.5,
             "position_ids": np.asarray(pid, np.int64)}
    return adapter.run_model(rotary_model("float32", 0, R, position_ids=True), feeds)


def test_position_ids_out_of_range():
    """Recorded behaviour (onnx 1.23.2, onnxruntime 1.32.0) for ids outside [0, P), P = 5 rows.

    onnxruntime's kernel rejects every id outside [0, P) (INVALID_ARGUMENT, negative ones too).
    The reference evaluator indexes with NumPy: P and beyond raise IndexError, but -1 .. -P
    silently read rows from the end (as the operator's function body, a Gather, also allows).
    No clause of the spec covers RoPE cache rows (LEARNED-ROW-RANGE is about learned tables).
    """
    ort, ref = OnnxRuntimeAdapter(), OnnxAdapter()
    last = [[0, 4], [0, 4]]
    for pid in ([[0, 5], [0, 1]], [[0, -1], [0, 1]], [[0, 1], [10**6, 1]]):
        with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument, match="out of range"):
            _gather_with(ort, pid)
    np.testing.assert_array_equal(_gather_with(ort, last)[0], _gather_with(ref, last)[0])  # positive control
    with pytest.raises(IndexError):
        _gather_with(ref, [[0, 5], [0, 1]])
    np.testing.assert_array_equal(_gather_with(ref, [[0, -1], [0, -1]])[0], _gather_with(ref, last)[0])
