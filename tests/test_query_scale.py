"""Position-dependent query scaling (QSCALE-*): the reference against hand-derived figures (not
computed by the reference) and against transformers' own get_llama_4_attn_scale run here, the
mutants, the config import of Ministral 3 / Mistral 4 and what it refuses, and the suite failing
on a wrong scale with the divergence named."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers.models.ministral3 import modeling_ministral3 as hf_ministral3
from transformers.models.mistral4 import modeling_mistral4 as hf_mistral4

from posenc.hf.agreement import compare_query_scale
from posenc.reference import query_scale
from posenc.spec.errors import SpecError
from posenc.hf import params_from_hf_config, rope_import
from posenc.spec.models import QueryScaleParams
from posenc import registry

MINISTRAL = QueryScaleParams(form="mistral", beta=0.1, scale_length=16384)
LLAMA4 = QueryScaleParams(form="llama4", beta=0.1, scale_length=8192)


@pytest.mark.parametrize("params, positions, want", [
    # the spec's figures: 1 + 0.1 ln 2 = 1.0693147..., 1 + 0.1 ln 4 = 1.1386294...
    (MINISTRAL, [0, 16383, 16384, 32767, 49152], [1, 1, 1.0693147180559945, 1.0693147180559945, 1.1386294361119891]),
    (LLAMA4, [0, 8190, 8191, 16382, 16383], [1, 1, 1.0693147180559945, 1.0693147180559945, 1.1098612288668110]),
    (QueryScaleParams(beta=0.5, scale_length=3), [2, 3, 8, 9], [1, 1 + 0.5 * math.log(2), 1 + 0.5 * math.log(3),
                                                                  1 + 0.5 * math.log(4)]),
])
def test_the_figures(params, positions, want):
    got = query_scale.scale(np.asarray([positions]), params)[0]
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_only_q_is_scaled_per_row_on_every_head_and_dim():
    q = np.arange(2 * 3 * 2 * 4, dtype=np.float64).reshape(2, 3, 2, 4) + 1
    pid = np.asarray([[0, 16384], [49152, 1]])
    got = query_scale.apply(q, pid, MINISTRAL)
    for b, t, s in ((0, 0, 1.0), (0, 1, 1 + 0.1 * math.log(2)), (1, 0, 1 + 0.1 * math.log(4)), (1, 1, 1.0)):
        np.testing.assert_allclose(got[b, :, t], q[b, :, t] * s, rtol=1e-15)


@pytest.mark.parametrize("fn", [hf_ministral3.get_llama_4_attn_scale, hf_mistral4.get_llama_4_attn_scale])
@pytest.mark.parametrize("beta, L", [(0.1, 16384), (0.1, 8192), (0.37, 100), (2.0, 7)])
def test_the_reference_is_transformers_get_llama_4_attn_scale(fn, beta, L):
    """Random positions (and the steps) against transformers' float32 function: within float32."""
    rng = np.random.default_rng(L)
    pid = np.concatenate([rng.integers(0, 300 * L, (2, 40)), np.asarray([[L - 1, L, 2 * L - 1, 2 * L] * 10] * 2)], 1)
    got = fn(torch.from_numpy(pid), beta, L)[:, 0, :, 0].double().numpy()
    want = query_scale.scale(pid, QueryScaleParams(beta=beta, scale_length=L))
    np.testing.assert_allclose(got, want, rtol=3e-7)


