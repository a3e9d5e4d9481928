"""Sinusoid options of spec 0.5.0 (SIN-ORDER-COS-FIRST, SIN-UNITS-TURNS, SIN-OUTPUT-SCALE): the reference
against hand-derived values and re-typed upstream rules (audiocraft / moshi, x-transformers), the real
transformers code run in the test (MusicGen's and MusicGen Melody's tables and forwards, VibeVoice's
timestep embedding), the validation, the mutants of DIV-SIN-SCALE-DROPPED, DIV-SIN-COS-FIRST-IGNORED and
DIV-SIN-TURNS-DROPPED, the ports, the wrappers' refusals, the generators and the config import.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from transformers.models.musicgen import modeling_musicgen as hf_musicgen
from transformers.models.musicgen_melody.modeling_musicgen_melody import MusicgenMelodySinusoidalPositionalEmbedding
from transformers.models.vibevoice.configuration_vibevoice import VibeVoiceDiffusionHeadConfig
from transformers.models.vibevoice.modeling_vibevoice import VibeVoiceDiffusionHeadSinusoidalEmbedding

from posenc import families, registry
from posenc.adapters import Unsupported
from posenc.adapters.hf_transformers import HFTransformersAdapter
from posenc.adapters.reference_adapter import MutantAdapter
from posenc.adapters.torch_adapter import TorchAdapter
from posenc.harness import golden
from posenc.harness.runner import compare_outputs, run_case
from posenc.reference import sinusoidal
from posenc.spec.models import SinusoidalParams
from posenc.spec.tolerance import bound

FEW_ULP = dict(rtol=4 * np.finfo(np.float64).eps, atol=4 * np.finfo(np.float64).eps)
SPEC = families.spec()
NEW_CLAUSES = ["SIN-ORDER-COS-FIRST", "SIN-UNITS-TURNS", "SIN-OUTPUT-SCALE"]
NEW_DIVS = {"DIV-SIN-SCALE-DROPPED": "sin_scale_dropped", "DIV-SIN-COS-FIRST-IGNORED": "sin_cos_first_ignored",
            "DIV-SIN-TURNS-DROPPED": "sin_turns_dropped"}
OPTION_CASES = [c.id for c in families.all_cases()
                if c.op.startswith("sinusoidal.") and set(c.clauses) & set(NEW_CLAUSES)]


def _S(D, **kw):
    return SinusoidalParams(dim=D, **kw)


def _row(p, pos):
    return sinusoidal.table(np.array([[pos]]), p)[0, 0]


# ---- hand-derived values ------------------------------------------------------------------------------


def test_vaswani_concat_cos_first_d4_by_hand():
    """D = 4: frequencies 1 and 10000^(-2/4) = 0.01 in each block; cos first at p = 1."""
    got = _row(_S(4, layout="concat", order="cos_first"), 1)
    np.testing.assert_allclose(got, [math.cos(1), math.cos(0.01), math.sin(1), math.sin(0.01)], **FEW_ULP)
    sin_first = _row(_S(4, layout="concat"), 1)
    np.testing.assert_allclose(sin_first, [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)], **FEW_ULP)


def test_vaswani_concat_cos_first_odd_width_keeps_the_extra_sin_column_last():
    """D = 7: the cos block has 3 columns (exponents 0, 2/7, 4/7), the sin block 4 (0, 2/7, 4/7, 6/7)."""
    p = 3
    w = [10000.0 ** (-2 * i / 7) for i in range(4)]
    got = _row(_S(7, layout="concat", order="cos_first"), p)
    np.testing.assert_allclose(got, [math.cos(p * x) for x in w[:3]] + [math.sin(p * x) for x in w], **FEW_ULP)


@pytest.mark.parametrize("D", [7, 8])
def test_t2t_cos_first_by_hand(D):
    """MusicGen's rule: h = D // 2, w_i = 10000^(-i/(h-1)), [cos | sin], a zero column last for odd D."""
    h = D // 2
    w = [10000.0 ** (-i / (h - 1)) for i in range(h)]
    for p in (0, 1, 7, 103):
        got = _row(_S(D, layout="concat", variant="t2t", order="cos_first"), p)
        expect = [math.cos(p * x) for x in w] + [math.sin(p * x) for x in w] + [0.0] * (D % 2)
        np.testing.assert_allclose(got, expect, **FEW_ULP)


