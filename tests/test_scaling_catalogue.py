"""The rope_scaling divergence catalogue of spec 0.4.0 (issue 9): every new kind is told apart
from the reference by a named golden case, pairs that coincide on some cases are separated by
the case their description names, and the goldens reach both sides of every scaling branch
with each scaling field at two or more values (one not a library default)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc import families
from posenc.harness import golden
from posenc.reference import rope, rope_scaling as rs

from posenc.spec.models import RopeParams
from posenc import registry

SPEC = families.spec()
NEW = sorted(d for d, v in SPEC.divergences.items() if d.startswith("DIV-SCALE-") and v.since == "0.4.0")

#: divergence -> a golden case that rejects its mutant
CATCHES = {
    "DIV-SCALE-FACTOR-TWICE": "scale-linear-factor-4",
    "DIV-SCALE-FACTOR-DROPPED": "scale-yarn-gpt-oss",
    "DIV-SCALE-LLAMA3-FACTOR-DEFAULTED": "scale-llama3.2-1b",
    "DIV-SCALE-LLAMA3-CONSTANTS-HARDCODED": "scale-llama3-bands-2-8",
    "DIV-SCALE-LLAMA3-BOUNDS-SWAPPED": "scale-llama3.1-8b-inv-freq",
    "DIV-SCALE-YARN-BETAS-DEFAULTED": "scale-yarn-beta-fast-4",
    "DIV-SCALE-YARN-BETAS-SWAPPED": "scale-yarn-qwen2.5",
    "DIV-SCALE-YARN-ATTENTION-FACTOR-DROPPED": "scale-yarn-explicit-factor",
    "DIV-SCALE-YARN-MSCALE-DEFAULTED": "scale-yarn-mscale-ratio",
    "DIV-SCALE-ATTENTION-FACTOR-ON-QK": "scale-yarn-partial-attention-factor",
    "DIV-SCALE-LONGROPE-AT-INIT": "scale-longrope-switch",
    "DIV-SCALE-LONGROPE-PER-CALL": "scale-longrope-at-init",
    "DIV-SCALE-LONGROPE-ALWAYS-LONG": "scale-longrope-switch",
    "DIV-SCALE-LONGROPE-NEW-TOKENS": "scale-longrope-switch",
    "DIV-SCALE-DYNAMIC-NEW-TOKENS": "scale-dynamic-apply",
    "DIV-SCALE-SOFTMAX-ATTENTION-FACTOR-TWICE": "scale-softmax-mscale-ratio",
}

#: (a, b, case): a and b coincide on some golden case but this one separates them
SEPARATED = [
    ("DIV-SCALE-LONGROPE-AT-INIT", "DIV-SCALE-LONGROPE-ALWAYS-LONG", "scale-longrope-max-position-at-original"),
    ("DIV-SCALE-LLAMA3-CONSTANTS-HARDCODED", "DIV-SCALE-LLAMA3-FACTOR-DEFAULTED", "scale-llama3-bands-2-8"),
    ("DIV-SCALE-FACTOR-DROPPED", "DIV-SCALE-YARN-FACTOR-OVERRIDE", "scale-yarn-gpt-oss"),
]


def _golden(case_id):
    case = {c.id: c for c in families.all_cases()}[case_id]
    return golden.load(case)


def _mutant_out(div_id, g):
    return registry.run_mutant(SPEC.divergences[div_id].mutant, g.case.op, g.case.params, g.inputs)


def _differs(a, b) -> bool:
    return any(not np.allclose(np.asarray(a[k], np.float64), np.asarray(b[k], np.float64), rtol=1e-6, atol=1e-9)
               for k in a)


def test_every_new_kind_is_listed():
    assert sorted(CATCHES) == NEW


@pytest.mark.parametrize("div_id", NEW)
def test_new_divergence_fields(div_id):
    d = SPEC.divergences[div_id]
    assert d.since == "0.4.0" and d.evidence
    planted = "planted kind" in d.description.lower() or any("planted kind" in e for e in d.evidence)
    assert planted or any(e.startswith("https://github.com/") for e in d.evidence), div_id


@pytest.mark.parametrize("div_id", NEW)
def test_named_case_rejects_the_mutant(div_id):
    g = _golden(CATCHES[div_id])
    out = _mutant_out(div_id, g)
    assert out is not None, f"{div_id} does not apply to {g.case.id}"
    assert _differs(out, g.outputs)


@pytest.mark.parametrize("a,b,case_id", SEPARATED, ids=[f"{a}-{b}" for a, b, _ in SEPARATED])
def test_separating_case(a, b, case_id):
    g = _golden(case_id)
    oa, ob = _mutant_out(a, g), _mutant_out(b, g)
    assert oa is not None and _differs(oa, g.outputs)
    assert ob is None or _differs(oa, ob)


def test_attention_factor_on_qk_needs_partial_rotary():
    """Full-width rotation: multiplying q and k equals multiplying cos and sin (no observable difference)."""
    g = _golden("scale-yarn-qwen2.5")
    assert _mutant_out("DIV-SCALE-ATTENTION-FACTOR-ON-QK", g) is None


# ---- branch and value coverage of the goldens ----------------------------------------------------


def _rope_cases():
    return [c for c in families.all_cases() if isinstance(c.params, RopeParams) and c.params.rope_type != "default"]


def _positions(c):
    return [np.asarray(v) for k, v in c.inputs.items() if k.startswith("position_ids")]


def _seq_lens(c):
    return [rope.seq_len_of(p) for p in _positions(c)]


def test_longrope_both_sides_and_both_policies():
    per_call = [c for c in _rope_cases() if c.params.rope_type == "longrope" and c.params.longrope_policy != "at_init"]
    at_init = [c for c in _rope_cases() if c.params.rope_type == "longrope" and c.params.longrope_policy == "at_init"]
    lens = [(L, c.params.original_max_position_embeddings) for c in per_call for L in _seq_lens(c)]
    assert any(L <= o for L, o in lens) and any(L > o for L, o in lens)
    picks = {rs.longrope_uses_long(c.params, None) for c in at_init}
    assert picks == {True, False}


def test_dynamic_below_and_above_lmax():
    lens = [(L, c.params.max_position_embeddings) for c in _rope_cases() if c.params.rope_type == "dynamic"
            for L in _seq_lens(c)]
    assert any(L <= m for L, m in lens) and any(L > m for L, m in lens)
    assert {c.params.dynamic_policy or "per_call" for c in _rope_cases() if c.params.rope_type == "dynamic"} == {
        "per_call", "grow_until_reset"}


def _corr(p, beta):
    return p.rdim * math.log(p.original_max_position_embeddings / (beta * 2 * math.pi)) / (2 * math.log(p.rope_theta))


def test_yarn_branches():
    yarn = [c.params for c in _rope_cases() if c.params.rope_type == "yarn"]
    assert {p.truncate is None or p.truncate for p in yarn} == {True, False}
    assert any(p.truncate is True for p in yarn), "truncate true given explicitly somewhere"
    low_clamped = [p for p in yarn if _corr(p, p.beta_fast or 32.0) < 0]
    high_clamped = [p for p in yarn if _corr(p, p.beta_slow or 1.0) > p.rdim - 1]
    inside = [p for p in yarn if _corr(p, p.beta_fast or 32.0) >= 0 and _corr(p, p.beta_slow or 1.0) <= p.rdim - 1]
    assert low_clamped and high_clamped and inside
    assert rs.yarn_correction_range(low_clamped[0])[0] == 0
    assert any(rs.yarn_correction_range(p)[1] == p.rdim - 1 for p in high_clamped)


def test_llama3_three_bands_non_empty():
    """Every llama3 golden exercises the three bands, but the one derivation case whose every wavelength is
    below original / high_freq_factor (no pair divided or blended: the branch points' other side)."""
    seen = []
    for c in _rope_cases():
        p = c.params
        if p.rope_type != "llama3":
            continue
        wl = 2 * np.pi / rs.base_inv_freq(p.rope_theta, p.rdim)
        L = p.original_max_position_embeddings
        bands = (wl < L / p.high_freq_factor, wl > L / p.low_freq_factor)
        if c.id == "scale-llama3-no-scaled-band":
            seen.append(c.id)
            assert bands[0].all(), c.id
            continue
        assert bands[0].any() and bands[1].any() and (~bands[0] & ~bands[1]).any(), c.id
    assert seen == ["scale-llama3-no-scaled-band"]


#: scaling field -> its library-default values (parameters: of spec/rope_scaling.yaml)
FIELDS = ["factor", "original_max_position_embeddings", "max_position_embeddings", "beta_fast", "beta_slow",
          "mscale", "mscale_all_dim", "truncate", "low_freq_factor", "high_freq_factor", "dynamic_policy",
          "longrope_policy"]


@pytest.mark.parametrize("field", FIELDS)
def test_field_at_two_values_one_not_a_library_default(field):
    from posenc.spec import ranges
    dom = ranges.domain(SPEC, "RopeParams", field)
    values = {getattr(c.params, field) for c in _rope_cases()} - {None}
    if field in ("truncate", "dynamic_policy", "longrope_policy"):
        values |= {{"truncate": True}.get(field, "per_call")}  # None means the default
    assert len(values) >= 2, (field, values)
    if dom.values:  # an enum: every allowed value reached (each may be some library's default)
        assert values == set(dom.values), (field, values)
        return
    assert any(not ranges.is_library_default(dom, v) for v in values), (field, values)
