"""Every transformers 5.24 RoPE model type: the config import, computed by the reference, against
that model's own rotary module and apply function (posenc.hf.agreement), on its default
config and on a perturbed one; the model-type table and the coverage table fresh."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from posenc.hf import agreement as hf_agreement, axial_probes as hf_axial_probes, coverage as hf_coverage, defaults as hf_defaults, modeling as hf_modeling, survey as hf_survey
from posenc.hf import HF_EXCEPTIONS_PATH, HF_TABLE_PATH, MROPE_RULES, hf_model_types, params_from_hf_config, rope_import
from posenc.hf.tables import _nested
from posenc.spec.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXCEPTIONS = yaml.safe_load(HF_EXCEPTIONS_PATH.read_text())["exceptions"]
ROWS = hf_model_types()
ROPE_TYPES = sorted(mt for mt, row in ROWS.items() if "defaults" in row)


@pytest.fixture(scope="module")
def results():
    hf_modeling._quiet()
    return {mt: hf_agreement.agreement(mt) for mt in ROPE_TYPES}


def test_the_tables_are_what_the_pinned_transformers_gives(results):
    table = hf_survey.survey()
    assert hf_survey.table_text(table) == HF_TABLE_PATH.read_text(), "run `posenc config survey`"
    # the table is the committed one, so the fixture's agreement results are the coverage's
    assert hf_coverage.coverage_text(table, results) == (ROOT / "docs" / hf_survey.COVERAGE_NAME).read_text(), "run `posenc config survey`"


def test_every_rope_model_type_agrees_or_is_a_listed_exception(results):
    unexplained = {mt: r for mt, r in results.items()
                   if r[0] != "agrees" and mt not in EXCEPTIONS and "not_covered" not in ROWS[mt]}
    assert not unexplained, "\n".join(f"{mt}: {s}: {d}" for mt, (s, d) in unexplained.items())
    stale = sorted(mt for mt in EXCEPTIONS if mt not in results or results[mt][0] == "agrees")
    assert not stale, f"listed in {HF_EXCEPTIONS_PATH.name} but agree (or are no RoPE model type): {stale}"
    assert all(e["kind"] in ("not-covered", "transformers-defect") and e["what"] for e in EXCEPTIONS.values())
    counts = hf_coverage.counts(results)
    print(json.dumps(counts))
    agree, total = counts["agrees"], counts["rope_model_types"]
    kinds = [e["kind"] for e in EXCEPTIONS.values()]
    readme = README.read_text()
    for figure in (f"of the {total} RoPE model types,\n**{agree} ({100 * agree / total:.1f} %) import and agree**",
                   f"The other {total - agree} are listed exceptions",
                   f"{sum(bool(ROWS[m].get('axial')) and results[m][0] == 'agrees' for m in results)} of them "
                   f"axial (2-D) RoPE of vision encoders",
                   f"{sum('not_covered' in ROWS[m] and 'axial' not in ROWS[m]['not_covered'] for m in results)} without "
                   f"a usable rotary module", f"{kinds.count('not-covered')} encodings the spec does not cover",
                   f"{kinds.count('transformers-defect')} transformers defaults"):
        assert " ".join(figure.split()) in " ".join(readme.split()), f"README's config figures: {figure!r}"
    # the hand rules, the probed pairings and the head-width rules all reached
    agreeing = [mt for mt, (s, _) in results.items() if s == "agrees"]
    for mt in ("llama", "deepseek_v3", "gpt_neox", "phi3", "gemma3_text", "cohere", "glm", "llama4_text",
               "deepseek_v2", "jetmoe", "gemma4_text", "cohere2", "exaone4"):
        assert mt in agreeing, (mt, results.get(mt))
    # Zamba2: RoPE off by default (the import's no-RoPE, checked on its attention), and its head-width
    # rule with RoPE switched on
    assert results["zamba2"] == ("agrees", "no RoPE: self.config.use_mem_rope false (Zamba2Attention's output "
                                           "does not depend on the positions)")
    assert hf_agreement.agreement("zamba2", config={"use_mem_rope": True}) == (
        "agrees", "zamba2.modeling_zamba2.Zamba2RotaryEmbedding")
    pairings = {p.pairing for mt in agreeing if mt not in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
                and set(params_from_hf_config(hf_coverage.default_config(mt))) == {"rope"}
                for p in [rope_import(hf_coverage.default_config(mt)).sets.popitem()[1]] if p is not None}
    assert pairings == {"half", "interleaved", "deinterleave"}


def _perturbed(mt: str):
    """Constructor overrides that move every value the import reads: each parameter set's theta
    by its own factor, and the head width (head_dim, else the head count halved)."""
    row = ROWS[mt]
    if row.get("components"):  # each sub-model's own config (BLT)
        return {attr: _perturbed(sub_type) for attr, sub_type in row["components"].items()}
    d = hf_coverage.default_config(mt)
    rope = copy.deepcopy(d["rope_parameters"])
    sets = rope.values() if _nested(rope) else [rope]
    for i, s in enumerate(x for x in sets if x):
        s["rope_theta"] = float(s.get("rope_theta", 10000.0)) * (1.7 + 0.6 * i)
    over = {"rope_parameters": rope}
    if "mrope_section" in json.dumps(rope) or mt in MROPE_RULES:
        return over  # the sections must still sum to the head width: theta only
    # the head width as the model derives it (Pixtral's head_dim is hidden_size / heads: moving it
    # alone makes a model that cannot run, which the import refuses)
    declared = (row.get("axial") or {}).get("head_width", "head_dim") == "head_dim"
    width = ["head_dim"] if d.get("head_dim") and declared else ["hidden_size", "num_attention_heads"]
    if len(width) == 1 and isinstance(d.get(width[0]), int):
        factor = max([float(s.get("partial_rotary_factor", 1.0)) for s in sets if s] + [1.0])
        over[width[0]] = next(d[width[0]] + k for k in (32, 64, 128, 16) if int((d[width[0]] + k) * factor) % 2 == 0
                              and int((d[width[0]] + k) * min(float(s.get("partial_rotary_factor", 1.0))
                                                               for s in sets if s)) % 2 == 0)
    elif len(width) == 2 and isinstance(d.get(width[1]), int) and d[width[1]] % 2 == 0:
        over[width[1]] = d[width[1]] // 2
    if (row.get("axial") or {}).get("coordinates") == "centred":  # the grid too: image_size // patch_size
        over["image_size"], over["patch_size"] = d["image_size"] // 2 + 7, d["patch_size"] - 2
    return over


def test_perturbed_configs_agree_too(results):
    """A default config could agree by coincidence (theta 10000 hard-coded, a head width read from
    the wrong key with the same value): each agreeing top-level model type is rebuilt with every
    set's theta and its head width changed, and must still agree."""
    built, failures = 0, {}
    for mt, (status, _) in results.items():
        if status != "agrees" or ROWS[mt].get("where"):
            continue
        try:
            over = _perturbed(mt)
            status, detail = hf_agreement.agreement(mt, config=over)
        except Exception:  # noqa: BLE001 - a config class that refuses the perturbation: counted
            continue
        if status == "disagrees" and re.search(r": apply_\w+: \w+Error", detail):
            continue  # the model's own code refuses the perturbed config (its sections, its shapes)
        built += 1
        if status != "agrees":
            failures[mt] = f"{status}: {detail}"
    assert not failures, "\n".join(f"{k}: {v}" for k, v in failures.items())
    print(f"{built} perturbed configs agree")
    assert f"{built}\nconfigs" in README.read_text() or f"{built} configs" in " ".join(README.read_text().split())
    assert built >= 0.8 * sum(1 for mt, (s, _) in results.items() if s == "agrees" and not ROWS[mt].get("where"))


