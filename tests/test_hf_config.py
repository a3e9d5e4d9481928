"""HF config.json import (posenc.hf) against transformers' own config classes."""

from __future__ import annotations

import json

import pytest
from transformers import AutoConfig

from posenc.spec.errors import SpecError
from posenc.hf import MODEL_RULES, rope_params_from_hf_config as imp

# Minimal config.json dicts with the published values of each model (provenance: the models'
# own config.json as cited in encodings-facts; only the RoPE-relevant keys are kept).
CONFIGS = {
    "llama-3.1-8b (4.x rope_scaling)": {
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
    "qwen2.5-7b yarn (legacy 'type')": {
        "model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "gpt-neox-20b (rotary_pct, rotary_emb_base)": {
        "model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64, "rotary_pct": 0.25,
        "rotary_emb_base": 10000, "max_position_embeddings": 2048},
    "gpt-oss (5.x rope_parameters)": {
        "model_type": "gpt_oss", "hidden_size": 2880, "head_dim": 64, "num_attention_heads": 64,
        "max_position_embeddings": 131072,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                            "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                            "truncate": False}},
    "phi-3 'su' with a top-level original_max_position_embeddings": {
        "model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "rope_theta": 10000.0,
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}},
    "mistral default theta": {"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                              "max_position_embeddings": 32768},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_import_matches_transformers_config_classes(name):
    d = CONFIGS[name]
    p = imp(d)
    hf_d = json.loads(json.dumps(d))
    if hf_d.get("rope_scaling", {}).get("type") == "su":
        # transformers 5.24 maps 'su' to 'longrope' only after standardize_rope_params, so it
        # rejects this legacy Phi-3 config (original_max_position_embeddings "missing"); the
        # importer applies the alias first. Compare with the spelling 5.24 accepts.
        hf_d["rope_scaling"]["type"] = "longrope"
    hf = AutoConfig.for_model(**hf_d)
    rp = hf.rope_parameters
    assert p.rope_type == rp["rope_type"]
    assert p.rope_theta == pytest.approx(rp["rope_theta"])
    assert p.rdim == int(p.head_dim * rp.get("partial_rotary_factor", 1.0))
    for key in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings",
                "beta_fast", "beta_slow", "truncate"):
        if key in rp and rp[key] is not None and getattr(p, key) is not None:
            assert getattr(p, key) == rp[key], key
    if p.short_factor is not None:
        assert list(p.short_factor) == rp["short_factor"] and list(p.long_factor) == rp["long_factor"]


def test_published_values_come_through():
    p = imp(CONFIGS["gpt-neox-20b (rotary_pct, rotary_emb_base)"])
    # the config's fraction is kept, and sized by the spec's rule (ROPE-ROTARY-FRACTION): int(96 * 0.25) = 24
    assert (p.head_dim, p.rotary_dim, p.partial_rotary_factor, p.rdim, p.rope_theta, p.pairing) == \
        (96, None, 0.25, 24, 10000.0, "half")
    g = imp({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64})
    assert (g.head_dim, g.rotary_dim, g.rope_theta, g.pairing) == (256, 64, 10000.0, "interleaved")
    phi = imp(CONFIGS["phi-3 'su' with a top-level original_max_position_embeddings"])
    assert phi.rope_type == "longrope" and phi.original_max_position_embeddings == 4096
    assert imp(CONFIGS["mistral default theta"]).rope_theta == 10000.0
    assert "library default" in MODEL_RULES["mistral"].theta_provenance


@pytest.mark.parametrize("config,message", [
    ({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12}, "model_type: 'bert' has no RoPE parameters in transformers 5.24.0"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1, "rope_scaling": {"rope_type": "yarnn"}},
     "rope_scaling.rope_type: unknown rope_type 'yarnn'"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
      "rope_scaling": {"rope_type": "linear", "factor": 2.0, "scale": 3}}, "unknown key(s) scale"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 1, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
     "gptj has no RoPE scaling"),
    ({"model_type": "my_model", "num_attention_heads": 1, "rope_theta": 1e4},
     "hidden_size: missing, the hidden size of model_type 'my_model', and no default"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 1,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "rope_scaling.low_freq_factor: required for rope_type 'llama3'"),
])
def test_bad_configs_name_the_field(config, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        imp(config)


def test_missing_theta_without_a_default_is_an_error():
    """A model type transformers does not know has no class default: never a silent 10000."""
    with pytest.raises(SpecError, match="rope_theta: missing, and model_type 'my_model' defines no default"):
        imp({"model_type": "my_model", "hidden_size": 64, "num_attention_heads": 1,
             "rope_scaling": {"rope_type": "linear", "factor": 2.0}})


def test_omitted_keys_of_a_hand_ruled_model_take_the_class_defaults():
    """llava-1.5's published text_config omits hidden_size (LlamaConfig's 4096 / 32 heads), and a
    dynamic Llama without max_position_embeddings takes the class's 2048; a head_dim the class
    derives from hidden_size is not a default when the config sets hidden_size."""
    assert imp({"model_type": "llama", "rope_theta": 1e4}).head_dim == 128
    assert imp({"model_type": "llama", "rope_scaling": {"type": "dynamic", "factor": 2.0}}).max_position_embeddings == 2048
    assert imp({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}).head_dim == 64


def test_import_from_a_file(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(CONFIGS["llama-3.1-8b (4.x rope_scaling)"]))
    assert imp(f).rope_type == "llama3"
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SpecError, match="bad.json: cannot read a JSON config"):
        imp(tmp_path / "bad.json")


