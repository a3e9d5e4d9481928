"""Sinusoid variants with the h - 1 divisor (SIN-T2T, SIN-FAIRSEQ-POSITIONS, SIN-WHISPER): the
reference against hand-derived values, published figures (encodings-facts A.3-A.7), a re-typed
tensor2tensor ``get_timing_signal_1d`` and the real transformers code run in the test (M2M100,
Whisper); the named DegenerateWidth error; the mutants; the HF wrapper is real.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import transformers.models.m2m_100.modeling_m2m_100 as hf_m2m
import transformers.models.whisper.modeling_whisper as hf_whisper

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.adapters.torch_adapter import TorchAdapter
from posenc.reference import sinusoidal
from posenc.spec import load_spec
from posenc.spec.errors import DegenerateWidth, SpecError
from posenc.spec.models import SinusoidalParams
from posenc.spec.tolerance import bound
from posenc import registry

FEW_ULP = dict(rtol=4 * np.finfo(np.float64).eps, atol=4 * np.finfo(np.float64).eps)
SPEC = load_spec()


def _p(D, variant="t2t", **kw):
    if variant == "fairseq":
        kw.setdefault("padding_idx", 1)
    return SinusoidalParams(dim=D, layout="concat", variant=variant, **kw)


def _rows(n):
    return np.arange(n, dtype=np.int64)[None]


# ---- hand-derived values and figures ----------------------------------------------------------


def test_t2t_d8_by_hand():
    """D = 8, h = 4: frequencies 10000^(-i/3) = 1, 10^(-4/3), 10^(-8/3), 1e-4 (Vaswani: 1e-3 last)."""
    w = [1.0, 10.0 ** (-4 / 3), 10.0 ** (-8 / 3), 1e-4]
    for p in (0, 1, 7, 100, 2047):
        pe = sinusoidal.table(np.array([[p]]), _p(8))[0, 0]
        expect = [math.sin(p * x) for x in w] + [math.cos(p * x) for x in w]
        np.testing.assert_allclose(pe, expect, **FEW_ULP)
    one = sinusoidal.column_angles(np.array([1]), _p(8))[0]
    assert one[3] == pytest.approx(1e-4, rel=1e-15)
    vas = sinusoidal.column_angles(np.array([1]), SinusoidalParams(dim=8, layout="concat"))[0]
    assert vas[3] == pytest.approx(1e-3, rel=1e-15)  # encodings-facts A.7 pitfall 1


def test_t2t_odd_width_appends_a_zero_column():
    pe = sinusoidal.table(np.array([[0, 3, 50]]), _p(7))[0]
    assert (pe[:, 6] == 0).all()
    w = [1.0, 1e-2, 1e-4]  # h = 3: 10000^(-i/2)
    np.testing.assert_allclose(pe[1, :6], [math.sin(3 * x) for x in w] + [math.cos(3 * x) for x in w], **FEW_ULP)
    assert (sinusoidal.table(np.array([[5]]), _p(1)) == 0).all()  # D = 1: only the zero column


@pytest.mark.parametrize("D", [2, 3])
def test_t2t_clamps_the_divisor_at_h_1(D):
    pe = sinusoidal.table(np.array([[0, 1, 4]]), _p(D))[0]
    expect = np.array([[math.sin(p), math.cos(p)] + [0.0] * (D - 2) for p in (0, 1, 4)])
    np.testing.assert_allclose(pe, expect, **FEW_ULP)
    assert np.isfinite(pe).all()


def _t2t_get_timing_signal_1d(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    """tensor2tensor common_attention.py::get_timing_signal_1d, re-typed in NumPy float64."""
    position = np.arange(length, dtype=np.float64) + start_index
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * np.exp(np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


@pytest.mark.parametrize("D", [1, 2, 3, 4, 7, 8, 9, 64, 512])
def test_t2t_matches_get_timing_signal_1d(D):
    n = 600
    np.testing.assert_allclose(sinusoidal.table(_rows(n), _p(D))[0], _t2t_get_timing_signal_1d(n, D),
                               rtol=0, atol=n * 1e-14)


def test_fairseq_positions_figures():
    """encodings-facts A.4: padding_idx 1, a left-padded row -> ids [1, 1, 2, 3, 4]; B.3's figures."""
    assert sinusoidal.fairseq_positions(np.array([[1, 1, 7, 8, 9]]), 1).tolist() == [[1, 1, 2, 3, 4]]
    ids = np.array([[1, 1, 0, 9, 2], [0, 9, 9, 9, 2]])
    assert sinusoidal.fairseq_positions(ids, 1).tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]]
    assert sinusoidal.fairseq_positions(np.array([[1, 7], [5, 1]]), 1, 6).tolist() == [[1, 8], [8, 1]]
    assert sinusoidal.fairseq_positions(np.array([[3, 0, 0]]), 0).tolist() == [[1, 0, 0]]  # pad 0


