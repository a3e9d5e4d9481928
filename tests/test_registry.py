"""Named model entries (spec/registry/models.yaml) and their use by the golden cases."""

from __future__ import annotations


import pytest
import yaml

from posenc import families  # building the cases records which entries they use
from posenc.spec import registry
from posenc.spec.errors import SpecError
from posenc.hf import rope_params_from_hf_config


def test_registry_loads_with_provenance():
    entries = registry.load()
    assert len(entries) >= 15
    for e in entries.values():
        assert e.sources and all(s.provenance for s in e.sources)


def test_every_entry_is_used_by_golden_cases():
    families.all_cases()  # the family modules record, as they build their cases, which entries they use
    unused = sorted(set(registry.load()) - registry.USED)
    assert not unused, f"model entries no golden case uses: {unused}"


def test_cases_carry_the_entries_values():
    by_id = families.cases_by_id()
    assert by_id["rope-gptj-6b"].params == registry.model_params("gpt-j-6b")
    assert by_id["scale-llama3.1-8b"].params == registry.model_params("llama-3.1-8b")
    gpt2 = by_id["gpt2-small-prefill"].params
    assert (gpt2.n_positions, gpt2.n_embd) == (1024, 768) and gpt2.vocab_size == 97  # only the vocabulary shrinks


def test_entries_agree_with_the_hf_config_import():
    """Two independent routes to the same numbers: the registry and a published config.json."""
    llama31 = rope_params_from_hf_config({
        "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192}})
    assert llama31 == registry.model_params("llama-3.1-8b")
    neox = rope_params_from_hf_config({"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
                                       "rotary_pct": 0.25, "rotary_emb_base": 10000})
    # the import keeps the config's fraction (ROPE-ROTARY-FRACTION), the registry states its width: one set
    assert (neox.partial_rotary_factor, neox.rdim) == (0.25, 24)
    assert neox.with_width(rotary_dim=neox.rdim) == registry.model_params("gpt-neox-20b")
    gptj = rope_params_from_hf_config({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64})
    assert gptj == registry.model_params("gpt-j-6b")


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["models"][0].update(params_model="Nope"), "models.0.params_model: unknown 'Nope'"),
    (lambda d: d["models"][1]["values"].update(max_position_embeddings=-1), "models.1.values (bert-base)"),
    (lambda d: d["models"].append(dict(d["models"][0])), "'gpt2' listed twice"),
    (lambda d: d["models"][0].pop("sources"), "models.0.sources: Field required"),
])
def test_bad_registry_names_the_field(tmp_path, edit, message):
    data = yaml.safe_load(registry.REGISTRY_PATH.read_text())
    edit(data)
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        registry.load(path)


def test_unknown_entry_is_named():
    with pytest.raises(SpecError, match="unknown model entry 'gpt-5'"):
        registry.model_params("gpt-5")
