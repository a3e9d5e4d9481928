"""The TensorFlow ports: ``tensorflow`` (eager) and ``tensorflow-function`` (every kernel a tf.function).

Proves that the compiled path really is a graph traced once and reused, that changing positions,
``cache_length`` and the dynamic-NTK state flow through that one graph correctly (no stale
trace-time constants), that out-of-range rows are rejected before any gather, that an absent GPU
is a usage error, and that both adapters pass a conformance selection.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf  # noqa: F401 - imported before pytester's in-process runs snapshot sys.modules

import posenc.adapters.tf_adapter as tfa  # noqa: F401 - likewise
from posenc.spec.errors import PositionOutOfRange
from posenc.spec.models import GPT2EmbeddingParams, RopeParams, SoftmaxScaleParams, T5Params

ADAPTERS = [tfa.ADAPTER, tfa.FUNCTION_ADAPTER]


def _rope_numpy(x, pos, theta, head_dim):
    """Independent float64 half-pairing RoPE for the tests (not the kit's reference)."""
    w = theta ** (-np.arange(0, head_dim, 2) / head_dim)
    phi = pos[..., None] * w
    c, s = np.cos(phi)[:, None], np.sin(phi)[:, None]
    x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def test_function_path_is_one_graph_reused_with_changing_positions():
    """Two decode steps (different positions, same shapes) run through ONE traced graph and give
    the correct, different rotations; the eager adapter gives the same bits."""
    a, e = tfa.FUNCTION_ADAPTER(), tfa.ADAPTER()
    p = RopeParams(head_dim=8, rope_theta=10000.0)
    x = np.arange(1 * 2 * 1 * 8, dtype=np.float64).reshape(1, 2, 1, 8) / 16 - 1
    op, eop = a.rope(p, dtype="float32", device="cpu"), e.rope(p, dtype="float32", device="cpu")
    outs = []
    for step in (5, 4000):
        pos = np.array([[step]])
        q, _ = op.apply(a.from_numpy(x, "float32", "cpu"), a.from_numpy(x, "float32", "cpu"),
                        a.from_numpy(pos, "int64", "cpu"))
        qe, _ = eop.apply(e.from_numpy(x, "float32", "cpu"), e.from_numpy(x, "float32", "cpu"),
                          e.from_numpy(pos, "int64", "cpu"))
        got = a.to_numpy(q)
        np.testing.assert_allclose(got, _rope_numpy(x, pos, 1e4, 8), atol=2e-5 * (1 + step / 1000))
        np.testing.assert_array_equal(got, e.to_numpy(qe))
        outs.append(got)
    assert not np.allclose(outs[0], outs[1])
    fn = a.function(tfa.k_rope_apply, p=p, cd=tf.float32, af=1.0)
    assert isinstance(fn, tf.types.experimental.PolymorphicFunction)
    assert fn.experimental_get_tracing_count() == 1
    graph = fn.get_concrete_function(*([tf.TensorSpec([1, 2, 1, 8], tf.float32)] * 2),
                                     tf.TensorSpec([1, 1], tf.int64), tf.TensorSpec([], tf.int64),
                                     tf.TensorSpec([], tf.float64)).graph
    ops = {o.type for o in graph.get_operations()}
    assert {"Cos", "Sin", "Placeholder"} <= ops
    assert fn.experimental_get_tracing_count() == 1  # the concrete function above was the same trace
    assert e.functions == {}  # the eager adapter traced nothing


def test_relaxed_shapes_after_retracing():
    """reduce_retracing relaxes dims to None after a second shape: kernels read shapes at run time
    (SCALE-YARN-SOFTMAX-SCALE's GQA head repeat here), and the results stay right."""
    a = tfa.FUNCTION_ADAPTER()
    p = SoftmaxScaleParams(rope=RopeParams(head_dim=8, rope_type="yarn", factor=4.0, mscale_all_dim=1.0,
                                           original_max_position_embeddings=64), qk_head_dim=12)
    scale = 12 ** -0.5 * (0.1 * math.log(4.0) + 1) ** 2
    rng = np.random.default_rng(0)
    for hq, hk, tq, tk in ((4, 2, 3, 5), (6, 3, 2, 7), (2, 1, 4, 4)):
        q, k = rng.integers(-64, 64, (1, hq, tq, 12)) / 64, rng.integers(-64, 64, (1, hk, tk, 12)) / 64
        got = a.to_numpy(a.attention_probs(a.from_numpy(q, "float32", "cpu"), a.from_numpy(k, "float32", "cpu"), p))
        logits = np.einsum("bhqd,bhkd->bhqk", q, np.repeat(k, hq // hk, axis=1)) * scale
        want = np.exp(logits - logits.max(-1, keepdims=True))
        np.testing.assert_allclose(got, want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    fn = a.function(tfa.k_attention_probs, scale=tfa.softmax_scale(p))
    assert fn.experimental_get_tracing_count() == 2  # the third call reused the relaxed trace


def test_dynamic_ntk_grow_and_reset_through_the_graph():
    """SCALE-DYNAMIC-GROW through one traced function: 8192 grows theta', 6000 keeps it, 2004
    resets to theta, 6000 grows to theta'(6000); the state lives on the prepared object."""
    a = tfa.FUNCTION_ADAPTER()
    p = RopeParams(head_dim=16, rope_theta=10000.0, rope_type="dynamic", factor=2.0,
                   max_position_embeddings=4096, dynamic_policy="grow_until_reset")
    op = a.rope(p, dtype="float32", device="cpu")

    def theta_of(L):
        return 1e4 * (2.0 * L / 4096 - 1.0) ** (16 / 14)

    expected = [1e4, theta_of(8192), theta_of(8192), 1e4, theta_of(6000)]
    for last, theta in zip((2, 8191, 5999, 2003, 5999), expected):
        pos = np.array([[0, 1, last]])
        c, _ = op.cos_sin(a.from_numpy(pos, "int64", "cpu"))
        w = theta ** (-np.arange(0, 16, 2) / 16)
        np.testing.assert_allclose(a.to_numpy(op.inv_freq()[0]), w, rtol=1e-6)
        np.testing.assert_allclose(a.to_numpy(c)[0, 2], np.cos((last * w) % (2 * np.pi)), atol=4e-4)
    fn = a.function(tfa.k_rope_cos_sin, p=p, cd=tf.float32, dt=tf.float32, af=1.0)
    assert fn.experimental_get_tracing_count() == 1


def test_changing_cache_length_through_the_graph():
    """POS-DECODE and GPT-2's default positions: cache_length is a tensor, not a baked constant."""
    a = tfa.FUNCTION_ADAPTER()
    for cl in (0, 5, 17):
        got = a.to_numpy(a.position_ids("decode", device="cpu", batch=2, seq_len=3, cache_length=cl))
        np.testing.assert_array_equal(got, np.broadcast_to(cl + np.arange(3), (2, 3)))
    assert a.function(tfa.k_arange_positions).experimental_get_tracing_count() == 1
    p = GPT2EmbeddingParams(vocab_size=4, n_positions=20, n_embd=2)
    wte = a.from_numpy(np.zeros((4, 2)), "float32", "cpu")
    wpe = a.from_numpy(np.arange(40.0).reshape(20, 2), "float32", "cpu")
    f = a.gpt2_embeddings(p, {"wte": wte, "wpe": wpe}, dtype="float32", device="cpu")
    ids = a.from_numpy(np.zeros((1, 1), np.int64), "int64", "cpu")
    for cl in (0, 7, 19):
        np.testing.assert_array_equal(a.to_numpy(f(ids, cache_length=cl))[0, 0], [2 * cl, 2 * cl + 1])
    with pytest.raises(PositionOutOfRange):
        f(ids, cache_length=20)
    assert a.function(tfa.k_default_positions).experimental_get_tracing_count() == 1


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.name)
def test_out_of_range_rows_raise_before_any_gather(cls, monkeypatch):
    """LEARNED-ROW-RANGE: the host-side check raises PositionOutOfRange (an IndexError) and no
    gather runs; the last row is returned as is."""
    a = cls()
    table = a.from_numpy(np.arange(10.0).reshape(5, 2), "bfloat16", "cpu")
    np.testing.assert_array_equal(a.to_numpy(a.lookup(table, a.from_numpy(np.array([[4]]), "int64", "cpu"))),
                                  [[[8.0, 9.0]]])
    gathers = []
    from posenc.adapters.tf_port import learned
    monkeypatch.setattr(learned, "_gather", lambda t, r: gathers.append(r) or tf.gather(t, r))
    a = cls()  # fresh function cache: the patched kernel is what gets traced
    for bad in (5, -1):
        with pytest.raises(PositionOutOfRange, match=r"LEARNED-ROW-RANGE: row indices span"):
            a.lookup(table, a.from_numpy(np.array([[0, bad]]), "int64", "cpu"))
    assert gathers == []


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.name)
def test_gather_kernel_asserts_the_range_itself(cls):
    """Past the host check, the gather kernel's own in-graph assertion fires (a GPU gather
    would return zeros): the error names the clause, not tf.gather's CPU message."""
    a = cls()
    table = a.from_numpy(np.ones((3, 2)), "float32", "cpu")
    for bad in (3, -2):
        rows = a.from_numpy(np.array([bad]), "int64", "cpu")
        with pytest.raises(tf.errors.InvalidArgumentError, match="LEARNED-ROW-RANGE"):
            a.run(tfa.k_lookup, table, rows)


def test_t5_bucket_boundary_survives_grappler(monkeypatch):
    """T5-BUCKET-BIDIRECTIONAL at |rel| = 64 (log 8 / log 16 = 0.75 exactly) is bucket 14 in the
    graph too; with a plain '/', grappler's Div -> Mul(reciprocal) rewrite would give 13."""
    p = T5Params(num_buckets=32, max_distance=128, bidirectional=True)
    rel = np.array([-64, 64])

    def buckets(a):
        return a.to_numpy(a.t5_buckets(a.from_numpy(rel, "int64", "cpu"), p)).tolist()
    assert buckets(tfa.ADAPTER()) == buckets(tfa.FUNCTION_ADAPTER()) == [14, 30]
    from posenc.adapters.tf_port import t5
    monkeypatch.setattr(t5, "exact_div", lambda x, c: x / c)
    assert buckets(tfa.ADAPTER()) == [14, 30]
    assert buckets(tfa.FUNCTION_ADAPTER()) == [13, 29]


def test_devices():
    assert tfa.tf_device("cpu") == "/CPU:0"
    assert tfa.tf_device("cuda") == "/GPU:0" and tfa.tf_device("gpu:1") == "/GPU:1"
    for bad in ("tpu", "cuda:x", "cpu:0"):
        with pytest.raises(ValueError, match="unknown device"):
            tfa.tf_device(bad)
    a = tfa.ADAPTER()
    assert a.devices == ("cpu", "cuda", "gpu") and set(a.range_probe_devices) == set(a.devices)
    assert a.device_of(a.from_numpy(np.zeros(2), "float16", "cpu")) == "cpu"
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU: the usage-error checks below need one without")
    assert not any(a.device_available(d) for d in ("cuda", "gpu", "cuda:0", "gpu:1"))


@pytest.mark.parametrize("device", ["gpu", "cuda:0"])
def test_absent_gpu_is_a_usage_error(run_suite, device):
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    r = run_suite("tensorflow-function", "--device", device, "-k", "rope-tiny")
    assert r.ret == 4 and "not available" in r.stderr.str(), r.stderr.str()[-2000:]


@pytest.mark.parametrize("name", ["tensorflow", "tensorflow-function"])
def test_conformance_selection_passes(run_suite, name):
    forms = ("(not test_call_form or int32)" if name == "tensorflow-function"  # adapters.base.compiled_call_forms
             else "not strided and not inplace")  # the call forms TensorFlow's arrays lack: unsupported
    r = run_suite(name, "--dtype", "all", "-k",
                  f"(scale-dynamic-grow or t5-base-buckets-bidirectional or gpt2-small-cache or rope-tiny-partial) "
                  f"and {forms}")
    o = r.parseoutcomes()
    assert r.ret == 0 and o.get("passed", 0) >= 40 and not o.get("failed") and not o.get("skipped"), \
        r.stdout.str()[-3000:]
    assert f"posenc conformance: {name} on cpu" in r.stdout.str()