def test_mutants_are_the_wrong_behaviour():
    q = np.ones((2, 1, 3, 2))
    x = {"q": q, "position_ids": np.asarray([[0, 16384, 49151], [16383, 32768, 100000]])}
    right = query_scale.apply(q, x["position_ids"], MINISTRAL)
    assert np.array_equal(registry.run_mutant("qscale_missing", "query_scale.apply", MINISTRAL, x)["q"], q)
    row0 = registry.run_mutant("qscale_row0_positions", "query_scale.apply", MINISTRAL, x)["q"]
    assert np.array_equal(row0[1], right[0]) and not np.array_equal(row0[1], right[1])
    nofloor = registry.run_mutant("qscale_no_floor", "query_scale.apply", MINISTRAL, x)["q"]
    np.testing.assert_allclose(nofloor[1, 0, 0], 1 + 0.1 * math.log1p(16383 / 16384), rtol=1e-15)
    mixed = registry.run_mutant("qscale_rules_mixed", "query_scale.apply", MINISTRAL, x)["q"]
    np.testing.assert_allclose(mixed[1, 0, 0], 1 + 0.1 * math.log(2), rtol=1e-15)  # (16383 + 1) // L = 1
    assert registry.run_mutant("qscale_row0_positions", "query_scale.apply", MINISTRAL,
                       {"q": q[:1], "position_ids": x["position_ids"][:1]}) is None


@pytest.mark.parametrize("config, want", [
    ({"model_type": "ministral3"}, MINISTRAL),
    ({"model_type": "mistral4"}, QueryScaleParams(beta=0.1, scale_length=8192)),
    ({"model_type": "mistral3", "text_config": {"model_type": "ministral3"}}, MINISTRAL),
    # yarn without original_max_position_embeddings: transformers fills it from max_position_embeddings
    ({"model_type": "ministral3", "max_position_embeddings": 8192,
      "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6, "llama_4_scaling_beta": 0.25}},
     QueryScaleParams(beta=0.25, scale_length=8192)),
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": 0.5, "original_max_position_embeddings": 64}},
     QueryScaleParams(beta=0.5, scale_length=64)),
])
def test_query_scale_imports(config, want):
    found = params_from_hf_config(config)
    assert found["query_scale"] == want
    assert "rope" in found and rope_import(config).as_json()["query_scale"]["beta"] == want.beta


def test_a_model_without_query_scaling_has_none():
    assert "query_scale" not in params_from_hf_config({"model_type": "mistral"})
    assert rope_import({"model_type": "llama"}).query_scale is None


