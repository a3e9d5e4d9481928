"""The diagnosis judges a mutant's outputs by the rounding the mutant's own computation allows: a
pairing swap rounds each element with the *other* pair's norm, so at a wide head the case's bound
(its own pair's norm) is too tight for an honest float32 swap (issue 29's regression: a real swap in a
fused apply_with_cos_sin at head_dim 256 was left unnamed, closest fit at residual 1.43)."""

from __future__ import annotations

import numpy as np
import pytest

from posenc.families import Case
from posenc.harness import diagnosis
from posenc.harness.golden import computed
from posenc.registry import spec
from posenc.spec.models import RopeParams


def _rotate_f32(x, cos, sin, pairing):
    """x [B, H, T, D] rotated by cos/sin [B, T, D/2] in float32 arithmetic, written from the math."""
    x, c, s = x.astype(np.float32), cos[:, None].astype(np.float32), sin[:, None].astype(np.float32)
    y = np.empty_like(x)
    if pairing == "half":
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        y[..., :h], y[..., h:] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2], y[..., 1::2] = a * c - b * s, b * c + a * s
    return y


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_a_float32_pairing_swap_is_named_at_every_head_width(head_dim, pairing):
    other = "interleaved" if pairing == "half" else "half"
    p = RopeParams(head_dim=head_dim, rope_theta=10000.0, pairing=pairing)
    for seed in range(8):
        rng = np.random.default_rng(seed)
        x = {"q": rng.standard_normal((1, 2, 3, head_dim)), "k": rng.standard_normal((1, 2, 3, head_dim)),
             "cos": 0.5 * rng.standard_normal((1, 3, head_dim // 2)), "sin": 0.5 * rng.standard_normal((1, 3, head_dim // 2))}
        g = computed(Case("swap", "rope.apply_with_cos_sin", ("ROPE-PAIR-HALF",), p, {}), x)
        out = {n: _rotate_f32(x[n], x["cos"], x["sin"], other) for n in ("q", "k")}
        names = [m.divergence for m in diagnosis.diagnose(spec(), g, out, "float32")]
        assert names and names[0] == "DIV-ROPE-PAIRING-SWAPPED", (seed, names)
        # and the same float32 arithmetic at the specified pairing conforms (the bound is not loose)
        right = {n: _rotate_f32(x[n], x["cos"], x["sin"], pairing) for n in ("q", "k")}
        assert diagnosis.diagnose(spec(), g, right, "float32") == [], seed


def test_outputs_changed_after_their_run_carry_no_scales():
    """A mutant that changes the reference run's outputs in place (``out["q"] = x["q"]``) is judged by the
    case's scales only: the run's (here at position 1e5, a 0.03 |x| angle term) describe another computation."""
    from posenc.families._common import run
    from posenc.registry.outputs import own_scales
    p = RopeParams(head_dim=8, rope_theta=10000.0)
    rng = np.random.default_rng(0)
    x = {"q": rng.standard_normal((1, 1, 2, 8)), "k": rng.standard_normal((1, 1, 2, 8)),
         "position_ids": np.array([[100000, 100001]])}
    assert set(own_scales(run("rope.apply", p, x))) == {"q", "k"}
    for change in (lambda o: o.__setitem__("q", x["q"]), lambda o: o.update(q=x["q"]), lambda o: o.pop("k")):
        out = run("rope.apply", p, x)
        change(out)
        assert own_scales(out) == {}
