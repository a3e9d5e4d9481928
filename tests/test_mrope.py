"""M-RoPE reference (MROPE-*) against the G.1 figures and the real transformers 5.24 Qwen2-VL /
Qwen3-VL rotary modules run in the test; its mutants; the HF wrapper is real."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers.models.qwen2_vl.modeling_qwen2_vl as hf_qwen2_vl
import transformers.models.qwen3_vl.modeling_qwen3_vl as hf_qwen3_vl

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.reference import mrope, rope
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
    # MROPE-PARTIAL: the sections split rotary_dim/2, not head_dim/2
    with pytest.raises(ValueError, match=r"must sum to rotary_dim/2 = 4"):
        MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 3, 3))
    assert MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 1, 1)).axes == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="M-RoPE rope parameters: rotary_dim 18 exceeds head_dim 16"):
        MRopeParams(head_dim=16, rotary_dim=18, mrope_section=(3, 3, 3))
    # MROPE-ROPE-TYPE: the scaling fields are RopeParams', validated as there
    with pytest.raises(ValueError, match="M-RoPE rope parameters: factor is required for rope_type 'linear'"):
        MRopeParams(head_dim=16, mrope_section=(2, 3, 3), rope_type="linear")
    with pytest.raises(ValueError, match="factor does not apply to rope_type 'default'"):
        MRopeParams(head_dim=16, mrope_section=(2, 3, 3), factor=2.0)
    with pytest.raises(ValueError, match="short_factor must have rotary_dim/2 = 4 entries"):
        MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 1, 1), rope_type="longrope",
                    short_factor=(1.0,) * 8, long_factor=(2.0,) * 8, original_max_position_embeddings=64, factor=2.0)
    with pytest.raises(ValueError):  # proportional has no M-RoPE meaning
        MRopeParams(head_dim=16, mrope_section=(2, 3, 3), rope_type="proportional")
    p = MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 1, 1), rope_type="yarn", factor=4.0,
                    original_max_position_embeddings=256)
    assert p.rope == RopeParams(head_dim=16, rotary_dim=8, rope_type="yarn", factor=4.0,
                                original_max_position_embeddings=256)


def test_scaled_figure_by_hand():
    """MROPE-ROPE-TYPE / MROPE-ATTENTION-SCALING figures: linear factor 4 divides the angles by 4;
    yarn factor 4 multiplies cos and sin by 0.1 ln 4 + 1 (the frequencies of the 1-D rule)."""
    pid = np.array([[[4]], [[1]], [[2]]])
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    lin = MRopeParams(head_dim=16, mrope_section=(2, 3, 3), rope_type="linear", factor=4.0)
    np.testing.assert_allclose(mrope.angles(pid, lin)[0, 0], np.array([4, 4, 1, 1, 1, 2, 2, 2]) * w / 4, rtol=1e-15)
    yarn = MRopeParams(head_dim=16, mrope_section=(2, 3, 3), rope_type="yarn", factor=4.0,
                       original_max_position_embeddings=64)
    c, s = mrope.cos_sin(pid, yarn)
    a = 0.1 * np.log(4.0) + 1
    w_yarn = rope.inv_freq(yarn.rope)[0]
    np.testing.assert_allclose(c[0, 0], a * np.cos(np.array([4, 4, 1, 1, 1, 2, 2, 2]) * w_yarn), rtol=1e-15)
    assert mrope.attention_factor(yarn) == pytest.approx(1.1386294361119891)


def test_partial_tail_passes_through():
    """MROPE-PARTIAL: dims >= rotary_dim are returned unchanged; the rotated share is the full-head
    M-RoPE of a rotary_dim-wide head with the same sections."""
    p = MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 1, 1), layout="interleaved")
    x = np.random.default_rng(1).normal(size=(1, 2, 3, 16))
    pid = np.array([[[0, 4, 9]], [[0, 1, 13]], [[0, 2, 5]]])
    y, _ = mrope.apply(x, x, pid, p)
    np.testing.assert_array_equal(y[..., 8:], x[..., 8:])
    head = MRopeParams(head_dim=8, mrope_section=(2, 1, 1), layout="interleaved")
    y8, _ = mrope.apply(x[..., :8], x[..., :8], pid, head)
    np.testing.assert_array_equal(y[..., :8], y8)


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
    sc = registry.reference_of("mrope.cos_sin").scales(p, {"position_ids": pid})["cos"]
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


def test_new_mutants_are_the_wrong_behaviour():
    pid = {"position_ids": np.array([[[4]], [[1]], [[2]]])}
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    yarn = MRopeParams(head_dim=16, mrope_section=(2, 3, 3), rope_type="yarn", factor=4.0,
                       original_max_position_embeddings=64)
    ref = mrope.cos_sin(pid["position_ids"], yarn)[0]
    out = registry.run_mutant("mrope_attention_scaling_dropped", "mrope.cos_sin", yarn, pid)
    np.testing.assert_allclose(out["cos"] * mrope.attention_factor(yarn), ref, rtol=1e-15)
    assert registry.run_mutant("mrope_attention_scaling_dropped", "mrope.cos_sin", FIG2, pid) is None
    out = registry.run_mutant("mrope_rope_type_ignored", "mrope.cos_sin", yarn, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(np.array([4, 4, 1, 1, 1, 2, 2, 2]) * w), rtol=1e-15)
    assert registry.run_mutant("mrope_rope_type_ignored", "mrope.cos_sin", FIG2, pid) is None
    part = MRopeParams(head_dim=16, rotary_dim=8, mrope_section=(2, 1, 1), layout="interleaved")
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 1, 16)
    out = registry.run_mutant("mrope_partial_whole_head", "mrope.apply", part, {"q": x, "k": x, **pid})
    assert not np.array_equal(out["q"][..., 8:], x[..., 8:])  # the tail is rotated
    assert registry.run_mutant("mrope_partial_whole_head", "mrope.apply", FIG2, {"q": x, "k": x, **pid}) is None


def test_mutants_are_the_wrong_behaviour():
    pid = {"position_ids": np.array([[[4]], [[1]], [[2]]])}
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    out = registry.run_mutant("mrope_interleaved_as_contiguous", "mrope.cos_sin", FIG3, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(np.array([4, 4, 4, 4, 1, 1, 2, 2]) * w), rtol=1e-15)
    assert registry.run_mutant("mrope_interleaved_as_contiguous", "mrope.cos_sin", FIG2, pid) is None
    out = registry.run_mutant("mrope_temporal_only", "mrope.cos_sin", FIG2, pid)
    np.testing.assert_allclose(out["cos"][0, 0], np.cos(4 * w), rtol=1e-15)
    out = registry.run_mutant("mrope_section_order", "mrope.cos_sin", FIG2, pid)
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


# ---- rope_type, attention scaling, partial rotary: transformers 5.24's own modules ---------------

import transformers.models.qwen3_5.modeling_qwen3_5 as hf_qwen3_5  # noqa: E402
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig  # noqa: E402

_YARN4 = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
SCALED = {
    "qwen2-vl-yarn": MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24), **_YARN4),
    "qwen2-vl-linear": MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24), rope_type="linear", factor=4.0),
    "qwen2-vl-llama3": MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24), rope_type="llama3",
                                   factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                   original_max_position_embeddings=8192),
    "qwen2-vl-yarn-mscale": MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24), mscale=1.0,
                                        mscale_all_dim=0.5, **_YARN4),
    "qwen3-vl-yarn": MRopeParams(head_dim=128, rope_theta=5e5, mrope_section=(24, 20, 20), layout="interleaved",
                                 rope_type="yarn", factor=3.0, original_max_position_embeddings=256000),
    "qwen3-vl-yarn-attention-factor": MRopeParams(head_dim=128, rope_theta=5e5, mrope_section=(24, 20, 20),
                                                  layout="interleaved", attention_factor=0.75, **_YARN4),
    "qwen3-vl-dynamic": MRopeParams(head_dim=128, rope_theta=5e5, mrope_section=(24, 20, 20), layout="interleaved",
                                    rope_type="dynamic", factor=2.0, max_position_embeddings=32768),
    "qwen3-vl-longrope": MRopeParams(head_dim=16, rope_theta=1e4, mrope_section=(4, 2, 2), layout="interleaved",
                                     rope_type="longrope", factor=4.0, original_max_position_embeddings=4096,
                                     short_factor=(1.0, 1.0, 1.5, 2.0, 2.0, 3.0, 4.0, 4.0),
                                     long_factor=(1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 8.0, 16.0)),
    "qwen3.5-partial": MRopeParams(head_dim=256, rotary_dim=64, mrope_section=(11, 11, 10), layout="interleaved"),
    "qwen3.5-partial-yarn": MRopeParams(head_dim=256, rotary_dim=64, mrope_section=(11, 11, 10),
                                        layout="interleaved", **_YARN4),
}
_PID = np.array([[[0, 4, 7, 131071, 3, 70054]], [[0, 1, 13, 0, 4096, 70002]], [[0, 2, 5, 9, 70000, 70003]]], np.int64)
_PID_SHORT = np.array([[[0, 4, 7, 3000, 3]], [[0, 1, 13, 0, 4000]], [[0, 2, 5, 9, 100]]], np.int64)


def _hf_scaled(p: MRopeParams):
    """The transformers 5.24 text rotary module and apply function a checkpoint with these
    ``rope_parameters`` gets (built here from the config, independently of the adapter)."""
    rp = {"rope_type": p.rope_type, "rope_theta": p.rope_theta, "mrope_section": list(p.mrope_section)}
    for n in ("factor", "original_max_position_embeddings", "attention_factor", "mscale", "mscale_all_dim",
              "low_freq_factor", "high_freq_factor", "short_factor", "long_factor"):
        v = getattr(p, n)
        if v is not None:
            rp[n] = list(v) if isinstance(v, tuple) else v
    if p.rdim != p.head_dim:
        rp["partial_rotary_factor"] = p.rdim / p.head_dim
    extra = {"max_position_embeddings": p.max_position_embeddings} if p.max_position_embeddings else {}
    common = dict(hidden_size=p.head_dim, num_attention_heads=1, num_key_value_heads=1, num_hidden_layers=1,
                  intermediate_size=1, vocab_size=1, pad_token_id=None, **extra)
    if p.layout == "contiguous":
        cfg = Qwen2VLTextConfig(bos_token_id=None, eos_token_id=None, rope_parameters=rp, **common)
        return hf_qwen2_vl.Qwen2VLRotaryEmbedding(cfg), hf_qwen2_vl.apply_rotary_pos_emb
    rp["mrope_interleaved"] = True
    if p.rdim != p.head_dim:
        cfg = Qwen3_5TextConfig(head_dim=p.head_dim, layer_types=["full_attention"], rope_parameters=rp, **common)
        return hf_qwen3_5.Qwen3_5TextRotaryEmbedding(cfg), hf_qwen3_5.apply_rotary_pos_emb
    cfg = Qwen3VLTextConfig(head_dim=p.head_dim, rope_parameters=rp, **common)
    return hf_qwen3_vl.Qwen3VLTextRotaryEmbedding(cfg), hf_qwen3_vl.apply_rotary_pos_emb


@pytest.mark.parametrize("pid", [_PID, _PID_SHORT], ids=["long", "short"])
@pytest.mark.parametrize("name", list(SCALED))
def test_scaled_reference_matches_transformers(name, pid):
    """MROPE-ROPE-TYPE / -ATTENTION-SCALING / -PARTIAL: HF 5.24's module (float32 angles, times its
    attention_scaling) within the suite's float32 bound of the reference; the module's own
    attention_scaling equals the reference's factor, and it builds rotary_dim/2 frequencies."""
    p = SCALED[name]
    rotary, _ = _hf_scaled(p)
    a = mrope.attention_factor(p, mrope.seq_len_of(pid))
    assert rotary.attention_scaling == pytest.approx(a, rel=1e-12) and rotary.inv_freq.shape[-1] == p.rdim // 2
    cos, sin = rotary(torch.empty(0, dtype=torch.float32), torch.from_numpy(pid))
    h = p.rdim // 2
    assert cos.shape[-1] == p.rdim and torch.equal(cos[..., :h], cos[..., h:])
    sc = registry.reference_of("mrope.cos_sin").scales(p, {"position_ids": pid})["cos"]
    rc, rs = mrope.cos_sin(pid, p)
    for got, ref in ((cos[..., :h], rc), (sin[..., :h], rs)):
        err = np.abs(got.double().numpy() - ref)
        assert (err <= bound("float32", *sc, True)).all(), float(err.max())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", ["qwen2-vl-yarn", "qwen3-vl-yarn-attention-factor", "qwen3.5-partial",
                                  "qwen3.5-partial-yarn", "qwen3-vl-dynamic"])
