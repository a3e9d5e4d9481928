"""The ``jax`` and ``jax-jit`` adapters: the compiled path really compiles, once, with positions,
cache_length and dynamic-NTK state as traced values (no stale trace-time constants); out-of-range
rows are rejected on the host before any gather; an absent GPU is a usage error; and small
in-process conformance runs pass."""

from __future__ import annotations

import jax  # noqa: F401 - imported before pytester's in-process runs snapshot sys.modules
import jax.numpy as jnp
import numpy as np
import pytest

import posenc.adapters.jax_adapter as J

from posenc.spec.errors import PositionOutOfRange
from posenc.spec.models import GPT2EmbeddingParams, RopeParams, T5Params
from posenc.spec.tolerance import bound
from posenc import registry

ADAPTERS = [J.ADAPTER, J.JIT_ADAPTER]
IDS = ["jax", "jax-jit"]


def _x(shape, seed=0):
    """Multiples of 1/64 in [-2, 2): exact in every dtype."""
    return np.random.default_rng(seed).integers(-128, 128, size=shape) / 64.0


def _assert_conforms(op, params, inputs, got, dtype="float32"):
    """Every output of ``got`` within the spec's tolerance of the NumPy reference."""
    ref, sc = registry.run_reference(op, params, inputs), registry.reference_of(op).scales(params, inputs)
    for name, y in got.items():
        err = np.abs(np.asarray(y, np.float64) - ref[name])
        tol = bound(dtype, *sc[name], True)
        assert (err <= tol).all(), f"{name}: max |err|/bound {float(np.max(err / tol)):.3g}"


def _traces(name):
    return J.TRACE_COUNTS[name]


def test_x64_side_effect_and_arrays():
    a = J.ADAPTER
    assert jax.config.jax_enable_x64  # the documented global side effect of importing the module
    assert a.dtype_of(a.from_numpy(np.arange(3), "int64", "cpu")) == "int64"
    x = a.from_numpy(_x((2, 3)), "bfloat16", "cpu")
    assert a.dtype_of(x) == "bfloat16" and a.device_of(x) == "cpu"
    assert a.to_numpy(x).dtype == np.float32 and np.array_equal(a.to_numpy(x), _x((2, 3)))


def test_jit_compiles_once_and_positions_are_traced():
    """Two calls with different positions go through ONE compiled function and give the correct,
    different results; the eager adapter traces nothing."""
    p = RopeParams(head_dim=12, rope_theta=12345.0, pairing="interleaved")
    q, k = _x((1, 2, 3, 12), 1), _x((1, 1, 3, 12), 2)
    a = J.JIT_ADAPTER
    op = a.rope(p, dtype="float32", device="cpu")
    before = _traces("rope_apply")
    outs = []
    for pos in ([[0, 1, 2]], [[70000, 70001, 70002]]):
        pid = np.array(pos)
        x = {n: a.from_numpy(v, "float32" if n != "position_ids" else "int64", "cpu")
             for n, v in (("q", q), ("k", k), ("position_ids", pid))}
        yq, yk = op.apply(x["q"], x["k"], x["position_ids"])
        outs.append(a.to_numpy(yq))
        _assert_conforms("rope.apply", p, {"q": q, "k": k, "position_ids": pid}, {"q": yq, "k": yk})
    assert _traces("rope_apply") - before == 1
    assert np.abs(outs[0] - outs[1]).max() > 0.1  # different positions, different rotations
    # eager: the same kernels, no jit
    snapshot = dict(J.TRACE_COUNTS)
    pid = np.array([[5, 6, 7]])
    e = J.ADAPTER.rope(p, dtype="float32", device="cpu").apply(
        *(J.ADAPTER.from_numpy(v, t, "cpu") for v, t in ((q, "float32"), (k, "float32"), (pid, "int64"))))
    assert dict(J.TRACE_COUNTS) == snapshot
    _assert_conforms("rope.apply", p, {"q": q, "k": k, "position_ids": pid}, {"q": e[0], "k": e[1]})


def test_jit_decode_loop_matches_prefill():
    """A decode loop (cache_length 0..7, one token per step) through the compiled path: one trace
    for the positions and one for the rotation, every step equal to the prefill's row."""
    a = J.JIT_ADAPTER
    p = RopeParams(head_dim=10, rope_theta=777.0)
    q = _x((2, 1, 8, 10), 3)
    before = (_traces("arange_positions"), _traces("rope_apply"))
    op = a.rope(p, dtype="float32", device="cpu")
    for c in range(8):
        pid = a.position_ids("decode", device="cpu", batch=2, seq_len=1, cache_length=c)
        assert a.to_numpy(pid).tolist() == [[c], [c]]
        xq = a.from_numpy(q[:, :, c:c + 1], "float32", "cpu")
        yq, _ = op.apply(xq, xq, pid)
        inputs = {"q": q[:, :, c:c + 1], "k": q[:, :, c:c + 1], "position_ids": np.full((2, 1), c)}
        _assert_conforms("rope.apply", p, inputs, {"q": yq})
    assert (_traces("arange_positions") - before[0], _traces("rope_apply") - before[1]) == (1, 1)