def test_fairseq_pad_row_is_zero_and_other_rows_are_t2t():
    p = _p(8, "fairseq")
    rows = np.array([[0, 1, 2, 300]])
    pe = sinusoidal.table(rows, p)[0]
    assert (pe[1] == 0).all()
    np.testing.assert_array_equal(np.delete(pe, 1, 0), np.delete(sinusoidal.table(rows, _p(8))[0], 1, 0))
    e = sinusoidal.fairseq_embeddings(np.array([[1, 1, 5, 6]]), p)[0]
    assert (e[:2] == 0).all() and (e[2] == sinusoidal.table(np.array([2]), p)[0]).all()


def test_whisper_is_t2t_for_even_widths():
    for D in (4, 8, 384):
        np.testing.assert_array_equal(sinusoidal.table(_rows(50), _p(D, "whisper")), sinusoidal.table(_rows(50), _p(D)))


# ---- degenerate widths: a named error, never NaN ------------------------------------------------


@pytest.mark.parametrize("variant,D", [("fairseq", 2), ("fairseq", 3), ("whisper", 2), ("whisper", 7), ("whisper", 1)])
def test_degenerate_width_is_a_named_error(variant, D):
    p = _p(D, variant)
    with pytest.raises(DegenerateWidth, match="SIN-(FAIRSEQ-POSITIONS|WHISPER): width D = ") as e:
        sinusoidal.table(np.array([[2, 3]]), p)
    assert isinstance(e.value, SpecError) and e.value.dim == D
    if variant == "fairseq":
        with pytest.raises(DegenerateWidth):
            sinusoidal.fairseq_embeddings(np.array([[5, 6]]), p)
    t = TorchAdapter()
    with pytest.raises(DegenerateWidth):
        t.sinusoidal(torch.tensor([[2, 3]]), p, dtype="float32", device="cpu")
    ops_name = "sinusoidal.fairseq" if variant == "fairseq" else "sinusoidal.table"
    with pytest.raises(DegenerateWidth):
        registry.run_reference(ops_name, p, {"input_ids": np.array([[5, 6]]), "cache_length": np.asarray(0),
                              "position_ids": np.array([[2, 3]])})


def test_upstream_degenerate_widths_are_what_the_spec_replaces():
    """HF divides by zero (M2M100 at D = 2, Whisper at D = 2) and raises ValueError (Whisper odd)."""
    with pytest.raises(ZeroDivisionError):
        hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(4, 2, 1)
    with pytest.raises(ZeroDivisionError):
        hf_whisper.sinusoids(4, 2)
    with pytest.raises(ValueError):
        hf_whisper.sinusoids(4, 7)


def test_params_validation():
    with pytest.raises(ValueError, match="layout must be 'concat'"):
        SinusoidalParams(dim=8, variant="t2t")
    with pytest.raises(ValueError, match="needs padding_idx"):
        SinusoidalParams(dim=8, layout="concat", variant="fairseq")
    with pytest.raises(ValueError, match="does not apply"):
        SinusoidalParams(dim=8, layout="concat", variant="whisper", padding_idx=1)
    assert SinusoidalParams(dim=8).variant == "vaswani"  # existing parameter sets keep their meaning


# ---- the real upstream code (transformers 5.24, float32 at source) --------------------------------


def _within(got, p, rows):
    ref = sinusoidal.table(rows, p)
    ds, an = registry.reference_of("sinusoidal.table").scales(p, {"position_ids": rows})["pe"]
    ok = np.abs(np.asarray(got, np.float64) - ref) <= bound("float32", ds, an, True)
    return ok.all(), float(np.max(np.abs(got - ref)))


@pytest.mark.parametrize("D", [4, 5, 7, 8, 9, 64, 1024])
def test_m2m100_get_embedding_is_the_fairseq_table(D):
    n = 1100
    got = hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(n, D, 1).double().numpy()[None]
    ok, worst = _within(got, _p(D, "fairseq"), _rows(n))
    assert ok, worst
    assert (got[0, 1] == 0).all()
    t2t = hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(n, D, None).double().numpy()[None]
    assert _within(t2t, _p(D), _rows(n))[0]


@pytest.mark.parametrize("D,cache_length", [(8, 0), (7, 0), (1024, 0), (16, 37)])
def test_m2m100_forward_end_to_end(D, cache_length):
    ids = np.array([[1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1], [4, 4, 4, 4, 4, 4]])
    emb = hf_m2m.M2M100SinusoidalPositionalEmbedding(4, D, 1)  # grows its table itself
    got = emb(torch.from_numpy(ids), cache_length=cache_length).double().numpy()
    p = _p(D, "fairseq")
    rows = sinusoidal.fairseq_positions(ids, 1, cache_length)
    ok, worst = _within(got, p, rows)
    assert ok, worst
    np.testing.assert_array_equal(got[:, :, :] == 0, sinusoidal.fairseq_embeddings(ids, p, cache_length) == 0)


