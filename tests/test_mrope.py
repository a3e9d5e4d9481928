"""M-RoPE reference (MROPE-*) against the G.1 figures and the real transformers 5.24 Qwen2-VL /
Qwen3-VL rotary modules run in the test; its mutants; the HF wrapper is real."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers.models.qwen2_vl.modeling_qwen2_vl as hf_qwen2_vl
import transformers.models.qwen3_vl.modeling_qwen3_vl as hf_qwen3_vl

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.reference import mrope, mutants, ops, rope
from posenc.spec import load_spec
from posenc.spec.models import MRopeParams, RopeParams
from posenc.spec.tolerance import bound
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig

SPEC = load_spec()
FIG2 = MRopeParams(head_dim=16, mrope_section=(2, 3, 3))
FIG3 = MRopeParams(head_dim=16, mrope_section=(4, 2, 2), layout="interleaved")


def test_figures():
    assert mrope.multipliers(4, 1, 2, FIG2) == [4, 4, 1, 1, 1, 2, 2, 2]
    assert mrope.multipliers(4, 1, 2, FIG3) == [4, 1, 2, 4, 1, 2, 4, 4]
    q = MRopeParams(head_dim=128, mrope_section=(24, 20, 20), layout="interleaved")
    assert [q.axes.count(a) for a in range(3)] == [24, 20, 20]
    assert q.axes[:6] == [0, 1, 2, 0, 1, 2] and q.axes[58:] == [1, 2, 0, 0, 0, 0]


def test_params_validation():
    with pytest.raises(ValueError, match="sum to head_dim/2"):
        MRopeParams(head_dim=16, mrope_section=(2, 3, 4))
    with pytest.raises(ValueError, match="gives the axes"):
        MRopeParams(head_dim=16, mrope_section=(0, 4, 4), layout="interleaved")


def test_angles_by_hand():
    pid = np.array([[[4]], [[1]], [[2]]])
    phi = mrope.angles(pid, FIG2)[0, 0]
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    np.testing.assert_array_equal(phi, np.array([4, 4, 1, 1, 1, 2, 2, 2]) * w)


@pytest.mark.parametrize("p", [FIG2, FIG3, MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24))])
def test_text_tokens_reduce_to_rope(p):
    pos = np.array([[0, 5, 131071]])
    x = np.random.default_rng(0).normal(size=(1, 2, 3, p.head_dim))
    y, _ = mrope.apply(x, x, np.stack([pos] * 3), p)
    r, _ = rope.apply(x, x, pos, RopeParams(head_dim=p.head_dim, rope_theta=p.rope_theta))
    np.testing.assert_array_equal(y, r)


def _hf(p):
    rp = {"rope_type": "default", "rope_theta": p.rope_theta, "mrope_section": list(p.mrope_section)}
    common = dict(hidden_size=p.head_dim, num_attention_heads=1, num_key_value_heads=1, num_hidden_layers=1,
                  intermediate_size=1, vocab_size=1, pad_token_id=None)
    if p.layout == "contiguous":
        cfg = Qwen2VLTextConfig(bos_token_id=None, eos_token_id=None, rope_parameters=rp, **common)
        return hf_qwen2_vl.Qwen2VLRotaryEmbedding(cfg)
    cfg = Qwen3VLTextConfig(head_dim=p.head_dim, rope_parameters={**rp, "mrope_interleaved": True}, **common)
    return hf_qwen3_vl.Qwen3VLTextRotaryEmbedding(cfg)


@pytest.mark.parametrize("p", [FIG2, FIG3,
                               MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24)),
                               MRopeParams(head_dim=128, rope_theta=5e5, mrope_section=(24, 20, 20), layout="interleaved")])
def test_reference_matches_transformers(p):
    """HF 5.24 recomposition (float32 angles) within the suite's float32 bound of the reference."""
    pid = np.array([[[0, 4, 7, 131071, 3]], [[0, 1, 13, 0, 4096]], [[0, 2, 5, 9, 70000]]], np.int64)
    cos, sin = _hf(p)(torch.empty(0, dtype=torch.float32), torch.from_numpy(pid))
    h = p.head_dim // 2
    assert torch.equal(cos[..., :h], cos[..., h:])
    sc = ops.scales("mrope.cos_sin", p, {"position_ids": pid})["cos"]
    rc, rs = mrope.cos_sin(pid, p)
    for got, ref in ((cos[..., :h], rc), (sin[..., :h], rs)):
        assert (np.abs(got.double().numpy() - ref) <= bound("float32", *sc, True)).all()


