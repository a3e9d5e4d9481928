"""The RoPE parameter forms of spec 0.5.0 (issue 29): a rotated width given as a fraction of the head
(ROPE-ROTARY-FRACTION) and positions condensed before the angle (ROPE-CONDENSE).

The values are checked against numbers that do not come from the reference: widths and angles
written out by hand, the linear rule (frequencies divided: another code path of the reference), the
complex formulation, and the real libraries -- transformers' GPT-NeoX rotary module sizing a fraction,
rotary-embedding-torch's ``interpolate_factor`` condensing the positions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from posenc.hf import rope_import
from posenc.reference import rope
from posenc.spec.errors import SpecError
from posenc.spec.models import RopeParams, rotary_width

RNG = np.random.default_rng(29)


# ---- ROPE-ROTARY-FRACTION ----------------------------------------------------------------------

@pytest.mark.parametrize("head, f, width", [
    (100, 0.29, 28),   # 28.999999999999996 in float64: the exact product is 29
    (96, 0.3, 28),     # 28.8
    (96, 0.25, 24),    # GPT-NeoX-20B
    (80, 0.4, 32),     # Phi-2
    (64, 0.5, 32),     # Phi-1.5
    (128, 0.75, 96),   # Phi-4-mini
    (50, 0.58, 28),    # 28.999999999999996 again
])
def test_width_is_the_float64_product_truncated(head, f, width):
    assert rotary_width(head, f) == width
    p = RopeParams(head_dim=head, partial_rotary_factor=f)
    assert (p.rdim, p.pair_dim, p.rotary_dim) == (width, width, None)
    # the frequencies are the width's: theta^(-2i/width), i < width/2, written out for i = 1
    w, _ = rope.inv_freq(p)
    assert w.shape == (width // 2,) and w[1] == pytest.approx(10000.0 ** (-2 / width), rel=1e-15)


def test_proportional_rounds_its_share_down_to_even():
    # 64 x 0.3 = 19.2: proportional rope rotates 2 * int(19.2 // 2) = 18 dims, pairs over the head
    p = RopeParams(head_dim=64, partial_rotary_factor=0.3, rope_type="proportional")
    assert (p.rdim, p.pair_dim) == (18, 64)
    w, _ = rope.inv_freq(p)
    assert np.count_nonzero(w) == 9 and w[1] == pytest.approx(10000.0 ** (-2 / 64), rel=1e-15)
    # plain partial rotary refuses the same fraction: int(19.2) = 19 is odd
    with pytest.raises(ValidationError, match="ROPE-ROTARY-FRACTION.*19, which is odd"):
        RopeParams(head_dim=64, partial_rotary_factor=0.3)


@pytest.mark.parametrize("kw, words", [
    (dict(head_dim=8, partial_rotary_factor=0.375), "= 3, which is odd"),
    (dict(head_dim=8, partial_rotary_factor=0.1), "= 0, which is zero"),
    (dict(head_dim=8, rotary_dim=4, partial_rotary_factor=0.5), "not both"),
    (dict(head_dim=8, partial_rotary_factor=1.5), "less than or equal to 1"),
    (dict(head_dim=8, partial_rotary_factor=0.0), "greater than 0"),
])
def test_a_fraction_that_cannot_be_a_rotation_is_refused(kw, words):
    with pytest.raises(ValidationError, match=words):
        RopeParams(**kw)


def test_transformers_sizes_a_fraction_as_the_spec_does():
    """GPT-NeoX's rotary module (the one transformers uses for a fraction) at fractions whose product
    truncates: the same number of frequencies and the same values as the reference."""
    torch = pytest.importorskip("torch")
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox import modeling_gpt_neox as neox
    for head, f in ((100, 0.29), (96, 0.3), (50, 0.58), (80, 0.4)):
        cfg = GPTNeoXConfig(hidden_size=head, num_attention_heads=1, num_hidden_layers=1, intermediate_size=1,
                            vocab_size=1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                           "partial_rotary_factor": f})
        got = neox.GPTNeoXRotaryEmbedding(cfg).inv_freq.to(torch.float64).numpy()
        want, _ = rope.inv_freq(RopeParams(head_dim=head, partial_rotary_factor=f))
        assert got.shape == want.shape, (head, f)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_config_import_keeps_the_fraction_and_refuses_an_odd_width():
    imp = rope_import({"model_type": "gpt_neox", "hidden_size": 800, "num_attention_heads": 8, "rotary_pct": 0.29})
    p = imp.sets["all_layers"]
    assert (p.partial_rotary_factor, p.rdim) == (0.29, 28)
    with pytest.raises(SpecError, match="ROPE-ROTARY-FRACTION"):
        rope_import({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 8, "rotary_pct": 0.375})
    for bad in ("0.25", True):
        with pytest.raises(SpecError, match="rope_parameters.partial_rotary_factor: expected a finite number"):
            rope_import({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 8,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": bad}})
    with pytest.raises(SpecError, match="less than or equal to 1"):
        rope_import({"model_type": "gpt_neox", "hidden_size": 64, "num_attention_heads": 8, "rotary_pct": 4.0})


# ---- ROPE-CONDENSE -----------------------------------------------------------------------------

def test_condensed_angles_by_hand():
    # head 4, theta 1e4: inv_freq [1, 0.01]; ratio 2 at position 2 reads position 1
    c, s = rope.cos_sin(np.array([[2]]), RopeParams(head_dim=4, condense_ratio=2.0))
    np.testing.assert_allclose(c[0, 0], [0.5403023058681398, 0.9999500004166653], rtol=1e-15)
    np.testing.assert_allclose(s[0, 0], [0.8414709848078965, 0.009999833334166664], rtol=1e-15)
    # ratio 3 at position 1: the angle 1/3 (not a float32 multiple of the frequency)
    c, _ = rope.cos_sin(np.array([[1]]), RopeParams(head_dim=4, condense_ratio=3.0))
    assert c[0, 0, 0] == pytest.approx(math.cos(1 / 3), rel=1e-15)


@pytest.mark.parametrize("ratio", [2.0, 3.0, 4.5, 8.0])
def test_condensing_is_linear_scaling_and_the_complex_form(ratio):
    """Dividing the positions (ROPE-CONDENSE) equals dividing the frequencies (SCALE-LINEAR, its own
    code path) and the complex formulation, to float64 rounding."""
    p = RopeParams(head_dim=64, condense_ratio=ratio, rope_theta=500000.0)
    lin = RopeParams(head_dim=64, rope_type="linear", factor=ratio, rope_theta=500000.0)
    q, k = RNG.standard_normal((2, 2, 5, 64)), RNG.standard_normal((2, 1, 5, 64))
    pid = np.array([[0, 1, 2, 3, 4], [32763, 32764, 32765, 32766, 32767]])
    yq, yk = rope.apply(q, k, pid, p)
    lq, lk = rope.apply(q, k, pid, lin)
    np.testing.assert_allclose(yq, lq, atol=1e-11)
    np.testing.assert_allclose(yk, lk, atol=1e-11)
    np.testing.assert_allclose(yq, rope.apply_complex(q, pid, p), atol=1e-11)
    # inv_freq is unchanged by condensing: the positions are divided
    np.testing.assert_array_equal(rope.inv_freq(p)[0], rope.inv_freq(RopeParams(head_dim=64, rope_theta=500000.0))[0])


def test_condensing_is_for_the_default_rope_type_only():
    with pytest.raises(ValidationError, match="ROPE-CONDENSE"):
        RopeParams(head_dim=8, rope_type="linear", factor=2.0, condense_ratio=2.0)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        RopeParams(head_dim=8, condense_ratio=0.5)


@pytest.mark.parametrize("ratio", [2.0, 3.0, 8.0])
def test_rotary_embedding_torch_condenses_as_the_spec_does(ratio):
    """lucidrains' RotaryEmbedding(interpolate_factor=c) divides the positions (get_seq_pos): its
    rotation at an offset equals the reference's condensed RoPE (interleaved pairs, float32)."""
    torch = pytest.importorskip("torch")
    rer = pytest.importorskip("rotary_embedding_torch")
    emb = rer.RotaryEmbedding(dim=32, interpolate_factor=ratio)
    x = RNG.standard_normal((1, 2, 6, 32))
    for offset in (0, 4090):
        got = emb.rotate_queries_or_keys(torch.tensor(x, dtype=torch.float32), seq_dim=-2, offset=offset).numpy()
        pid = (offset + np.arange(6))[None]
        want, _ = rope.apply(x, x, pid, RopeParams(head_dim=32, pairing="interleaved", condense_ratio=ratio))
        # float32: the angle (up to (offset + 5) / c radians) rounds by a few eps32 of itself
        angle = (offset + 5) / ratio
        np.testing.assert_allclose(got, want, atol=8 * 2.0 ** -24 * (1 + angle) * np.abs(x).max())


