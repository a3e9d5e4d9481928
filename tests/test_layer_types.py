"""Per-layer-type RoPE (LAYERS-*): the reference against the hand-derived figure (not computed by
the reference), the parameter sets each layer gets, the mutants, the real Gemma 3 and Cohere 2
modules of transformers through the suite, and the divergence named when their layer mapping or
sets are broken."""

from __future__ import annotations

import math

import numpy as np
import pytest
from transformers.models.cohere2 import modeling_cohere2 as hf_cohere2
from transformers.models.gemma3 import modeling_gemma3 as hf_gemma3

from posenc.reference import layer_types
from posenc.spec.models import LayerRopeParams

S, F = "sliding_attention", "full_attention"
FIG = LayerRopeParams(head_dim=4, layer_types=(S, F), full_factor=8.0, sliding_rope_theta=100.0)
X = np.asarray([1.0, 0.0, 0.0, 1.0]).reshape(1, 1, 1, 4)
P8 = np.asarray([[8]])


@pytest.mark.parametrize("layer, angles", [(0, (8.0, 0.8)), (1, (1.0, 0.001))])
def test_the_figure(layer, angles):
    """head_dim 4, half pairing (0, 2), (1, 3); x = [1, 0, 0, 1] at position 8."""
    a, b = angles
    want = [math.cos(a), -math.sin(b), math.sin(a), math.cos(b)]
    q, k = layer_types.apply(X, X, P8, layer, FIG)
    np.testing.assert_allclose(q[0, 0, 0], want, rtol=1e-13, atol=1e-15)


def test_a_type_without_rope_returns_q_and_k_and_the_other_rotates():
    p = LayerRopeParams(head_dim=4, layer_types=(S, F), full_rope_theta=None, sliding_rope_theta=100.0)
    q, k = layer_types.apply(X, 2 * X, P8, 1, p)
    assert np.array_equal(q, X) and np.array_equal(k, 2 * X)
    assert not np.allclose(layer_types.apply(X, X, P8, 0, p)[0], X)


def test_the_sets_and_what_is_refused():
    p = LayerRopeParams(head_dim=8, layer_types=(S, S, F), full_factor=4.0)
    assert p.set_for(2).rope_type == "linear" and p.set_for(2).factor == 4.0 and p.set_for(2).rope_theta == 1e6
    assert p.set_for(0).rope_type == "default" and p.set_for(0).rope_theta == 1e4
    for bad in (3, -1, 1.0):
        with pytest.raises(ValueError, match="is not a layer of 3"):
            p.set_for(bad)
    with pytest.raises(ValueError, match="at least one layer type"):
        LayerRopeParams(head_dim=8, layer_types=(S,), full_rope_theta=None, sliding_rope_theta=None)
    with pytest.raises(ValueError, match="full_factor"):
        LayerRopeParams(head_dim=8, layer_types=(S,), full_rope_theta=None, full_factor=2.0)
    with pytest.raises(ValueError):
        LayerRopeParams(head_dim=8, layer_types=("chunked_attention",))


def test_mutants_are_the_wrong_behaviour():
    x = {"q": X, "k": X, "position_ids": P8, "layer_idx": 0}
    full = registry.run_mutant("layers_full_set_everywhere", "layers.apply", FIG, x)["q"]
    np.testing.assert_allclose(full, layer_types.apply(X, X, P8, 1, FIG)[0])
    assert registry.run_mutant("layers_sliding_set_everywhere", "layers.apply", FIG, {**x, "layer_idx": 1})["q"][0, 0, 0, 0] \
        == pytest.approx(math.cos(8.0))
    scaled = registry.run_mutant("layers_scaling_everywhere", "layers.apply", FIG, x)["q"]  # theta 100 at position 1
    np.testing.assert_allclose(scaled[0, 0, 0], [math.cos(1), -math.sin(0.1), math.sin(1), math.cos(0.1)], rtol=1e-13)
    shifted = registry.run_mutant("layers_pattern_shifted", "layers.apply", FIG, {**x, "layer_idx": 1})["q"]
    np.testing.assert_allclose(shifted, layer_types.apply(X, X, P8, 0, FIG)[0])
    nope = LayerRopeParams(head_dim=4, layer_types=(S, F), full_rope_theta=None, sliding_rope_theta=100.0)
    rotated = registry.run_mutant("layers_no_rope_rotated", "layers.apply", nope, {**x, "layer_idx": 1})["q"]
    np.testing.assert_allclose(rotated, layer_types.apply(X, X, P8, 0, nope)[0])
    assert registry.run_mutant("layers_no_rope_rotated", "layers.apply", FIG, x) is None