def test_a_nested_config_gives_a_set_per_layer_type():
    imp = rope_import({"model_type": "gemma3_text", "hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256,
                       "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                       "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                           "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                              "rope_theta": 1e6}}})
    assert imp.sets["sliding_attention"].rope_theta == 10000.0 and imp.sets["full_attention"].factor == 8.0
    assert imp.layers("sliding_attention") == [0, 2] and imp.layers("full_attention") == [1]
    assert imp.as_json()["layers"] == {"sliding_attention": [0, 2], "full_attention": [1]}


def test_omitted_keys_take_the_config_class_defaults_with_provenance():
    imp = rope_import({"model_type": "qwen3"})
    p = imp.sets["all_layers"]
    d = hf_coverage.default_config("qwen3")
    assert (p.head_dim, p.rope_theta) == (d["head_dim"], d["rope_parameters"]["rope_theta"])
    assert "Qwen3Config default" in imp.provenance["head_dim"] and "probed" in imp.provenance["pairing"]


def test_a_multimodal_config_reads_its_text_config():
    imp = rope_import({"model_type": "llava", "text_config": {"model_type": "llama", "hidden_size": 4096,
                                                             "num_attention_heads": 32, "rope_theta": 5e5}})
    assert imp.where == "text_config" and imp.model_type == "llama" and imp.sets["all_layers"].rope_theta == 5e5


@pytest.mark.parametrize("config, message", [
    ({"model_type": "efficientloftr"}, "efficientloftr.: pairing unknown .*EfficientLoFTRRotaryEmbedding.forward"),
    ({"model_type": "llama4_vision_model"}, "axial .*AXIAL-.*params_from_hf_config"),
    ({"model_type": "blt"}, "its RoPE lives in its sub-models .*component_imports"),
    ({"model_type": "cohere_compass"}, "KeyError: 'full_attention'"),  # the default's own rotary module fails
    ({"model_type": "llama", "hidden_size": 4100, "num_attention_heads": 32},
     "hidden_size 4100 is not divisible by 32 heads: LlamaConfig refuses such a config"),
    ({"model_type": "pixtral"}, "axial .*AXIAL-.*params_from_hf_config"),
    ({"model_type": "bert"}, "no RoPE parameters"),
    ({"model_type": "gemma3_text", "layer_types": "full_attention"}, "layer_types: expected a list"),
    ({"model_type": "gemma3_text", "rope_parameters": {"full_attention": 5, "sliding_attention": None}},
     "rope_parameters.full_attention: expected an object"),
    ({"model_type": "musicflamingo"}, "musicflamingo.: pairing unknown .*no apply_rotary_pos_emb"),
    ({"model_type": 7}, "model_type: expected a string"),
    ({"model_type": "my_new_model", "hidden_size": 64, "num_attention_heads": 2}, "carries no rope_parameters"),
])
def test_what_the_import_refuses_it_names(config, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)") if ".*" not in message
                       else message):
        rope_import(config)


def test_a_model_type_without_its_own_modeling_module_is_checked_against_the_one_it_runs():
    """EXAONE, InternLM 3, IQuest-Coder, Sarvam-MLA / -MoE have config classes only: transformers maps
    them to LlamaModel, DeepseekV3Model, Glm4MoeModel (MODEL_MAPPING_NAMES), whose rotary module and
    apply function the survey probes and the agreement compares with."""
    via = {"exaone": "llama", "internlm3": "llama", "iquestcoder": "llama", "sarvam_mla": "deepseek_v3",
           "sarvam_moe": "glm4_moe"}
    for mt, base in via.items():
        assert ROWS[mt]["modeling_via"].startswith(f"{mt} -> ") and ROWS[mt]["rotary_class"].startswith(f"{base}.")
        assert hf_agreement.agreement(mt) == ("agrees", ROWS[mt]["rotary_class"])
    assert ROWS["sarvam_mla"]["pairing_flag"]["true"] == "deinterleave"  # DeepSeek-V3's rope_interleave, read
    assert rope_import(hf_coverage.default_config("sarvam_mla")).sets["all_layers"].pairing == "deinterleave"
    assert "modeling_via" not in ROWS["llama"]


def test_a_head_width_that_is_not_an_exact_division_is_what_the_model_does():
    """hidden_size over num_attention_heads not exact: OLMo 2's attention floors it (the import
    floors, says so, and agrees with the module), Llama's config class refuses it (so does the import)."""
    assert ROWS["olmo2"]["head_width"]["rule"] == "floor" and ROWS["llama"]["head_width"]["rule"] == "refused"
    for hidden, heads in ((4100, 32), (3000, 23)):
        imp = rope_import({"model_type": "olmo2", "hidden_size": hidden, "num_attention_heads": heads})
        assert imp.sets["all_layers"].head_dim == hidden // heads
        assert f"{hidden} // {heads} = {hidden // heads}: not an exact division" in imp.provenance["head_dim"]
        assert hf_agreement.agreement("olmo2", config={"hidden_size": hidden, "num_attention_heads": heads})[0] == "agrees"
    # an exact division says nothing
    assert "head_dim" not in rope_import({"model_type": "olmo2", "hidden_size": 4096,
                                          "num_attention_heads": 32}).provenance


def test_a_config_switch_that_turns_rope_off_is_checked_on_the_attention():
    """Zamba2's use_mem_rope: off, the import says no RoPE and the attention's output must not move
    with the positions; the same check on an attention that does rotate (switched on) fails, naming it."""
    from transformers import Zamba2Config
    from transformers.models.zamba2 import modeling_zamba2
    row = ROWS["zamba2"]
    for flag, adapter, ok in ((False, False, True), (True, False, False), (False, True, True), (True, True, False)):
        cfg = Zamba2Config(use_mem_rope=flag, use_shared_attention_adapter=adapter)  # adapter: its layers' own args
        rotary = hf_modeling.rotary_modules(modeling_zamba2, cfg)[0][1]
        problems = hf_agreement.compare_rope_off(modeling_zamba2, cfg, row, rotary)
        assert (problems == []) is ok, problems
        if not ok:
            assert "Zamba2Attention's output changes with the positions" in problems[0]
    # the check needs the attention the survey found guarding apply_rotary_pos_emb
    bad = {**row, "rope_gate": {**row["rope_gate"], "attention_class": "NoSuchAttention"}}
    assert "no attention class to check it on" in hf_agreement.compare_rope_off(
        modeling_zamba2, Zamba2Config(), bad, None)[0]


def test_a_model_whose_rope_lives_in_its_sub_models_imports_each(tmp_path, capsys):
    """BLT: four sub-models, each reading its own sub-config (the patcher at theta 1e4, the others
    5e5; head widths 64 and 128); the wrapper's own rope_parameters reaches none of them."""
    from transformers import BltConfig
    from posenc.hf import component_imports
    from posenc.spec.models import RopeParams
    assert set(ROWS["blt"]["components"]) == {"patcher_config", "encoder_config", "decoder_config", "global_config"}
    config = {"model_type": "blt", "rope_parameters": {"rope_type": "default", "rope_theta": 1234.0},
              "global_config": {"hidden_size": 1024, "num_attention_heads": 4,
                                "rope_parameters": {"rope_type": "default", "rope_theta": 777.0}}}
    found = params_from_hf_config(config)
    assert {k: (p.rope_theta, p.head_dim) for k, p in found.items()} == {
        "patcher_config.rope": (10000.0, 64), "encoder_config.rope": (500000.0, 64),
        "decoder_config.rope": (500000.0, 64), "global_config.rope": (777.0, 256)}
    assert BltConfig(**{k: v for k, v in config.items() if k != "model_type"}).patcher_config.rope_parameters[
        "rope_theta"] == 10000.0  # what transformers does with the top-level set: nothing
    assert hf_agreement.agreement("blt", config={k: v for k, v in config.items() if k != "model_type"})[0] == "agrees"
    assert component_imports(config)["global_config"].sets["all_layers"].rope_theta == 777.0
    assert component_imports({"model_type": "llama"}) is None
    with pytest.raises(SpecError, match="its RoPE lives in its sub-models.*component_imports"):
        rope_import(config)
    with pytest.raises(SpecError, match=r"global_config\.rope_parameters.*rope_theta"):
        params_from_hf_config({"model_type": "blt", "global_config": {"rope_parameters": {"rope_theta": "x"}}})
    with pytest.raises(SpecError, match="encoder_config: expected an object"):
        params_from_hf_config({"model_type": "blt", "encoder_config": [1, 2]})
    # the dead top-level set is still validated, as BltConfig validates it
    for top, field in (({"rope_parameters": "garbage"}, "rope_parameters: expected an object"),
                       ({"rope_scaling": 7}, "rope_scaling: expected an object"),
                       ({"rope_parameters": {"rope_type": "linear"}}, "rope_parameters.factor: required")):
        with pytest.raises(SpecError, match=f"{field}.*the top level of BltConfig: read by none of its sub-models"):
            params_from_hf_config({"model_type": "blt", **top})
    # the check can fail: the global transformer's theta imported wrong is named
    cfg = BltConfig()
    wrong = {"rope": RopeParams(head_dim=128, rope_theta=10000.0, pairing="interleaved")}
    status, detail = hf_agreement._agreement_of("blt_global_transformer", ROWS["blt_global_transformer"],
                                             cfg.global_config, wrong)
    assert status == "disagrees" and "inv_freq" in detail
    # `posenc config import` prints each sub-model's sets and why the top level is not read
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    from posenc.cli import main
    assert main(["config", "import", str(path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["components"]) == set(ROWS["blt"]["components"]) and "reaches none of them" in printed["note"]


def test_a_vision_rotary_module_that_tabulates_its_own_grid_is_probed_with_its_position_rule(tmp_path, capsys):
    """Llama 4 vision: no inv_freq, a complex freqs_ci over its own patch grid. The survey finds
    AXIAL-INTERLEAVED, width first, at 1-based (row, column) with the class token last at angle 0;
    the import and the check follow, on other sizes too, and a wrong rule is caught and placed."""
    from transformers import Llama4VisionConfig
    from transformers.models.llama4 import modeling_llama4
    row = ROWS["llama4_vision_model"]
    assert row["axial"] == {"head_width": "hidden_size / num_attention_heads", "num_axes": 2, "frequencies": "shared",
                            "layout": "interleaved", "axis_order": [1, 0],
                            "grid": {"offset": 1, "class_token": "last"}}
    over = {"image_size": 112, "patch_size": 16, "hidden_size": 320, "num_attention_heads": 4,
            "rope_parameters": {"rope_type": "default", "rope_theta": 321.0}}
    p = params_from_hf_config({"model_type": "llama4_vision_model", **over})["axial"]
    assert (p.head_dim, p.rope_theta, p.layout, p.order) == (80, 321.0, "interleaved", (1, 0))
    assert hf_agreement.agreement("llama4_vision_model", config=over)[0] == "agrees"
    rotary = hf_axial_probes.grid_tables(modeling_llama4, Llama4VisionConfig(**over))[0][1]
    for grid, where in (({"offset": 0, "class_token": "last"}, "from table row 0 on, at (row, column) (0, 0)"),
                        ({"offset": 1, "class_token": "first"}, "from table row 0 on, at (row, column) (0, 0)")):
        problems = hf_agreement.compare_axial_grid(modeling_llama4, rotary, p, grid)
        assert problems and where in problems[0], problems
    assert "axis order [0, 1]) from table row 1 on, at (row, column) (1, 2)" in hf_agreement.compare_axial_grid(modeling_llama4, rotary, p.model_copy(update={"axis_order": None}),
                                                    row["axial"]["grid"])[0]
    with pytest.raises(SpecError, match="supports only 'default'"):
        params_from_hf_config({"model_type": "llama4_vision_model", "rope_parameters": {"rope_type": "axial"}})
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama4_vision_model"}))
    from posenc.cli import main
    assert main(["config", "import", str(path)]) == 0
    assert "(row, column) + 1, the class token last at (0, 0)" in json.loads(capsys.readouterr().out)["axial"]["positions"]


def test_a_vision_rotary_module_that_takes_pixel_values_is_probed_with_centred_coordinates(monkeypatch):
    """EoMT-DINOv3: its rotary module's forward takes pixel values and computes the patch centres of
    the image's grid itself. The survey finds AXIAL-SPLIT, height first, with centred coordinates
    (AXIAL-COORDINATES-CENTRED); the import gives grid_size image_size // patch_size; the check runs
    the module at the imported grid and at non-square ones, with the model's prefix tokens, on the
    default config and on others; a wrong import, or a module with another coordinate rule, fails."""
    import numpy as np
    import torch
    from transformers import EomtDinov3Config
    from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as m
    row = ROWS["eomt_dinov3"]
    assert row["axial"] == {"head_width": "hidden_size / num_attention_heads", "num_axes": 2, "frequencies": "shared",
                            "layout": "split", "axis_order": [0, 1], "coordinates": "centred"}
    assert (row["defaults"]["image_size"], row["defaults"]["patch_size"]) == (640, 16) and "eomt_dinov3" not in EXCEPTIONS
    assert hf_agreement.agreement("eomt_dinov3") == ("agrees", row["rotary_class"])
    over = {"hidden_size": 768, "num_attention_heads": 12, "image_size": 500, "patch_size": 14,
            "rope_parameters": {"rope_type": "default", "rope_theta": 321.0}}
    p = params_from_hf_config({"model_type": "eomt_dinov3", **over})["axial"]
    assert (p.head_dim, p.rope_theta, p.grid_size, p.coordinates, p.layout) == (64, 321.0, (35, 35), "centred", "split")
    assert hf_agreement.agreement("eomt_dinov3", config=over)[0] == "agrees"
    cfg = EomtDinov3Config(**over)
    rotary = hf_modeling.rotary_modules(m, cfg)[0][1]
    assert hf_axial_probes.takes_pixel_values(rotary)
    assert not hf_axial_probes.takes_pixel_values(hf_modeling.rotary_modules(
        __import__("transformers.models.llama.modeling_llama", fromlist=["x"]), __import__(
            "transformers").LlamaConfig())[0][1])
    assert hf_agreement.compare_axial_pixels(m, rotary, p, cfg) == []
    # the check can fail: another theta, the axes exchanged, another grid, index coordinates
    for wrong, said in (({"rope_theta": 320.0}, "inv_freq"), ({"axis_order": (1, 0)}, "at grid 3 x 5 from patch 0 on"),
                        ({"grid_size": (36, 36)}, "grid_size [36, 36] imported, image_size // patch_size is 35"),
                        ({"coordinates": "index", "grid_size": None}, "coordinates index")):
        problems = hf_agreement.compare_axial_pixels(m, rotary, p.model_copy(update=wrong), cfg)
        assert problems and said in "; ".join(problems), (wrong, problems)
    # the probe is the survey's: on the module it finds the table's row ...
    name = row["rotary_class"].rsplit(".", 1)[1]
    assert hf_axial_probes.axial_pixel_probe(m, cfg, name, rotary) == (row["axial"], row["axial_evidence"])

    # ... and nothing on a module whose patch coordinates are the corners, or whose apply rotates the prefix
    def corners(n_h, n_w, dtype, device):
        h, w = torch.arange(n_h, dtype=dtype) / n_h, torch.arange(n_w, dtype=dtype) / n_w
        return 2.0 * torch.stack(torch.meshgrid(h, w, indexing="ij"), dim=-1).flatten(0, 1) - 1.0
    with monkeypatch.context() as mp:
        mp.setattr(m, "get_patches_center_coordinates", corners)
        found, why = hf_axial_probes.axial_pixel_probe(m, cfg, name, rotary)
        assert found is None and "no axial layout and coordinate rule of the reference matches" in why
        assert "at grid 3 x 5 from patch 0 on" in "; ".join(hf_agreement.compare_axial_pixels(m, rotary, p, cfg))

    def rotate_all(q, k, cos, sin, **kw):
        cos, sin = (torch.cat([torch.ones_like(t[:2]), t]) for t in (cos, sin))
        return q * cos + m.rotate_half(q) * sin, k * cos + m.rotate_half(k) * sin
    rotate_all.__module__ = m.__name__  # the model's own function, as the probe requires
    with monkeypatch.context() as mp:
        mp.setattr(m, "apply_rotary_pos_emb", rotate_all)
        found, why = hf_axial_probes.axial_pixel_probe(m, cfg, name, rotary)
        assert found is None and "changes the 2 prefix tokens" in why
    assert np.isfinite(hf_axial_probes.pixel_grid_call(m, rotary, torch.zeros(2 + 6, 64), (2, 3), 14, 2)).all()
    assert rotary.training  # the calls ran it in eval mode and gave it back as it was


@pytest.mark.parametrize("mt", sorted(mt for mt, r in ROWS.items() if (r.get("head_dim_rule") or {}).get("source")
                                      and not r.get("where") and mt not in MROPE_RULES))
def test_a_head_width_the_class_takes_from_elsewhere_is_taken_from_there(mt):
    """The survey's head_dim_rule (MLA models: qk_rope_head_dim, a stated head_dim overwritten;
    Zamba2: 2 * hidden_size // heads): configs as a user writes them, moving the source and stating
    a misleading head_dim, import as transformers builds them (agreement compares the raw import
    with the round trip and with the model's own rotary module)."""
    rule, d = ROWS[mt]["head_dim_rule"], ROWS[mt]["defaults"]
    key = (ROWS[mt].get("aliases") or {}).get("head_dim", "head_dim")
    if rule["source"] == "qk_rope_head_dim":
        configs = [{"qk_rope_head_dim": rule["source_default"] + 16}, {"qk_rope_head_dim": 16, key: 200}]
    else:  # the hidden size moved, or (a class that ties it to other sizes) the head count
        configs = [{"hidden_size": d["hidden_size"] + 64 * d["num_attention_heads"]},
                   {"num_attention_heads": d["num_attention_heads"] // 2}]
    from transformers import CONFIG_MAPPING
    checked = 0
    for c in configs:
        try:
            CONFIG_MAPPING[mt](**c)
        except Exception:  # noqa: BLE001 - the class refuses this one: the next
            continue
        status, detail = hf_agreement.agreement(mt, config=c)
        assert status == "agrees", (c, detail)
        checked += 1
    assert checked


def test_the_check_compares_the_config_as_written_with_transformers_round_trip():
    """agreement(config=...) imports the overrides as a user writes them too: a misread the round
    trip hides (transformers' to_dict writes back the width it derived) is a disagreement."""
    import posenc.hf.tables as hc
    rows = copy.deepcopy(hf_model_types())
    del rows["zamba2"]["head_dim_rule"]  # the kit without the survey's rule: hidden // heads
    saved = hc._hf_table()["model_types"]
    try:
        hc._hf_table()["model_types"] = rows
        status, detail = hf_agreement.agreement("zamba2", rows, config={"use_mem_rope": True, "hidden_size": 1024,
                                                                     "num_attention_heads": 8})
    finally:
        hc._hf_table()["model_types"] = saved
    assert status == "disagrees" and "the config as written imports" in detail and "head_dim=128" in detail


def test_an_empty_rope_parameters_takes_the_theta_transformers_fills():
    """rope_parameters {}: transformers fills rope_type default and the class's default_theta (BLT's
    5e5, Mixtral's 1e6, ...: the survey's empty_rope_theta), not 10000 and not the class's set."""
    from transformers import CONFIG_MAPPING
    probed = {mt: r["empty_rope_theta"] for mt, r in ROWS.items() if "empty_rope_theta" in r}
    assert len(probed) > 20 and probed["mixtral"] == 1e6
    for mt in sorted(probed):
        if mt in MROPE_RULES or mt in EXCEPTIONS or ROWS[mt].get("axial") or ROWS[mt].get("components") \
                or "not_covered" in ROWS[mt]:
            continue
        want = CONFIG_MAPPING[mt](rope_parameters={}).rope_parameters["rope_theta"]
        got = [p for p in params_from_hf_config({"model_type": mt, "rope_parameters": {}}).values()
               if hasattr(p, "rope_theta")]
        assert got and all(p.rope_theta == want for p in got), (mt, want, got)
    assert params_from_hf_config({"model_type": "blt", "decoder_config": {"rope_parameters": {}}})[
        "decoder_config.rope"].rope_theta == 5e5


@pytest.mark.parametrize("config, message", [
    ({"model_type": "zamba2", "use_mem_rope": "false"}, "use_mem_rope: expected true or false, got str 'false'"),
    ({"model_type": "zamba2", "use_mem_rope": 1}, "use_mem_rope: expected true or false, got int 1"),
    ({"model_type": ["blt"]}, "model_type: expected a string, got list"),
    ({}, "model_type: missing"),
    ({"model_type": "llama4_vision_model", "image_size": "448"}, "image_size: expected a positive integer"),
    ({"model_type": "llama4_vision_model", "patch_size": 0}, "patch_size: expected a positive integer"),
    ({"model_type": "llama4_vision_model", "image_size": 10}, "image_size: 10 is smaller than patch_size 14"),
    ({"model_type": "llama4_vision_model", "rope_parameters": {"rope_type": "default", "factor": 2.0}},
     "unknown key.s. factor for rope_type 'default' .llama4_vision_model's vision rotary module reads rope_theta"),
])
def test_malformed_configs_of_the_new_layouts_are_one_named_error(config, message):
    with pytest.raises(SpecError, match=message):
        params_from_hf_config(config)


def test_what_transformers_ignores_the_import_ignores_and_says():
    """A BLT slot's own model_type (transformers builds the slot's class whatever it says) and Llama
    4 vision's head_dim (its table and attention take hidden_size // heads)."""
    from posenc.hf import component_imports
    imp = component_imports({"model_type": "blt", "patcher_config": {"model_type": "llama"}})["patcher_config"]
    assert (imp.model_type, imp.sets["all_layers"].rope_theta, imp.sets["all_layers"].pairing) == (
        "blt_patcher", 10000.0, "interleaved")
    assert "'llama' in the config is ignored" in imp.provenance["model_type"]
    p = params_from_hf_config({"model_type": "llama4_vision_model", "head_dim": 32})["axial"]
    assert p.head_dim == 48


def test_llama4_scouts_equal_llama3_factors_import_and_agree():
    """Llama 4 Scout's published text config: llama3 scaling with low_freq_factor == high_freq_factor
    == 1 (no blended band, SCALE-LLAMA3), as transformers' _compute_llama3_parameters computes it."""
    import numpy as np
    import torch
    from transformers import Llama4TextConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from posenc.reference.rope import inv_freq
    scout = {"hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
             "max_position_embeddings": 10485760, "rope_theta": 500000.0,
             "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    found = params_from_hf_config({"model_type": "llama4", "text_config": {"model_type": "llama4_text", **scout}})
    assert found["nope"].no_rope_layers[:8] == (1, 1, 1, 0, 1, 1, 1, 0)  # Scout's []: every 4th layer NoPE
    p = found["rope"]
    assert (p.low_freq_factor, p.high_freq_factor, p.factor) == (1.0, 1.0, 16.0)
    want, _ = ROPE_INIT_FUNCTIONS["llama3"](Llama4TextConfig(**scout), torch.device("cpu"))
    got = inv_freq(p)[0]
    assert np.allclose(got, want.double().numpy(), rtol=4e-6, atol=0)
    wavelen = 2 * np.pi / (500000.0 ** (-np.arange(0, 128, 2) / 128))
    assert np.array_equal(got == (500000.0 ** (-np.arange(0, 128, 2) / 128)) / 16, wavelen > 8192)  # two bands
    assert hf_agreement.agreement("llama4_text", config=scout)[0] == "agrees"
    with pytest.raises(SpecError, match="high_freq_factor must not be below low_freq_factor"):
        params_from_hf_config({"model_type": "llama4_text", **scout,
                               "rope_scaling": {**scout["rope_scaling"], "high_freq_factor": 0.5}})


def test_a_partial_factor_the_config_class_derives_is_derived():
    """Dots 3 Note: Dots3NoteTextConfig sets each layer type's partial_rotary_factor to
    qk_rope_head_dim / head_dim, overwriting a stated one; the import does the same, says so, and
    agrees with the rotary module at other qk_rope_head_dim."""
    d = hf_coverage.default_config("dots3_note_text")
    d["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5
    imp = rope_import(d)
    assert {lt: s.rdim for lt, s in imp.sets.items()} == {"sliding_attention": 64, "indexed_attention": 64}
    assert imp.provenance["sliding_attention.partial_rotary_factor"].startswith("0.5 stated, overwritten")
    for width in (32, 96):
        assert hf_agreement.agreement("dots3_note_text", config={"qk_rope_head_dim": width})[0] == "agrees"
        d["qk_rope_head_dim"] = width
        assert {s.rdim for s in rope_import(d).sets.values()} == {width}
    assert ROWS["dots3_note_text"].get("ignores_partial_rotary_factor") is None
    from transformers import CONFIG_MAPPING
    from posenc.hf.rope import DERIVED_PARTIAL
    key, default, _ = DERIVED_PARTIAL["dots3_note_text"]
    assert getattr(CONFIG_MAPPING["dots3_note_text"](), key) == default  # the rule's default is the class's


def test_an_unknown_model_type_in_the_standard_layout_says_what_it_assumed():
    imp = rope_import({"model_type": "my_new_model", "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 5e5})
    assert imp.sets["all_layers"].pairing == "half" and "pairing assumed half" in imp.source


LEGACY = sorted(mt for mt, row in ROWS.items() if row.get("legacy_layout"))


def test_a_4x_layout_whose_keys_interact_is_refused():
    assert ROWS["dots3_note_text"].get("legacy_not_covered")
    with pytest.raises(SpecError, match="4.x layout of dots3_note_text is not covered"):
        rope_import({"model_type": "dots3_note_text", "rope_theta": 1e6})


@pytest.mark.parametrize("mt", LEGACY)
def test_a_4x_config_of_a_per_layer_type_model_is_mapped_as_transformers_maps_it(mt):
    """A raw 4.x ``config.json`` (Gemma 3's rope_theta / rope_local_base_freq / rope_scaling,
    ModernBERT's global_rope_theta / local_rope_theta) against the config class reading it."""
    from transformers import CONFIG_MAPPING
    layout = ROWS[mt]["legacy_layout"]
    kwargs = hf_defaults.legacy_trial(layout)
    kwargs.update({k: v * 1.5 for k, v in kwargs.items() if k != "rope_scaling"})  # not the survey's values
    theirs = CONFIG_MAPPING[mt](**copy.deepcopy(kwargs)).to_dict()["rope_parameters"]
    ours = rope_import({"model_type": mt, **kwargs}).sets
    assert set(ours) == {k for k, v in theirs.items()}
    for lt, st in theirs.items():
        if st is None:
            assert ours[lt] is None
            continue
        assert (ours[lt].rope_theta, ours[lt].rope_type, ours[lt].factor) == (
            st["rope_theta"], st["rope_type"], st.get("factor")), lt


# ---- what a hostile or careless config.json gets: one named error, or transformers' reading -----

@pytest.mark.parametrize("config, message", [
    ({"model_type": "llama", "hidden_size": "4096", "num_attention_heads": 32}, "hidden_size: expected a positive integer"),
    ({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 0}, "num_attention_heads: expected a positive"),
    ({"model_type": "llama", "head_dim": 1e400}, "head_dim: expected a positive integer"),
    ({"model_type": "llama", "rope_theta": 1e999}, "rope_theta: expected a finite number"),
    ({"model_type": "llama", "rope_parameters": {"rope_type": ["x"]}}, "rope_type: expected a string"),
    ({"model_type": "gemma4_text", "per_layer_config": {"00": [1]}, "layer_types": ["full_attention"],
      "num_hidden_layers": 1}, "per_layer_config: expected an object per layer"),
    ({"model_type": "gemma4_text", "global_head_dim": "x"}, "global_head_dim: expected a positive integer"),
    ({"model_type": "qwen2_vl", "text_config": [1]}, "text_config: expected an object"),
    ({"model_type": "qwen2_vl", "rope_scaling": {"type": "mrope", "mrope_section": [16, None, 24]}},
     "mrope_section: expected a list of 3 integers"),
    ({"model_type": "gpt2", "n_positions": True}, "n_positions: expected 'int'"),
    ({"model_type": "mpt", "attn_config": [1]}, "attn_config: expected an object"),
    ({"model_type": "gemma3_text", "layer_types": ["bogus", "full_attention"], "num_hidden_layers": 2},
     "unknown layer type"),
    ({"model_type": "gemma3_text", "layer_types": ["full_attention"], "num_hidden_layers": 3}, "1 entries, num_hidden"),
])
def test_malformed_values_are_one_named_error(config, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        params_from_hf_config(config)


def test_a_json_array_is_not_a_config(tmp_path):
    f = tmp_path / "c.json"
    f.write_text("[1, 2]")
    with pytest.raises(SpecError, match="expected a JSON object"):
        rope_import(f)


@pytest.mark.parametrize("mt, config", [
    # phi's class default partial_rotary_factor 0.5 holds when the config brings its own theta
    ("phi", {"hidden_size": 2048, "num_attention_heads": 32, "rope_theta": 1e4}),
    ("stablelm", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}),
    # llama's own default rope function ignores a partial factor
    ("llama", {"hidden_size": 1024, "num_attention_heads": 8,
               "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}),
    # falcon's head_dim is a property of hidden_size / heads
    ("falcon", {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 1e4}),
    # gemma4_text reads rope_parameters per layer type only: a top-level theta is ignored
    ("gemma4_text", {"rope_theta": 2e5}),
    # gemma3_text: a set without theta takes the 4.x key mapped to it; a missing set the class default
    ("gemma3_text", {"rope_theta": 3e5, "rope_parameters": {"full_attention": {"rope_type": "default"},
                                                            "sliding_attention": {"rope_type": "default"}}}),
    ("gemma3_text", {"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}),
    ("gemma3_text", {"rope_parameters": {"full_attention": None, "sliding_attention": {"rope_type": "default"}}}),
    ("gemma3_text", {"partial_rotary_factor": 0.5}),  # Gemma 3's default rope function ignores it
    # a stated factor wins over the class default; a set the config writes gets no dict-only default
    ("phi", {"partial_rotary_factor": 0.25}),
    ("stablelm", {"partial_rotary_factor": 0.5}),
    ("moonshine_streaming", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}),
    ("gemma4_text", {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
    ("apertus", {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "partial_rotary_factor": 0.5}}),
    ("gpt_neox", {"rope_theta": 5e5}),  # GPTNeoXConfig reads rotary_emb_base only
])
def test_raw_configs_read_as_transformers_reads_them(mt, config):
    """Raw config.json dicts (what the Hub holds, keys omitted), not to_dict() round trips."""
    from transformers import CONFIG_MAPPING
    found = params_from_hf_config({"model_type": mt, **copy.deepcopy(config)})
    hf_modeling._quiet()
    cfg = CONFIG_MAPPING[mt](**copy.deepcopy(config))
    module, _ = hf_modeling._modeling(mt)
    rotary = hf_modeling.rotary_modules(module, cfg)[0][1]
    assert hf_agreement.compare_frequencies(found, hf_modeling.rotary_frequencies(rotary)) == []


@pytest.mark.parametrize("mt", ["glm4v", "glm4v_text", "glm46v", "glmga", "glm_image", "glm_image_text",
                                "glm4v_moe", "glm4v_moe_text"])
def test_glm_vision_models_agree_on_their_published_layout(mt):
    """transformers' GLM-4V default configs cannot run their own rotary module (a listed
    transformers defect); with the published GLM-4.1V / GLM-4.5V keys (partial_rotary_factor 0.5;
    GLM-4.5V's head_dim 128) the import (MROPE-PAIR-INTERLEAVED, contiguous sections, partial
    rotary) agrees with the model's own module and apply function."""
    assert EXCEPTIONS[mt]["kind"] == "transformers-defect"
    hf_modeling._quiet()
    text = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}
    if "moe" in mt:
        text["head_dim"] = 128
    over = {"text_config": text} if ROWS[mt].get("where") else text
    assert hf_agreement.agreement(mt, config=over)[0] == "agrees"
    # the import moved with the config: theta and the factor are read, not defaulted
    text["rope_parameters"]["rope_theta"] = 25000.0
    assert hf_agreement.agreement(mt, config=over)[0] == "agrees"


NESTED_TYPES = sorted(mt for mt in ROPE_TYPES if _nested((ROWS[mt].get("defaults") or {}).get("rope_parameters") or {}))


def _transformers_layer_types(mt: str, **kwargs) -> tuple[set, set]:
    """(the layer types transformers' config class gives, the keys of its rope_parameters)."""
    from transformers import CONFIG_MAPPING
    row = ROWS[mt]
    cfg = CONFIG_MAPPING[mt]() if not kwargs else None
    if row.get("where"):
        cfg = CONFIG_MAPPING[mt]()
        sub = getattr(cfg, row["where"])
        sub = type(sub)(**kwargs) if kwargs else sub
    else:
        sub = cfg if cfg is not None else CONFIG_MAPPING[mt](**kwargs)
    return set(sub.layer_types or ()), set(sub.rope_parameters)


@pytest.mark.parametrize("mt", NESTED_TYPES)
def test_only_the_sets_some_layer_uses_are_imported(mt):
    """transformers builds one RoPE set per layer type its layers are of (its rotary module takes
    ``sorted(set(config.layer_types))``): the import gives those sets and no other, on the default config and
    on configs whose layer_types (or only whose layer count) say otherwise; where the layer count changes the
    class's pattern and no layer_types is given, it keeps every set and says the pattern is not known."""
    pytest.importorskip("transformers")
    hf_modeling._quiet()
    used, keys = _transformers_layer_types(mt)
    if not (used & keys):  # sets not named by layer type (DeepSeek V4's main / compress)
        pytest.skip(f"{mt}: its sets are not named by layer type")
    where = ROWS[mt].get("where")

    def imported(extra: dict) -> set:
        cfg = {"model_type": mt, **({where: extra} if where else extra)}
        return set(rope_import(cfg).sets)
    assert imported({}) == used & keys, (mt, used, keys)
    for lt in sorted(used & keys):  # every layer of one type
        n = 2
        assert imported({"num_hidden_layers": n, "layer_types": [lt] * n}) == {lt}
    derived = ROWS[mt]["default_layer_types"]
    for n in (1, 2, 3):
        used_n, _ = _transformers_layer_types(mt, num_hidden_layers=n)
        got = imported({"num_hidden_layers": n})
        if derived["any_count"]:
            assert got == used_n & keys, (mt, n)
        else:
            assert got >= used_n & keys, (mt, n)


@pytest.mark.parametrize("mt, only", [("laguna", "full_attention"), ("mellum", "full_attention"), ("zaya", "hybrid")])
def test_a_set_no_layer_uses_is_not_imported(mt, only):
    """The independent check's three: their classes derive layer_types of one type at any layer count."""
    imp = rope_import({"model_type": mt})
    assert list(imp.sets) == [only]
    assert any(k.startswith("sets.") and "not built" in v for k, v in imp.provenance.items())
    assert list(rope_import({"model_type": mt, "num_hidden_layers": 7}).sets) == [only]