def test_hf_multipliers_match_the_figures():
    """The figures hold for transformers itself: angles / inv_freq recover the multipliers."""
    for p, want in ((FIG2, [4, 4, 1, 1, 1, 2, 2, 2]), (FIG3, [4, 1, 2, 4, 1, 2, 4, 4])):
        m = _hf(p)
        m.inv_freq.fill_(1.0)
        _, sin = m(torch.empty(0, dtype=torch.float64), torch.tensor([[[4]], [[1]], [[2]]]))
        assert torch.round(torch.asin(sin[0, 0, :8].double()) * 1000).tolist() == \
            [round(np.arcsin(np.sin(v)) * 1000) for v in want]


def test_mutants_are_the_wrong_behaviour():
    pid = {"position_ids": np.array([[[4]], [[1]], [[2]]])}
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    out = mutants.run("mrope_interleaved_as_contiguous", "mrope.cos_sin", FIG3, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(np.array([4, 4, 4, 4, 1, 1, 2, 2]) * w), rtol=1e-15)
    assert mutants.run("mrope_interleaved_as_contiguous", "mrope.cos_sin", FIG2, pid) is None
    out = mutants.run("mrope_temporal_only", "mrope.cos_sin", FIG2, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(4 * w), rtol=1e-15)
    out = mutants.run("mrope_section_order", "mrope.cos_sin", FIG2, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(np.array([2, 2, 1, 1, 1, 4, 4, 4]) * w), rtol=1e-15)


# ---- the HF wrapper really runs transformers ------------------------------------------------------


def test_patched_qwen2_vl_recomposition_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "mrope-qwen2-vl").ret == 0

    def reversed_axes(self, freq):  # sections applied to (w, h, t)
        freq = torch.cat([m[2 - i % 3] for i, m in enumerate(freq.split(self.mrope_section, dim=-1))], dim=-1)
        return torch.cat((freq, freq), dim=-1)
    monkeypatch.setattr(hf_qwen2_vl.Qwen2VLRotaryEmbedding, "recomposition_frequencies", reversed_axes)
    r = run_suite("hf-transformers", "-k", "mrope-qwen2-vl")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-MROPE-SECTION-ORDER (violates" in out, out[-2000:]


def test_patched_qwen3_vl_recomposition_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "mrope-qwen3-vl").ret == 0

    def contiguous(self, freq):  # Qwen2-VL's rule in Qwen3-VL
        freq = torch.cat([m[i % 3] for i, m in enumerate(freq.split(self.mrope_section, dim=-1))], dim=-1)
        return torch.cat((freq, freq), dim=-1)
    monkeypatch.setattr(hf_qwen3_vl.Qwen3VLTextRotaryEmbedding, "recomposition_frequencies", contiguous)
    r = run_suite("hf-transformers", "-k", "mrope-qwen3-vl")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-MROPE-INTERLEAVED-AS-CONTIGUOUS (violates" in out, out[-2000:]


def test_patched_qwen2_vl_apply_fails_the_suite(run_suite, monkeypatch):
    monkeypatch.setattr(hf_qwen2_vl, "apply_rotary_pos_emb", lambda q, k, cos, sin, unsqueeze_dim=1: (q, k))
    r = run_suite("hf-transformers", "-k", "mrope-qwen2-vl-vision")
    assert r.ret == 1 and "MROPE-SECTIONS" in r.stdout.str()