def test_interleaved_turns_d4_by_hand():
    """units turns, D = 4: w = 2π [1, 1, 0.01, 0.01]; p = 25 is a quarter turn at w = 0.01."""
    p4 = _S(4, units="turns")
    np.testing.assert_allclose(_row(p4, 25), [math.sin(50 * math.pi), math.cos(50 * math.pi), 1.0, 0.0], atol=1e-13)
    np.testing.assert_allclose(_row(p4, 50), [0.0, 1.0, 0.0, -1.0], atol=1e-13)
    np.testing.assert_allclose(_row(p4, 3), [math.sin(6 * math.pi), math.cos(6 * math.pi),
                                             math.sin(0.06 * math.pi), math.cos(0.06 * math.pi)], atol=1e-14)
    angles = sinusoidal.column_angles(np.array([1]), p4)[0]
    np.testing.assert_allclose(angles, 2 * math.pi * np.array([1, 1, 0.01, 0.01]), **FEW_ULP)


def test_scale_multiplies_every_entry_by_hand():
    got = _row(_S(4, scale=2.0), 1)
    np.testing.assert_allclose(got, [2 * math.sin(1), 2 * math.cos(1), 2 * math.sin(0.01), 2 * math.cos(0.01)],
                               **FEW_ULP)


def test_fairseq_pad_row_and_zero_column_stay_zero_under_every_option():
    p = _S(7, layout="concat", variant="fairseq", padding_idx=1, order="cos_first", units="turns", scale=3.0)
    pe = sinusoidal.table(np.array([[0, 1, 2, 40]]), p)[0]
    assert (pe[1] == 0).all() and (pe[:, 6] == 0).all()
    h, x = 3, 2  # row 2: [cos | sin | 0] of 2π · 2 · 10000^(-i/2), times 3
    w = [10000.0 ** (-i / 2) for i in range(h)]
    expect = [3 * math.cos(2 * math.pi * x * v) for v in w] + [3 * math.sin(2 * math.pi * x * v) for v in w] + [0.0]
    np.testing.assert_allclose(pe[2], expect, atol=1e-14)
    emb = sinusoidal.fairseq_embeddings(np.array([[1, 1, 5, 6]]), _S(8, layout="concat", variant="fairseq",
                                                                    padding_idx=1, scale=0.25))[0]
    plain = sinusoidal.fairseq_embeddings(np.array([[1, 1, 5, 6]]), _S(8, layout="concat", variant="fairseq",
                                                                      padding_idx=1))[0]
    assert (emb[:2] == 0).all()
    np.testing.assert_array_equal(emb, 0.25 * plain)


def test_defaults_leave_every_table_as_it_was():
    """The three defaults compute exactly the 0.4.0 tables: every sinusoidal golden of spec 0.4.0 (stored by
    the 0.4.0 reference, byte-identical since) is what the reference computes now, bit for bit, outputs and
    error scales, with the new fields at their defaults."""
    m = golden.read_manifest()
    old = [c for c in families.all_cases() if c.op.startswith("sinusoidal.") and c.id not in OPTION_CASES]
    assert len(old) == 25  # the sinusoidal goldens of spec 0.4.0
    for c in old:
        assert (c.params.order, c.params.units, c.params.scale) == ("sin_first", "radians", 1.0), c.id
        g = golden.load(c, manifest=m)
        ref = registry.reference_of(c.op)
        for name, out in ref.fn(c.params, g.inputs).items():
            np.testing.assert_array_equal(out, g.outputs[name], err_msg=c.id)
        for name, (ds, an) in ref.scales(c.params, g.inputs).items():
            for now, stored in ((ds, g.dtype_scales[name]), (an, g.angle_scales[name])):
                np.testing.assert_array_equal(np.broadcast_to(now, np.shape(stored)), stored, err_msg=c.id)