@pytest.mark.parametrize("policy", ["grow_until_reset", "per_call"])
def test_jit_dynamic_ntk_sequence(policy):
    """Dynamic NTK over a grow / keep / reset / grow sequence on one prepared object: the compiled
    function is traced once (theta' and seq_len are traced values; the grow state lives on the
    Python object) and every call matches the reference's policy."""
    p = RopeParams(head_dim=16, rope_type="dynamic", factor=2.0, max_position_embeddings=64, dynamic_policy=policy)
    seq = {f"position_ids.{i}": np.array([[s - 3, s - 2, s - 1]]) for i, s in enumerate((3, 128, 100, 20, 100))}
    a = J.JIT_ADAPTER
    before = _traces("rope_cos_sin")
    op = a.rope(p, dtype="float64", device="cpu")
    got = {}
    for key, pid in seq.items():
        i = key.rsplit(".", 1)[1]
        got[f"cos.{i}"], got[f"sin.{i}"] = op.cos_sin(a.from_numpy(pid, "int64", "cpu"))
    assert _traces("rope_cos_sin") - before == 1
    _assert_conforms("rope.cos_sin_calls", p, seq, got, "float64")
    # the policies differ at call 2 (seq_len 100 after 128): a state that is lost or baked in is caught
    other = p.model_copy(update={"dynamic_policy": "per_call" if policy == "grow_until_reset" else "grow_until_reset"})
    ref_other = registry.run_reference("rope.cos_sin_calls", other, seq)
    assert np.abs(np.asarray(got["cos.2"]) - ref_other["cos.2"]).max() > 1e-3


def test_jit_t5_bias_changing_cache_length():
    """One prepared T5 bias callable, cache_length 0..11: one trace, every row exact."""
    p = T5Params(num_buckets=32, max_distance=128, bidirectional=False)
    table = _x((32, 3), 4)
    a = J.JIT_ADAPTER
    before = _traces("t5_relative_buckets")
    f = a.t5_bias(p, {"table": a.from_numpy(table, "float32", "cpu")}, dtype="float32", device="cpu")
    for c in range(0, 120, 10):
        want = registry.run_reference("t5.bias", p, {"table": table, "query_length": 1, "key_length": 130, "cache_length": c})["bias"]
        assert np.array_equal(a.to_numpy(f(1, 130, cache_length=c)), want), c
    assert _traces("t5_relative_buckets") - before == 1


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_out_of_range_rows_rejected_before_any_gather(adapter, monkeypatch):
    n = 7
    table = _x((n, 4), 5)
    t = adapter.from_numpy(table, "float32", "cpu")
    # what the check guards against: a JAX gather returns a value for row n (clamped or filled)
    jnp.asarray(table)[jnp.asarray([n])].block_until_ready()
    assert np.array_equal(adapter.to_numpy(adapter.lookup(t, adapter.from_numpy(np.array([[n - 1]]), "int64", "cpu"))),
                          table[None, [n - 1]])

    def no_gather(*args, **kwargs):
        raise AssertionError("a gather kernel ran with unchecked rows")
    no_gather.jit = no_gather
    from posenc.adapters.jax_port import learned
    monkeypatch.setattr(learned, "take", no_gather)
    monkeypatch.setattr(learned, "gpt2_sum", no_gather)
    for bad in (n, -1):
        with pytest.raises(PositionOutOfRange, match="LEARNED-ROW-RANGE"):
            adapter.lookup(t, adapter.from_numpy(np.array([[0, bad]]), "int64", "cpu"))
    gp = GPT2EmbeddingParams(vocab_size=n, n_positions=n, n_embd=4)
    f = adapter.gpt2_embeddings(gp, {"wte": t, "wpe": t}, dtype="float32", device="cpu")
    ids = adapter.from_numpy(np.zeros((1, 2), np.int64), "int64", "cpu")
    with pytest.raises(PositionOutOfRange):
        f(ids, cache_length=n - 1)  # positions n - 1, n
    with pytest.raises(PositionOutOfRange):
        f(ids, position_ids=adapter.from_numpy(np.array([[0, -1]]), "int64", "cpu"))


def test_devices():
    a = J.ADAPTER
    assert a.device_available("cpu")
    assert set(a.range_probe_devices) == set(a.devices) == {"cpu", "cuda", "gpu"}
    have_gpu = any(d.platform == "gpu" for d in jax.devices())
    for d in ("cuda", "cuda:0", "gpu", "gpu:0"):
        assert a.device_available(d) == have_gpu
    assert not a.device_available("cuda:99") and not a.device_available("tpu")


@pytest.mark.parametrize("name,device", [("jax", "gpu"), ("jax-jit", "cuda:0")])
def test_absent_gpu_is_a_usage_error(run_suite, name, device):
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("a GPU is present")
    r = run_suite(name, "--device", device, "-k", "alibi-slopes-8")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "not available on this machine" in r.stderr.str()


@pytest.mark.parametrize("name,select,dtype", [
    # eager: the int32 forms only (the others are checked in jax-jit: adapters/jax_adapter.py)
    ("jax", "yarn and (not test_call_form or int32)", "float32"),
    # compiled: every form but the two JAX's arrays lack (strided views, in-place writes: unsupported)
    ("jax-jit", "(scale-dynamic or t5-base-buckets or gpt2-small) and not strided and not inplace", "all"),
])
def test_conformance_selection_passes(run_suite, name, select, dtype):
    r = run_suite(name, "--dtype", dtype, "-k", select)
    out = r.parseoutcomes()
    assert r.ret == 0 and out.get("passed", 0) >= 5, r.stdout.str()[-3000:]
    assert not out.get("failed") and not out.get("skipped"), r.stdout.str()[-3000:]