def test_cli_prints_the_params(tmp_path, capsys):
    from posenc import cli
    f = tmp_path / "config.json"
    f.write_text(json.dumps(CONFIGS["gpt-neox-20b (rotary_pct, rotary_emb_base)"]))
    assert cli.main(["config", "import", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sets"] == {"all_layers": {"head_dim": 96, "partial_rotary_factor": 0.25, "rope_theta": 10000.0,
                                          "pairing": "half", "rope_type": "default"}}
    assert out["rotary_width"] == {"all_layers": 24}  # the width the fraction gives, said beside it
    assert out["model_type"] == "gpt_neox" and "configuration_gpt_neox.py" in out["rule"]
    assert "hand rule" in out["provenance"]["pairing"]
    (tmp_path / "unknown.json").write_text(json.dumps({"model_type": "not_a_model"}))
    assert cli.main(["config", "import", str(tmp_path / "unknown.json")]) == 2


def test_nanochat_imports_the_rotation_by_minus_phi(tmp_path, capsys):
    """NanoChat's apply turns pairs by -phi (its rotate_half is cat(x2, -x1)): the survey probes the
    rotation with the pairing and the import says where it came from (ROPE-ROTATION-NEGATIVE); a
    published d20-shaped config (1280 / 10 heads) gives NanoChat's registry heads."""
    from posenc import cli
    from posenc.spec.registry import model_params
    d = {"model_type": "nanochat", "hidden_size": 1280, "num_attention_heads": 10, "num_key_value_heads": 10,
         "max_position_embeddings": 2048, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    p = imp(d)
    assert p == model_params("nanochat-d20")
    assert (p.rotation, p.pairing, p.head_dim) == ("negative", "half", 128)
    (tmp_path / "config.json").write_text(json.dumps(d))
    assert cli.main(["config", "import", str(tmp_path / "config.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sets"]["all_layers"]["rotation"] == "negative"
    assert "ROPE-ROTATION-NEGATIVE" in out["provenance"]["rotation"]
    # every other model type keeps the standard direction (it is not written out)
    assert imp({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2}).rotation == "positive"


@pytest.mark.parametrize("flag, pairing", [(None, "deinterleave"), (True, "deinterleave"), (False, "half")])
def test_deepseek_v3_rope_interleave_decides_the_pairing(flag, pairing):
    """DeepseekV3Config.rope_interleave (default true) selects apply_rotary_pos_emb_interleave
    (ROPE-PAIR-DEINTERLEAVE), false the Llama rotation: read from transformers' own config class."""
    d = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
         "max_position_embeddings": 163840,
         "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                          "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}
    if flag is not None:
        d["rope_interleave"] = flag
    assert AutoConfig.for_model(**json.loads(json.dumps(d))).rope_interleave is (True if flag is None else flag)
    p = imp(d)
    assert (p.pairing, p.head_dim, p.rope_type, p.factor) == (pairing, 64, "yarn", 40.0)
    with pytest.raises(SpecError, match="rope_interleave"):
        imp({**d, "rope_interleave": "yes"})


# ---- the other families ---------------------------------------------------------------------------
from posenc.hf import FAMILY_RULES, params_from_hf_config  # noqa: E402
from posenc.spec.registry import model_params  # noqa: E402

# Published config.json values (the registry entries' sources) -> the registry entry itself.
PUBLISHED = [
    ({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768}, "embeddings", "gpt2"),
    ({"model_type": "bert", "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2,
      "hidden_size": 768, "layer_norm_eps": 1e-12}, "embeddings", "bert-base"),
    ({"model_type": "roberta", "vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1,
      "hidden_size": 768, "layer_norm_eps": 1e-5, "pad_token_id": 1}, "embeddings", "roberta-base"),
    ({"model_type": "opt", "max_position_embeddings": 2048, "hidden_size": 768, "word_embed_proj_dim": 768},
     "embeddings", "opt-125m"),
    ({"model_type": "bart", "max_position_embeddings": 1024, "d_model": 768}, "embeddings", "bart-base"),
    ({"model_type": "bloom", "n_head": 112, "hidden_size": 14336}, "alibi", "bloom-176b"),
    ({"model_type": "mpt", "n_heads": 32, "d_model": 4096, "attn_config": {"alibi": True, "alibi_bias_max": 8}},
     "alibi", "mpt-7b"),
    ({"model_type": "t5", "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128},
     "encoder", "t5-base"),
    ({"model_type": "whisper", "d_model": 384, "max_source_positions": 1500}, "encoder_positions", "whisper-tiny"),
    ({"model_type": "m2m_100", "d_model": 1024, "pad_token_id": 1}, "positions", "m2m100-418m"),
]


@pytest.mark.parametrize("config, part, entry", PUBLISHED, ids=[e for *_, e in PUBLISHED])
def test_published_configs_give_the_registry_entries(config, part, entry):
    assert params_from_hf_config(config)[part] == model_params(entry)


def test_t5_gives_encoder_and_decoder_buckets():
    out = params_from_hf_config({"model_type": "t5"})
    assert (out["encoder"].bidirectional, out["decoder"].bidirectional) == (True, False)


@pytest.mark.parametrize("model_type", sorted(FAMILY_RULES))
def test_missing_keys_take_the_transformers_config_class_defaults(model_type):
    """The defaults of the rule table are read from transformers' own config classes."""
    hf = AutoConfig.for_model(model_type).to_dict()
    for rule in FAMILY_RULES[model_type].values():
        for name, fr in rule.fields.items():
            key = fr.keys[0]
            value = hf
            for part in key.split("."):
                value = value[part]
            assert fr.default == value, (model_type, name, key)


def test_rope_models_and_errors_through_the_general_entry_point():
    assert set(params_from_hf_config(CONFIGS["mistral default theta"])) == {"rope"}
    with pytest.raises(SpecError, match="model_type: 'nope' is not a transformers 5.24.0 model type"):
        params_from_hf_config({"model_type": "nope"})
    with pytest.raises(SpecError, match=r"bloom, alibi\): num_heads"):
        params_from_hf_config({"model_type": "bloom", "n_head": 0})


def test_cli_prints_named_param_sets(tmp_path, capsys):
    from posenc.cli import main
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "t5"}))
    assert main(["config", "import", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decoder"] == {"params_model": "T5Params", "num_buckets": 32, "max_distance": 128, "bidirectional": False}


# ---- a corpus read by transformers 5.24 itself: what it refuses, the importer refuses ---------

_BASE = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096}
REFUSED = {  # config -> the field the importer's error names
    "yarn without factor": ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope_parameters.factor"),
    "linear without factor": ({"rope_scaling": {"rope_type": "linear"}}, "rope_scaling.factor"),
    "llama3 without low_freq_factor": ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                         "high_freq_factor": 4.0}}, "rope_scaling.low_freq_factor"),
    "rope_theta a numeric string": ({"rope_theta": "1e6"}, "rope_theta: expected a finite number"),
    "rope_theta not a number": ({"rope_theta": "abc"}, "rope_theta: expected a finite number"),
    "factor a string": ({"rope_parameters": {"rope_type": "linear", "factor": "2"}}, "rope_parameters.factor"),
    "rope_theta a string inside rope_parameters": ({"rope_parameters": {"rope_type": "default", "rope_theta": "1e6"}},
                                                   "rope_parameters.rope_theta"),
}