def test_the_condensing_mutants_say_which_positions_went_wrong():
    from posenc.families import run_mutant
    p = RopeParams(head_dim=8, condense_ratio=4.0)
    prefill = {"position_ids": np.array([[0, 1, 2, 3]])}
    decode = {"position_ids": np.array([[100]])}
    ref = rope.cos_sin(prefill["position_ids"], p)
    plain = rope.cos_sin(prefill["position_ids"], RopeParams(head_dim=8))
    # offset only: a prefill from 0 is not condensed at all; a single-token decode is
    out = run_mutant("rope_condense_offset_only", "rope.cos_sin", p, prefill)
    np.testing.assert_allclose(out["cos"], plain[0], atol=1e-15)
    out = run_mutant("rope_condense_offset_only", "rope.cos_sin", p, decode)
    np.testing.assert_allclose(out["cos"], rope.cos_sin(decode["position_ids"], p)[0], atol=1e-15)
    assert not np.allclose(ref[0], plain[0])
    # ignored: the plain angles; and no form where there is nothing to ignore
    np.testing.assert_allclose(run_mutant("rope_condense_ignored", "rope.cos_sin", p, prefill)["cos"], plain[0])
    assert run_mutant("rope_condense_ignored", "rope.cos_sin", RopeParams(head_dim=8), prefill) is None