@pytest.mark.parametrize("config, message", [
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}},
     "rope_parameters.llama_4_scaling_beta: missing"),
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": 0.1}},
     "original_max_position_embeddings: expected a positive integer"),
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": "0.1",
                                                      "original_max_position_embeddings": 64}},
     "llama_4_scaling_beta: expected a positive finite number"),
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": -0.1,
                                                      "original_max_position_embeddings": 64}},
     "llama_4_scaling_beta: expected a positive"),
    # an explicit empty rope dict: transformers fills rope_type default, theta 10000 and no beta
    ({"model_type": "ministral3", "rope_parameters": {}}, "llama_4_scaling_beta: missing"),
    # L stated as 0 (transformers divides by it) or null (its rope validation refuses it)
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 0}},
     "original_max_position_embeddings: expected a positive integer, got 0"),
    ({"model_type": "ministral3", "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "rope_theta": 1e6,
                                                      "llama_4_scaling_beta": 0.1,
                                                      "original_max_position_embeddings": None}},
     "original_max_position_embeddings: expected a positive integer, got None"),
    # Mistral's attention applies no query scale: the key is not silently taken as one
    ({"model_type": "mistral", "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                   "llama_4_scaling_beta": 0.1}}, "unknown key(s) llama_4_scaling_beta"),
])
def test_malformed_query_scale_configs_are_one_named_error(config, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        params_from_hf_config(config)


def test_the_survey_comparison_can_fail():
    from transformers import Ministral3Config
    cfg = Ministral3Config()
    assert compare_query_scale(hf_ministral3, cfg, MINISTRAL) == []
    for wrong in (QueryScaleParams(beta=0.11, scale_length=16384), QueryScaleParams(beta=0.1, scale_length=16383),
                  QueryScaleParams(beta=0.1, scale_length=8192),
                  QueryScaleParams(form="llama4", beta=0.1, scale_length=16384)):
        assert compare_query_scale(hf_ministral3, cfg, wrong), wrong
    assert "no get_llama_4_attn_scale" in compare_query_scale(torch.nn, cfg, MINISTRAL)[0]


def test_a_missing_scale_fails_the_suite_and_is_named(run_suite, fails_naming, monkeypatch):
    """transformers' get_llama_4_attn_scale replaced by ones: the Ministral 3 / Mistral 4 cases fail
    and the diagnosis names DIV-QSCALE-MISSING."""
    assert run_suite("hf-transformers", "-k", "qscale-ministral3 or qscale-mistral4").ret == 0
    monkeypatch.setattr(hf_ministral3, "get_llama_4_attn_scale",
                        lambda p, beta, L: torch.ones(p.shape[0], 1, p.shape[1], 1))
    fails_naming("hf-transformers", "qscale-ministral3 or qscale-mistral4", "DIV-QSCALE-MISSING")


def test_a_row0_scale_is_named(fails_naming, monkeypatch):
    """Every row scaled with row 0's positions (a shared cache position): DIV-QSCALE-ROW0-POSITIONS."""
    real = hf_ministral3.get_llama_4_attn_scale
    monkeypatch.setattr(hf_ministral3, "get_llama_4_attn_scale",
                        lambda p, beta, L: real(p[:1].expand_as(p), beta, L))
    fails_naming("hf-transformers", "qscale-mistral-left-padded", "DIV-QSCALE-ROW0-POSITIONS")


@pytest.mark.parametrize("kw", [dict(beta=True, scale_length=16), dict(beta="0.1", scale_length=16),
                                dict(beta=float("inf"), scale_length=16), dict(beta=0.1, scale_length=True),
                                dict(beta=0.1, scale_length=16.0), dict(beta=1e200, scale_length=16),
                                dict(beta=0.1, scale_length=2 ** 41)])
def test_malformed_parameters_are_refused(kw):
    with pytest.raises(ValueError):
        QueryScaleParams(**kw)


def test_negative_positions_are_an_error_not_nan():
    with pytest.raises(ValueError, match="QSCALE-POSITIONS: position ids must be >= 0"):
        query_scale.scale(np.asarray([[3, -1]]), MINISTRAL)


def test_an_empty_rope_dict_is_what_transformers_makes_of_it():
    """{} is rope_type default at the config's rope_theta (else 10000), not the class default."""
    from transformers import LlamaConfig
    for extra in ({}, {"rope_theta": 5e5}):
        want = LlamaConfig(rope_parameters={}, **extra).rope_parameters["rope_theta"]
        got = params_from_hf_config({"model_type": "llama", "rope_parameters": {}, **extra})["rope"]
        assert got.rope_type == "default" and got.rope_theta == want


def test_llama4_temperature_tuning_imports_with_the_class_defaults():
    from transformers import Llama4TextConfig
    from posenc.hf.layers import QSCALE_LLAMA4_TYPES
    c = Llama4TextConfig()
    assert QSCALE_LLAMA4_TYPES["llama4_text"] == {k: getattr(c, k) for k in QSCALE_LLAMA4_TYPES["llama4_text"]}
    assert params_from_hf_config({"model_type": "llama4_text"})["query_scale"] == LLAMA4
    got = params_from_hf_config({"model_type": "llama4", "text_config": {"attn_scale": 0.2, "floor_scale": 1000}})
    assert got["query_scale"] == QueryScaleParams(form="llama4", beta=0.2, scale_length=1000)
    assert "query_scale" not in params_from_hf_config({"model_type": "llama4_text", "attn_temperature_tuning": False})
    assert "NoPE layers only" in rope_import({"model_type": "llama4_text"}).provenance["query_scale"]
    for bad, msg in (({"attn_temperature_tuning": "yes"}, "expected true or false"),
                     ({"floor_scale": 0}, "floor_scale: expected a positive integer"),
                     ({"attn_scale": -1}, "attn_scale: expected a positive number")):
        with pytest.raises(SpecError, match=msg):
            params_from_hf_config({"model_type": "llama4_text", **bad})