# ---- validation -------------------------------------------------------------------------------------


def test_cos_first_interleaved_is_refused():
    with pytest.raises(ValidationError, match="layout must be 'concat'.*no implementation interleaves cos first"):
        SinusoidalParams(dim=8, order="cos_first")
    assert SinusoidalParams(dim=8, layout="concat", order="cos_first").order == "cos_first"


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_scale_must_be_a_positive_finite_number(bad):
    with pytest.raises(ValidationError):
        SinusoidalParams(dim=8, scale=bad)


@pytest.mark.parametrize("field,value", [("order", "cos"), ("units", "degrees")])
def test_unknown_option_values_are_refused(field, value):
    with pytest.raises(ValidationError):
        SinusoidalParams(dim=8, layout="concat", **{field: value})


# ---- re-typed upstream rules (audiocraft / moshi, x-transformers: not installed) ---------------------------


def _create_sin_embedding(positions, dim, max_period=10000.0):
    """audiocraft / moshi ``create_sin_embedding``, re-typed in NumPy float64: phase = p / max_period **
    (i / (half - 1)), [cos | sin]; even dim only."""
    assert dim % 2 == 0
    half = dim // 2
    phase = np.asarray(positions, np.float64)[..., None] / max_period ** (np.arange(half) / (half - 1))
    return np.concatenate([np.cos(phase), np.sin(phase)], -1)


@pytest.mark.parametrize("D,base", [(4, 10000.0), (8, 500.0), (1536, 10000.0)])
def test_audiocraft_create_sin_embedding_is_whisper_cos_first(D, base):
    rows = np.arange(3000)[None]
    p = _S(D, layout="concat", variant="whisper", order="cos_first", base=base)
    np.testing.assert_allclose(sinusoidal.table(rows, p), _create_sin_embedding(rows, D, base), rtol=0, atol=1e-10)


def _scaled_sinusoidal(positions, dim, theta=10000.0):
    """x-transformers ``ScaledSinusoidalEmbedding`` at its initial scale, re-typed: inv_freq = theta **
    -(arange(half) / half), [sin | cos] times dim ** -0.5."""
    half = dim // 2
    emb = np.asarray(positions, np.float64)[..., None] * theta ** -(np.arange(half) / half)
    return np.concatenate([np.sin(emb), np.cos(emb)], -1) * dim ** -0.5


def test_x_transformers_scaled_sinusoid_is_vaswani_concat_times_scale():
    rows = np.arange(2048)[None]
    p = _S(512, layout="concat", scale=512 ** -0.5)
    np.testing.assert_allclose(sinusoidal.table(rows, p), _scaled_sinusoidal(rows, 512), rtol=0, atol=1e-12)


# ---- the real transformers code (5.24, float32 at source) ---------------------------------------------------


def _within_float32(got, p, rows) -> tuple[bool, float]:
    ref = sinusoidal.table(rows, p)
    ds, an = registry.reference_of("sinusoidal.table").scales(p, {"position_ids": rows})["pe"]
    err = np.abs(np.asarray(got, np.float64) - ref)
    return bool((err <= bound("float32", ds, an, True)).all()), float(err.max())


@pytest.mark.parametrize("D", [1, 4, 5, 7, 8, 64, 1024])
def test_musicgen_get_embedding_is_t2t_cos_first(D):
    n = 2100
    got = hf_musicgen.MusicgenSinusoidalPositionalEmbedding.get_embedding(n, D).double().numpy()[None]
    p = _S(D, layout="concat", variant="t2t", order="cos_first")
    ok, worst = _within_float32(got, p, np.arange(n)[None])
    assert ok, worst
    sin_first = _S(D, layout="concat", variant="t2t")
    if D >= 4:  # and not the sin-first table: the test can fail
        assert not _within_float32(got, sin_first, np.arange(n)[None])[0]