def test_scaled_apply_matches_transformers(name, dtype):
    """The model's own apply_rotary_pos_emb with its module's cos/sin, q and k in float64 and
    float32, against the reference (the Qwen3.5 tail passes through bit-exactly)."""
    p = SCALED[name]
    rotary, apply_fn = _hf_scaled(p)
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(1, 4, 6, p.head_dim)), rng.normal(size=(1, 1, 6, p.head_dim))
    tq, tk = torch.from_numpy(q).to(dtype), torch.from_numpy(k).to(dtype)
    cos, sin = rotary(tq, torch.from_numpy(_PID))
    yq, yk = apply_fn(tq, tk, cos, sin)
    rq, rk = mrope.apply(tq.double().numpy(), tk.double().numpy(), _PID, p)
    x = {"q": tq.double().numpy(), "k": tk.double().numpy(), "position_ids": _PID}
    sc = registry.reference_of("mrope.apply").scales(p, x)
    for n, got, ref in (("q", yq, rq), ("k", yk, rk)):
        err = np.abs(got.double().numpy() - ref)
        assert (err <= bound("float32", *sc[n], True)).all(), (n, float(err.max()))
        np.testing.assert_array_equal(got[..., p.rdim:].double().numpy(), x[n][..., p.rdim:])


def test_dropped_attention_scaling_fails_the_suite(run_suite, monkeypatch):
    """Qwen2-VL's module with its attention_scaling reset to 1 after init: the yarn cases fail and
    the diagnosis names DIV-MROPE-ATTENTION-SCALING-DROPPED."""
    assert run_suite("hf-transformers", "-k", "mrope-qwen2-vl-yarn").ret == 0
    init = hf_qwen2_vl.Qwen2VLRotaryEmbedding.__init__

    def no_scaling(self, config):
        init(self, config)
        self.attention_scaling = 1.0
    monkeypatch.setattr(hf_qwen2_vl.Qwen2VLRotaryEmbedding, "__init__", no_scaling)
    r = run_suite("hf-transformers", "-k", "mrope-qwen2-vl-yarn")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-MROPE-ATTENTION-SCALING-DROPPED (violates" in out, out[-2000:]


def test_default_rope_init_fails_the_suite(run_suite, monkeypatch):
    """Qwen3-VL's module forced onto its default rope init whatever the rope_type: the yarn cases
    fail and the diagnosis names DIV-MROPE-ROPE-TYPE-IGNORED."""
    assert run_suite("hf-transformers", "-k", "mrope-qwen3-vl-yarn-vision").ret == 0
    init = hf_qwen3_vl.Qwen3VLTextRotaryEmbedding.__init__

    def default_init(self, config):
        init(self, config)
        w, self.attention_scaling = self.compute_default_rope_parameters(config)
        self.inv_freq = w
    monkeypatch.setattr(hf_qwen3_vl.Qwen3VLTextRotaryEmbedding, "__init__", default_init)
    r = run_suite("hf-transformers", "-k", "mrope-qwen3-vl-yarn-vision")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-MROPE-ROPE-TYPE-IGNORED (violates" in out, out[-2000:]


# ---- config.json import (spec.hf_config.mrope_params_from_hf_config) -------------------------------

from posenc.spec.errors import SpecError  # noqa: E402
from posenc.hf import mrope_params_from_hf_config, params_from_hf_config  # noqa: E402
from posenc import registry


def test_import_qwen2_vl_4x_layout():
    """Qwen2-VL-7B's 4.x config: top-level rope_theta, rope_scaling {type: mrope, mrope_section}."""
    cfg = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
           "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    assert params_from_hf_config(cfg) == {"mrope": MRopeParams(head_dim=128, rope_theta=1e6, mrope_section=(16, 24, 24))}


def test_import_qwen3_vl_yarn_5x_layout_matches_transformers():
    """A 5.x Qwen3-VL text_config with yarn (vLLM PR 25384's block): the imported parameters give
    the frequencies and attention scaling transformers' own module builds from the same config."""
    rp = {"rope_type": "yarn", "mrope_section": [24, 20, 20], "mrope_interleaved": True, "factor": 3.0,
          "original_max_position_embeddings": 256000, "rope_theta": 5000000.0}
    cfg = {"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
                                                     "num_attention_heads": 32, "max_position_embeddings": 1000000,
                                                     "rope_parameters": rp}}
    p = mrope_params_from_hf_config(cfg)
    assert (p.layout, p.rope_type, p.factor, p.rope_theta, p.mrope_section) == ("interleaved", "yarn", 3.0, 5e6, (24, 20, 20))
    hf = hf_qwen3_vl.Qwen3VLTextRotaryEmbedding(Qwen3VLTextConfig(
        head_dim=128, hidden_size=4096, num_attention_heads=32, num_key_value_heads=1, num_hidden_layers=1,
        intermediate_size=1, vocab_size=1, pad_token_id=None, max_position_embeddings=1000000, rope_parameters=dict(rp)))
    np.testing.assert_allclose(hf.inv_freq.double().numpy(), mrope.inv_freq(p), rtol=1e-6)
    assert hf.attention_scaling == pytest.approx(mrope.attention_factor(p), rel=1e-12)


def test_import_errors_name_the_field():
    base = {"model_type": "qwen2_5_vl", "hidden_size": 2048, "num_attention_heads": 16}
    assert mrope_params_from_hf_config(base).mrope_section == (16, 24, 24)  # the module's default, 64 = 128 / 2
    with pytest.raises(SpecError, match=r"rope_scaling\.partial_rotary_factor"):
        mrope_params_from_hf_config({**base, "rope_scaling": {"type": "mrope", "partial_rotary_factor": 0.5}})
    with pytest.raises(SpecError, match=r"rope_parameters: unknown key\(s\) foo"):
        mrope_params_from_hf_config({**base, "rope_parameters": {"rope_type": "default", "foo": 1}})
    with pytest.raises(SpecError, match="must sum to head_dim/2 = 64"):
        mrope_params_from_hf_config({**base, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]}})
    with pytest.raises(SpecError, match="not an M-RoPE rope_type"):
        mrope_params_from_hf_config({**base, "rope_parameters": {"rope_type": "proportional"}})