def _transformers_rotary(d: dict):
    """transformers 5.24: the config class, then the Llama rotary module (inv_freq, attention scaling)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    hf_d = json.loads(json.dumps(d))
    cfg = AutoConfig.for_model(hf_d.pop("model_type"), **hf_d)
    rot = LlamaRotaryEmbedding(cfg)
    return rot.inv_freq.double().numpy(), float(rot.attention_scaling)


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_transformers_refuses_the_importer_refuses(name):
    extra, field = REFUSED[name]
    d = {**_BASE, **extra}
    with pytest.raises((KeyError, TypeError, ValueError)):
        _transformers_rotary(d)  # at config load or at rotary construction
    with pytest.raises(SpecError) as e:
        imp(d)
    assert field in str(e.value), str(e.value)


@pytest.mark.parametrize("extra", [
    # both dicts: transformers 5.24 takes a non-empty rope_scaling and drops rope_parameters whole
    {"rope_scaling": {"rope_type": "linear", "factor": 2.0},
     "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5}},
    {"rope_scaling": {"type": "linear", "factor": 2.0}, "rope_theta": 1e6,
     "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
    {"rope_scaling": {}, "rope_parameters": {"rope_type": "linear", "factor": 3.0, "rope_theta": 2e5}},
    {"rope_theta": 5e5, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    {"rope_theta": 5e5},
], ids=["both-scaling-wins", "both-legacy-type", "empty-scaling", "dict-theta-wins", "top-level-theta"])
def test_the_importer_reads_what_transformers_reads(extra):
    """The frequencies transformers' rotary module builds from the config are the importer's."""
    import numpy as np

    from posenc.reference import rope
    d = {**_BASE, **extra}
    inv_hf, af_hf = _transformers_rotary(d)
    p = imp(d)
    inv, af = rope.inv_freq(p, p.rdim)
    np.testing.assert_allclose(inv, inv_hf, rtol=1e-6)
    assert af == pytest.approx(af_hf)


def test_gpt_neox_ignores_a_top_level_partial_rotary_factor():
    """GPTNeoXConfig.convert_rope_params_to_dict fills rope_parameters' partial_rotary_factor from rotary_pct
    (default 0.25); a top-level partial_rotary_factor never reaches GPTNeoXAttention.rotary_ndims."""
    from transformers import GPTNeoXConfig
    for extra, want in (({"partial_rotary_factor": 0.5}, 0.25), ({"rotary_pct": 0.5, "partial_rotary_factor": 0.75}, 0.5)):
        cfg = {"hidden_size": 512, "num_attention_heads": 8, **extra}
        assert GPTNeoXConfig(**cfg).rope_parameters["partial_rotary_factor"] == want  # transformers' own reading
        p = imp({"model_type": "gpt_neox", **cfg})
        assert (p.partial_rotary_factor, p.rdim) == (want, int(64 * want)), extra