def test_transformers_gemma3_and_cohere2_pass(run_suite):
    r = run_suite("hf-transformers", "-k", "layers-gemma3 or layers-cohere2 or layers-figure")
    assert r.ret == 0, r.stdout.str()[-2000:]
    r.assert_outcomes(passed=11)  # 9 goldens and the identity check of Cohere 2's two layers without RoPE


def test_a_shifted_layer_pattern_is_named(fails_naming, monkeypatch):
    """Gemma3Attention reading layer_types one layer on: DIV-LAYERS-PATTERN-SHIFTED."""
    init = hf_gemma3.Gemma3Attention.__init__

    def shifted(self, config, layer_idx):
        init(self, config, layer_idx)
        self.layer_type = config.layer_types[(layer_idx + 1) % len(config.layer_types)]
    monkeypatch.setattr(hf_gemma3.Gemma3Attention, "__init__", shifted)
    fails_naming("hf-transformers", "layers-gemma3", "DIV-LAYERS-PATTERN-SHIFTED")


def test_one_shared_rotary_set_is_named(fails_naming, monkeypatch):
    """Gemma3RotaryEmbedding answering every layer type with the full-attention set:
    DIV-LAYERS-FULL-SET-EVERYWHERE."""
    forward = hf_gemma3.Gemma3RotaryEmbedding.forward
    monkeypatch.setattr(hf_gemma3.Gemma3RotaryEmbedding, "forward",
                        lambda self, x, position_ids, layer_type=None: forward(self, x, position_ids, "full_attention"))
    fails_naming("hf-transformers", "layers-gemma3", "DIV-LAYERS-FULL-SET-EVERYWHERE")


def test_a_rotated_nope_layer_is_named(fails_naming, monkeypatch):
    """Cohere2Attention giving every layer a sliding window (so every layer rotates):
    DIV-LAYERS-NO-ROPE-ROTATED."""
    init = hf_cohere2.Cohere2Attention.__init__

    def every(self, config, layer_idx=None):
        init(self, config, layer_idx)
        self.sliding_window = config.sliding_window
    monkeypatch.setattr(hf_cohere2.Cohere2Attention, "__init__", every)
    fails_naming("hf-transformers", "layers-cohere2", "DIV-LAYERS-NO-ROPE-ROTATED")


# ---- the config import: which layer types rotate (LAYERS-NO-ROPE), read from the attention ----

import torch  # noqa: E402
from transformers import Cohere2Config, Exaone4Config  # noqa: E402
from transformers.models.exaone4 import modeling_exaone4 as hf_exaone4  # noqa: E402

from posenc.spec.errors import SpecError  # noqa: E402
from posenc.hf import params_from_hf_config, rope_import, rope_params_from_hf_config  # noqa: E402
from posenc import registry

TYPES = [S, S, S, F]


def _rotating_layers(module, attention, config) -> list[int]:
    """The layers whose attention forward calls the module's apply_rotary_pos_emb (run for real)."""
    calls = []
    real = module.apply_rotary_pos_emb

    def record(q, k, cos, sin, *a, **kw):
        calls.append(True)
        return real(q, k, cos, sin, *a, **kw)
    out = []
    d = config.head_dim
    x = torch.randn(1, 3, config.hidden_size)
    cs = (torch.ones(1, 3, d), torch.zeros(1, 3, d))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "apply_rotary_pos_emb", record)
        for i in range(config.num_hidden_layers):
            calls.clear()
            attention(config, i).eval()(x, position_embeddings=cs, attention_mask=None)
            if calls:
                out.append(i)
    return out


@pytest.mark.parametrize("model_type, cls, module, attention, window", [
    ("cohere2", Cohere2Config, hf_cohere2, hf_cohere2.Cohere2Attention, 4096),
    ("exaone4", Exaone4Config, hf_exaone4, hf_exaone4.Exaone4Attention, 4096),
    ("exaone4", Exaone4Config, hf_exaone4, hf_exaone4.Exaone4Attention, None),
])
def test_the_import_says_which_layers_rotate_as_the_attention_does(model_type, cls, module, attention, window):
    """The import's None sets against the real attention forward of each layer."""
    kw = dict(hidden_size=16, num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_hidden_layers=4,
              layer_types=TYPES, sliding_window=window)
    rotating = _rotating_layers(module, attention, cls(**kw))
    imp = rope_import({"model_type": model_type, **kw})
    claimed = [i for i, lt in enumerate(TYPES) if imp.sets.get(lt, imp.sets.get("all_layers")) is not None]
    assert claimed == rotating, (imp.sets, rotating)
    assert rotating in ([0, 1, 2], [0, 1, 2, 3])