@pytest.mark.parametrize("D", [2, 3])
def test_musicgen_divides_by_zero_where_t2t_clamps(D):
    with pytest.raises(ZeroDivisionError):
        hf_musicgen.MusicgenSinusoidalPositionalEmbedding.get_embedding(4, D)
    assert np.isfinite(sinusoidal.table(np.array([[0, 1, 2]]), _S(D, layout="concat", variant="t2t",
                                                                  order="cos_first"))).all()


@pytest.mark.parametrize("cache_length", [0, 5, 2040])
def test_musicgen_forward_reads_rows_arange_plus_cache(cache_length):
    """The decoder's embed_positions: rows arange(T) + cache_length (the table regrows past its size)."""
    D, T = 16, 7
    emb = hf_musicgen.MusicgenSinusoidalPositionalEmbedding(2048, D)
    got = emb(torch.zeros(2, 4, T, dtype=torch.long), cache_length).double().numpy()
    rows = (np.arange(T) + cache_length)[None]
    ok, worst = _within_float32(got[None], _S(D, layout="concat", variant="t2t", order="cos_first"), rows)
    assert ok and got.shape == (T, D), (worst, got.shape)
    mel = MusicgenMelodySinusoidalPositionalEmbedding(2048, D)
    got_m = mel(torch.zeros(2, T, D), cache_length).double().numpy()
    np.testing.assert_array_equal(got_m, got)  # MusicGen Melody's copy: the same table and rows


@pytest.mark.parametrize("D,base", [(4, 10000), (8, 100), (256, 10000)])
def test_vibevoice_timestep_embedding_is_vaswani_concat_cos_first(D, base):
    emb = VibeVoiceDiffusionHeadSinusoidalEmbedding(VibeVoiceDiffusionHeadConfig(frequency_embedding_size=D,
                                                                                  diffusion_max_period=base))
    rows = np.arange(3000)
    got = emb(torch.from_numpy(rows)).double().numpy()[None]
    ok, worst = _within_float32(got, _S(D, layout="concat", order="cos_first", base=float(base)), rows[None])
    assert ok, worst


# ---- the mutants ------------------------------------------------------------------------------------------


def test_new_divergences_are_declared_for_0_5_0():
    for div_id, mutant in NEW_DIVS.items():
        d = SPEC.divergences[div_id]
        assert d.since == "0.5.0" and d.mutant == mutant and mutant in registry.mutants()
        assert set(d.violates) <= set(NEW_CLAUSES)
        assert any("/pull/" in e or "/issues/" in e for e in d.evidence), d.evidence
    for cid in NEW_CLAUSES:
        c = SPEC.clauses[cid]
        assert c.since == "0.5.0" and any(s.kind == "upstream" and "::" in s.location for s in c.sources)


def test_mutants_are_the_wrong_behaviour_and_none_where_they_do_not_apply():
    x = {"position_ids": np.array([[1, 25]])}
    scaled = _S(4, scale=2.0)
    dropped = registry.run_mutant("sin_scale_dropped", "sinusoidal.table", scaled, x)["pe"]
    np.testing.assert_array_equal(dropped, sinusoidal.table(x["position_ids"], _S(4)))
    cos_first = _S(4, layout="concat", order="cos_first")
    ignored = registry.run_mutant("sin_cos_first_ignored", "sinusoidal.table", cos_first, x)["pe"][0, 0]
    np.testing.assert_allclose(ignored, [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)], **FEW_ULP)
    turns = _S(4, units="turns")
    radians = registry.run_mutant("sin_turns_dropped", "sinusoidal.table", turns, x)["pe"][0, 1]
    np.testing.assert_allclose(radians, [math.sin(25), math.cos(25), math.sin(0.25), math.cos(0.25)], **FEW_ULP)
    plain = _S(4, layout="concat")
    for mutant in NEW_DIVS.values():
        assert registry.run_mutant(mutant, "sinusoidal.table", plain, x) is None
        fx = {"input_ids": np.array([[1, 5]]), "cache_length": np.asarray(0)}
        assert registry.run_mutant(mutant, "sinusoidal.fairseq", _S(8, layout="concat", variant="fairseq",
                                                                    padding_idx=1), fx) is None