def test_the_width_mutant_rounds_up_to_the_next_even_width():
    from posenc.families import run_mutant
    out = run_mutant("rope_width_rounded_up", "rope.inv_freq", RopeParams(head_dim=100, partial_rotary_factor=0.29), {})
    assert out["inv_freq"].shape == (15,)  # 30 dims, not 28
    assert run_mutant("rope_width_rounded_up", "rope.inv_freq", RopeParams(head_dim=80, partial_rotary_factor=0.4),
                      {}) is None  # 32 exactly: the two rules agree


def test_condensing_on_the_decode_path_only_is_told_from_condensing_ignored():
    """A prefill then decode steps: DIV-ROPE-CONDENSE-DECODE-ONLY's mutant condenses the single-token calls
    only; DIV-ROPE-CONDENSE-IGNORED's none (found by a new user whose port condensed decode only: the
    diagnosis named the ignored ratio)."""
    from posenc.families import run_mutant
    p = RopeParams(head_dim=8, condense_ratio=4.5)
    x = {"position_ids.0": np.array([[200, 201, 202]]), "position_ids.1": np.array([[203]])}
    dec = run_mutant("rope_condense_decode_only", "rope.cos_sin_calls", p, x)
    ign = run_mutant("rope_condense_ignored", "rope.cos_sin_calls", p, x)
    ref = {k: v for k, v in zip(("cos.0", "sin.0"), rope.cos_sin(x["position_ids.0"], p))}
    plain = rope.cos_sin(x["position_ids.0"], RopeParams(head_dim=8))
    np.testing.assert_allclose(dec["cos.0"], plain[0], atol=1e-15)   # the prefill unscaled
    np.testing.assert_allclose(dec["cos.1"], rope.cos_sin(x["position_ids.1"], p)[0], atol=1e-15)  # decode right
    assert not np.allclose(ign["cos.1"], dec["cos.1"]) and not np.allclose(ref["cos.0"], dec["cos.0"])


@pytest.mark.parametrize("kw", [dict(condense_ratio=math.inf), dict(rope_theta=math.inf),
                                dict(rope_type="linear", factor=math.inf), dict(partial_rotary_factor=math.nan),
                                dict(attention_factor=math.inf)])
def test_an_infinite_parameter_is_refused_naming_the_field(kw):
    """condense_ratio inf condensed every position to 0, rope_theta inf gave inv_freq 0 past pair 0: both were
    accepted (hostile review of issue 29); every parameter model refuses inf and NaN, naming the field."""
    from posenc.spec.models import SinusoidalParams
    with pytest.raises(ValidationError, match=rf"{next(k for k in kw if k != 'rope_type')}\n.*finite number"):
        RopeParams(head_dim=8, **kw)
    with pytest.raises(ValidationError, match="scale\n.*finite number"):
        SinusoidalParams(dim=8, scale=math.inf)