def test_ernie_hw_alternating_figure_is_hand_derived():
    """MROPE-HW-ALTERNATING: head_dim 16, section (t, h, w) = (2, 3, 3), (t, h, w) = (4, 1, 2): h, w in
    turn over the first 6 frequencies, then t: [1, 2, 1, 2, 1, 2, 4, 4]."""
    p = MRopeParams(head_dim=16, rope_theta=10000.0, mrope_section=(2, 3, 3), layout="hw_alternating")
    assert mrope.multipliers(4, 1, 2, p) == [1, 2, 1, 2, 1, 2, 4, 4]
    with pytest.raises(ValueError, match="equal height and width"):
        MRopeParams(head_dim=16, mrope_section=(1, 4, 3), layout="hw_alternating")


def test_interleaved_pairing_rotates_adjacent_dims():
    """MROPE-PAIR-INTERLEAVED: the Qwen2-VL figure's angles on the pairs (2k, 2k + 1), computed by hand."""
    import math
    p = MRopeParams(head_dim=16, rope_theta=10000.0, mrope_section=(2, 3, 3), pairing="interleaved")
    x = np.arange(16, dtype=np.float64)
    want = x.copy()
    for k, m in enumerate([4, 4, 1, 1, 1, 2, 2, 2]):
        a = m * 10000.0 ** (-2 * k / 16)
        want[2 * k] = x[2 * k] * math.cos(a) - x[2 * k + 1] * math.sin(a)
        want[2 * k + 1] = x[2 * k + 1] * math.cos(a) + x[2 * k] * math.sin(a)
    got = mrope.apply(x[None, None, None], x[None, None, None], np.array([[[4]], [[1]], [[2]]]), p)[0]
    np.testing.assert_allclose(got[0, 0, 0], want, rtol=1e-13, atol=1e-13)