def _goldens():
    m = golden.read_manifest()
    return {c.id: golden.load(c, manifest=m) for c in families.all_cases() if c.id in OPTION_CASES}


@pytest.mark.parametrize("div_id", list(NEW_DIVS))
def test_each_new_mutant_fails_goldens_and_is_named(div_id):
    """Through the adapter path (MutantAdapter) at every dtype: some option golden fails and the diagnosis
    names the divergence; every option golden the mutant does not apply to passes."""
    from posenc.harness.diagnosis import diagnose
    adapter = MutantAdapter(div_id)
    for dtype in ("float64", "float32", "bfloat16", "float16"):
        named = []
        for cid, g in _goldens().items():
            applies = registry.run_mutant(NEW_DIVS[div_id], g.case.op, g.case.params, g.inputs) is not None
            out = run_case(adapter, g, dtype, "cpu")
            ok = all(c.ok for c in compare_outputs(g, out, dtype))
            assert ok != applies, (div_id, cid, dtype)
            if applies and div_id in [m.divergence for m in diagnose(SPEC, g, out, dtype)]:
                named.append(cid)
        assert named, (div_id, dtype)


# ---- the ports and the wrappers ---------------------------------------------------------------------------


@pytest.mark.parametrize("cid", OPTION_CASES)
def test_torch_port_passes_the_option_goldens(cid):
    g = _goldens()[cid]
    for dtype in ("float64", "float32", "bfloat16"):
        out = run_case(TorchAdapter(), g, dtype, "cpu")
        assert all(c.ok for c in compare_outputs(g, out, dtype)), (cid, dtype)


def _sin(adapter, p):
    return adapter.sinusoidal(torch.tensor([[0, 1, 2]]), p, dtype="float32", device="cpu")


@pytest.mark.parametrize("p,reason", [
    (_S(8, units="turns"), "in turns"),
    (_S(8, layout="concat", variant="t2t", scale=0.5), "by a scale"),
    (_S(8, layout="concat", variant="whisper", order="cos_first"), "whisper table cos first"),
    (_S(7, layout="concat", order="cos_first"), "odd D = 7"),
    (_S(8, layout="concat", order="cos_first", base=100.5), "an int"),
    (_S(8, layout="concat", variant="t2t", order="cos_first", base=500.0), "hard-codes base 10000"),
    (_S(2, layout="concat", variant="t2t", order="cos_first"), "half_dim - 1 = 0"),
])
def test_hf_wrapper_refuses_what_transformers_cannot_express(p, reason):
    with pytest.raises(Unsupported, match=reason):
        _sin(HFTransformersAdapter(), p)


def test_hf_wrapper_refuses_options_on_m2m100_forward():
    ad = HFTransformersAdapter()
    for kw in (dict(order="cos_first"), dict(units="turns"), dict(scale=2.0)):
        with pytest.raises(Unsupported):
            ad.fairseq_sinusoidal(_S(8, layout="concat", variant="fairseq", padding_idx=1, **kw),
                                  dtype="float32", device="cpu")


def test_hf_wrapper_serves_cos_first_from_musicgen_and_vibevoice(monkeypatch):
    ad = HFTransformersAdapter()
    rows = torch.arange(40)[None]
    for p in (_S(8, layout="concat", variant="t2t", order="cos_first"), _S(8, layout="concat", order="cos_first")):
        got = ad.sinusoidal(rows, p, dtype="float32", device="cpu").double().numpy()
        assert _within_float32(got, p, rows.numpy())[0]
    calls = []
    real = hf_musicgen.MusicgenSinusoidalPositionalEmbedding.get_embedding
    monkeypatch.setattr(hf_musicgen.MusicgenSinusoidalPositionalEmbedding, "get_embedding",
                        staticmethod(lambda n, d: calls.append((n, d)) or real(n, d)))
    ad.sinusoidal(rows, _S(8, layout="concat", variant="t2t", order="cos_first"), dtype="float32", device="cpu")
    assert calls == [(40, 8)]  # MusicGen's own table, max(position) + 1 rows