@pytest.mark.parametrize("cache_length", [0, 1, 5, 300])
def test_create_position_ids_matches(cache_length):
    ids = np.random.default_rng(cache_length).integers(0, 4, size=(5, 9))  # many pads (id 1)
    for pad in (0, 1, 3):
        got = hf_m2m.M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids(
            torch.from_numpy(ids), pad, cache_length).numpy()
        np.testing.assert_array_equal(got, sinusoidal.fairseq_positions(ids, pad, cache_length))


@pytest.mark.parametrize("D", [4, 6, 8, 384, 512, 1280])
def test_whisper_sinusoids_match(D):
    got = hf_whisper.sinusoids(1500, D).double().numpy()[None]
    ok, worst = _within(got, _p(D, "whisper"), _rows(1500))
    assert ok, worst


# ---- mutants -------------------------------------------------------------------------------------

NEW_SIN_DIVS = ["DIV-SIN-T2T-VASWANI-DIVISOR", "DIV-SIN-PAD-ROW-NOT-ZEROED", "DIV-SIN-FAIRSEQ-PADDING-IGNORED"]


def test_mutants_are_the_wrong_behaviour():
    x = {"position_ids": np.array([[1]])}
    vas = registry.run_mutant("sin_vaswani_divisor", "sinusoidal.table", _p(8), x)["pe"][0, 0]
    assert vas[3] == pytest.approx(math.sin(1e-3), rel=1e-12)  # Vaswani's lowest frequency 1e-3
    kept = registry.run_mutant("sin_pad_row_kept", "sinusoidal.table", _p(8, "fairseq"), x)["pe"][0, 0]
    assert kept[0] == pytest.approx(math.sin(1.0)) and kept[4] == pytest.approx(math.cos(1.0))
    ign = registry.run_mutant("sin_fairseq_padding_ignored", "sinusoidal.fairseq_positions", _p(8, "fairseq"),
                      {"input_ids": np.array([[1, 1, 7]]), "cache_length": np.asarray(0)})
    assert ign["positions"].tolist() == [[2, 3, 4]]
    # the Vaswani divergences do not apply to the h-1 variants, nor the new ones to Vaswani
    assert registry.run_mutant("sin_divisor_h_minus_1", "sinusoidal.table", _p(8), x) is None
    assert registry.run_mutant("sin_layout_swapped", "sinusoidal.table", _p(8), x) is None
    assert registry.run_mutant("sin_vaswani_divisor", "sinusoidal.table", SinusoidalParams(dim=8), x) is None


# ---- the HF wrapper really runs transformers ------------------------------------------------------

_SEL = "sin-fairseq or sin-m2m100"


def test_patched_m2m100_get_embedding_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", _SEL).ret == 0
    orig = hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding

    def no_pad_row(num_embeddings, embedding_dim, padding_idx=None):
        return orig(num_embeddings, embedding_dim, None)  # the pad row keeps its sinusoid

    monkeypatch.setattr(hf_m2m.M2M100SinusoidalPositionalEmbedding, "get_embedding", staticmethod(no_pad_row))
    r = run_suite("hf-transformers", "-k", _SEL)
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-SIN-PAD-ROW-NOT-ZEROED (violates" in out, out[-2000:]


def test_patched_m2m100_positions_fail_the_suite(run_suite, monkeypatch):
    def sequential(input_ids, padding_idx, cache_length=0):  # the inputs_embeds rule
        B, T = input_ids.shape
        return (torch.arange(padding_idx + 1, T + padding_idx + 1) + cache_length).expand(B, T)

    monkeypatch.setattr(hf_m2m.M2M100SinusoidalPositionalEmbedding, "create_position_ids_from_input_ids",
                        staticmethod(sequential))
    r = run_suite("hf-transformers", "-k", "sin-m2m100")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-SIN-FAIRSEQ-PADDING-IGNORED (violates" in out, out[-2000:]


def test_patched_whisper_sinusoids_fail_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "sin-whisper").ret == 0

    def vaswani(length, channels, max_timescale=10000):
        inv = torch.exp(-math.log(max_timescale) * torch.arange(channels // 2) / (channels // 2))
        t = torch.arange(length).view(-1, 1) * inv.view(1, -1)
        return torch.cat([t.sin(), t.cos()], dim=1)

    monkeypatch.setattr(hf_whisper, "sinusoids", vaswani)
    r = run_suite("hf-transformers", "-k", "sin-whisper")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-SIN-T2T-VASWANI-DIVISOR (violates" in out, out[-2000:]


def test_t2t_at_h_1_is_unsupported_with_a_reason(run_suite):
    out = run_suite("hf-transformers", "-k", "sin-t2t-d2", "--dtype", "float32").stdout.str()
    assert "tensor2tensor clamps the divisor h - 1 to 1" in out