def test_a_config_switched_off_rope_imports_as_no_rope_and_mixed_layers_are_said():
    off = rope_import({"model_type": "zamba2"})
    assert off.sets == {"all_layers": None}
    assert "use_mem_rope False" in off.provenance["sets.all_layers"]
    assert "LAYERS-NO-ROPE" in off.provenance["sets.all_layers"]
    assert params_from_hf_config({"model_type": "zamba2", "use_mem_rope": False}) == {"rope": None}
    with pytest.raises(SpecError, match="use_mem_rope False.*no RoPE to read"):
        rope_params_from_hf_config({"model_type": "zamba2"})
    with pytest.raises(SpecError, match="rope_theta"):  # switched off, the sets are still validated
        rope_import({"model_type": "zamba2", "rope_parameters": {"rope_type": "default", "rope_theta": -1.0}})
    assert rope_import({"model_type": "zamba2", "use_mem_rope": True}).sets["all_layers"] is not None
    imp = rope_import({"model_type": "smollm3", "num_hidden_layers": 8})
    assert imp.nope.no_rope_layers == (1, 1, 1, 0, 1, 1, 1, 0) and "no RoPE on layers [3, 7] of 8" in imp.provenance["nope"]
    with pytest.raises(SpecError, match="force_rope"):
        rope_import({"model_type": "cohere2_moe", "prefix_dense_sliding_window_pattern": 1})


def test_cohere2_imports_as_layer_rope_params_and_agrees_with_its_modules():
    p = rope_import({"model_type": "cohere2", "layer_types": TYPES}).layer_rope()
    assert p.full_rope_theta is None and p.pairing == "interleaved" and p.set_for(3) is None


@pytest.mark.parametrize("chunk", [8192, None])
def test_llama4s_no_rope_layers_import_as_per_layer_flags(chunk):
    """Llama 4: Llama4TextAttention rotates only if use_rope = no_rope_layers[i], per layer (whatever
    the layer types: with attention_chunk_size null every layer is full_attention). The import's
    NoPE flags (NOPE-*) against each layer's real forward (apply_rotary_emb called or not)."""
    from transformers import Llama4TextConfig
    from transformers.models.llama4 import modeling_llama4 as hf_llama4
    kw = dict(hidden_size=16, num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_hidden_layers=6,
              no_rope_layers=[1, 0, 1, 1, 0, 1], intermediate_size=8, intermediate_size_mlp=8,
              attention_chunk_size=chunk)
    cfg = Llama4TextConfig(**kw)
    cfg._attn_implementation = "eager"
    calls, real = [], hf_llama4.apply_rotary_emb

    def record(*a, **k):
        calls.append(True)
        return real(*a, **k)
    rotating = []
    x = torch.randn(1, 3, 16)
    freqs = torch.polar(torch.ones(1, 3, 4), torch.zeros(1, 3, 4))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hf_llama4, "apply_rotary_emb", record)
        for i in range(6):
            calls.clear()
            hf_llama4.Llama4TextAttention(cfg, i).eval()(x, position_embeddings=freqs, attention_mask=None)
            if calls:
                rotating.append(i)
    assert rotating == [0, 2, 3, 5]
    for stated in ({}, {"layer_types": cfg.layer_types}):
        imp = rope_import({"model_type": "llama4_text", **kw, **stated})
        assert all(v is not None for v in imp.sets.values()), imp.sets  # no layer type is NoPE as a type
        claimed = [i for i, f in enumerate(imp.nope.no_rope_layers) if f]
        assert claimed == rotating, (imp.nope, cfg.layer_types)
        assert "no RoPE on layers [1, 4] of 6 (no_rope_layers)" in imp.provenance["nope"]
    # the check against the model's own attention can fail
    from posenc.hf import agreement as hf_agreement, tables as hf_tables
    wrong = imp.nope.model_copy(update={"no_rope_layers": (1, 1, 1, 1, 0, 1)})
    assert "NoPE flags differ from layer 1 on" in hf_agreement.compare_nope(
        hf_llama4, cfg, hf_tables.hf_model_types()["llama4_text"], wrong)[0]