def test_patched_musicgen_fails_the_suite_as_cos_first_ignored(run_suite, monkeypatch):
    """The hf-transformers column checks a real cos-first implementation: MusicGen's table patched to
    [sin | cos] fails the MusicGen goldens, named DIV-SIN-COS-FIRST-IGNORED."""
    assert run_suite("hf-transformers", "-k", "sin-musicgen or sin-t2t-cos-first").ret == 0
    real = hf_musicgen.MusicgenSinusoidalPositionalEmbedding.get_embedding

    def sin_first(num_embeddings, embedding_dim):
        t = real(num_embeddings, embedding_dim)
        h = embedding_dim // 2
        return torch.cat([t[:, h:2 * h], t[:, :h], t[:, 2 * h:]], dim=1)

    monkeypatch.setattr(hf_musicgen.MusicgenSinusoidalPositionalEmbedding, "get_embedding", staticmethod(sin_first))
    r = run_suite("hf-transformers", "-k", "sin-musicgen or sin-t2t-cos-first")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-SIN-COS-FIRST-IGNORED (violates" in out, out[-2000:]


def test_keras_hub_refuses_turns_and_scale_before_building_anything():
    from posenc.adapters.keras_hub_adapter import KerasHubAdapter
    ad = KerasHubAdapter("torch")
    with pytest.raises(Unsupported, match="turns"):
        ad.sinusoidal(None, _S(8, units="turns"), dtype="float32", device="cpu")
    with pytest.raises(Unsupported, match="output scale"):
        ad.sinusoidal(None, _S(8, scale=0.5), dtype="float32", device="cpu")


# ---- generators and the config import ---------------------------------------------------------------------


def test_generators_vary_every_option():
    from posenc.harness.generation import drawn_examples
    seen = {"order": set(), "units": set(), "scale": set()}
    for op in ("sinusoidal.table", "sinusoidal.fairseq"):
        for c, _ in drawn_examples(op, "float32", 120):
            for k in seen:
                seen[k].add(getattr(c.params, k))
            assert {"SIN-ORDER-COS-FIRST", "SIN-UNITS-TURNS", "SIN-OUTPUT-SCALE"} & set(c.clauses) == {
                cl for cl, on in (("SIN-ORDER-COS-FIRST", c.params.order == "cos_first"),
                                  ("SIN-UNITS-TURNS", c.params.units == "turns"),
                                  ("SIN-OUTPUT-SCALE", c.params.scale != 1.0)) if on}
    assert seen["order"] == {"sin_first", "cos_first"} and seen["units"] == {"radians", "turns"}
    assert 1.0 in seen["scale"] and len(seen["scale"]) > 10 and all(0.01 <= s <= 10 for s in seen["scale"])


def test_config_import_gives_musicgen_its_cos_first_table_and_keeps_the_others():
    from posenc.hf import params_from_hf_config
    musicgen = _S(1024, layout="concat", variant="t2t", order="cos_first")
    assert params_from_hf_config({"model_type": "musicgen"}) == {"decoder_positions": musicgen}
    assert params_from_hf_config({"model_type": "musicgen_melody", "decoder": {"hidden_size": 1536}}) == {
        "decoder_positions": _S(1536, layout="concat", variant="t2t", order="cos_first")}
    for mt in ("musicgen_decoder", "musicgen_melody_decoder"):
        assert params_from_hf_config({"model_type": mt, "hidden_size": 2048})["positions"].order == "cos_first"
    assert params_from_hf_config({"model_type": "whisper"})["encoder_positions"] == _S(
        384, layout="concat", variant="whisper")
    for mt in ("m2m_100", "xglm"):
        assert params_from_hf_config({"model_type": mt})["positions"] == _S(
            1024, layout="concat", variant="fairseq", padding_idx=1)
