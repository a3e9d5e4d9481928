"""Calibration of the tolerance rule (posenc.spec.tolerance) against real dtype policies.

Each policy below is a small torch emulation of where an implementation rounds; the rule must
accept HF's, Meta's and torchtune's at every dtype (the real HF code is also run by the suite
in tests/test_suite.py) and reject angles computed in bfloat16 -- at every dtype, long and
short positions alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc.registry import cases_by_id as by_id
from posenc.harness.golden import load
from posenc.harness.runner import compare_outputs
from posenc.spec.tolerance import EPS, K_ANGLE, K_DTYPE, bound, compare
from posenc import registry

TD = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _rotate_half(x, c, s):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)


def hf_policy(q, pid, theta, dt):
    """HF 5.24: float32 inv_freq and angles, cos/sin cast to the activation dtype, rotation in it."""
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    phi = pid[..., None].float() * inv
    c, s = torch.cos(phi).to(dt)[:, None], torch.sin(phi).to(dt)[:, None]
    return _rotate_half(q.to(dt), c, s)


def meta_policy(q, pid, theta, dt):
    """Meta llama: float32 freqs, rotation of q.float() in float32, cast back once (type_as).

    Meta pairs interleaved; the emulation rotates half pairs, which rounds identically.
    """
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32)[: d // 2] / d))
    phi = pid[..., None].float() * inv
    c, s = torch.cos(phi)[:, None], torch.sin(phi)[:, None]
    work = torch.float64 if dt == torch.float64 else torch.float32
    return _rotate_half(q.to(dt).to(work), c.to(work), s.to(work)).to(dt)


def torchtune_policy(q, pid, theta, dt):
    """torchtune: float32 [max_seq, d/2, 2] cos/sin cache indexed by input_pos, x.float(), type_as."""
    d = q.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2)[: d // 2].float() / d))
    cache_pos = torch.arange(int(pid.max()) + 1, dtype=inv.dtype)
    cache = torch.stack([torch.cos(torch.outer(cache_pos, inv)), torch.sin(torch.outer(cache_pos, inv))], -1)
    cs = cache[pid]
    return _rotate_half(q.to(dt).float(), cs[..., 0][:, None], cs[..., 1][:, None]).to(dt)


def bf16_angle_policy(q, pid, theta, dt):
    """Wrong: inverse frequencies and angles in bfloat16 (a rotary module cast with .to(bf16))."""
    d = q.shape[-1]
    inv = (1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))).to(torch.bfloat16)
    phi = pid[..., None].to(torch.bfloat16) * inv
    work = torch.float64 if dt == torch.float64 else torch.float32
    c, s = torch.cos(phi).to(work)[:, None], torch.sin(phi).to(work)[:, None]
    return _rotate_half(q.to(dt).to(work), c, s).to(dt)


def _check(policy, case_id, dtype):
    g = load(by_id()[case_id])
    p = g.case.params
    assert p.pairing == "half" and p.rdim == p.head_dim
    pid = torch.from_numpy(g.inputs["position_ids"])
    out = {n: policy(torch.from_numpy(g.inputs[n]), pid, p.rope_theta, TD[dtype]) for n in ("q", "k")}
    assert all(o.dtype == TD[dtype] for o in out.values())
    return compare_outputs(g, {n: o.to(torch.float64).numpy() for n, o in out.items()}, dtype)


@pytest.mark.parametrize("dtype", list(TD))
@pytest.mark.parametrize("case_id", ["rope-llama3-8b", "rope-llama3-8b-scattered"])
@pytest.mark.parametrize("policy", [hf_policy, meta_policy, torchtune_policy], ids=lambda f: f.__name__)
def test_real_policies_pass(policy, case_id, dtype):
    res = _check(policy, case_id, dtype)
    assert all(c.ok for c in res), [c.message for c in res]
    # and not by a wide margin: the rule is meant to be tight (worst element within 1/20 of it)
    assert max(c.ratio for c in res) > 0.05 or dtype == "float64"


@pytest.mark.parametrize("dtype", list(TD))
@pytest.mark.parametrize("case_id", ["rope-llama3-8b", "rope-llama3-8b-scattered"])
def test_bf16_angles_fail(case_id, dtype):
    res = _check(bf16_angle_policy, case_id, dtype)
    assert not all(c.ok for c in res)
    assert max(c.ratio for c in res) > 10


def test_bf16_angles_fail_at_small_positions_too():
    """Even at positions <= 4 a bf16 angle is caught at float32 (it only needs one rounding of phi)."""
    g = load(by_id()["rope-llama3-8b"])
    q = torch.from_numpy(g.inputs["q"][:1])
    pid = torch.from_numpy(g.inputs["position_ids"][:1])
    y = bf16_angle_policy(q, pid, 500000.0, torch.float32).double().numpy()
    ref = g.outputs["q"][:1]
    c = compare("q", y, ref, dtype="float32", dtype_scale=g.dtype_scales["q"][:1],
                angle_scale=g.angle_scales["q"][:1], angle_based=True)
    assert not c.ok


def test_bound_formula_by_hand():
    # float32, rotation of a pair of norm 2 at angle 1000 rad: 4 * eps32 * 2 + 4 * eps32 * 1000 * 2
    e = EPS["float32"]
    assert K_DTYPE["float32"] == 4 and K_ANGLE == 4
    assert bound("float32", 2.0, 2000.0, True) == pytest.approx(4 * e * 2 + 4 * e * 2000)
    # float64 activations of an angle-based op still allow float32 cos/sin (eps never below f32)
    assert bound("float64", 1.0, 0.0, True) == pytest.approx(16 * e)
    assert bound("float64", 1.0, 0.0, False) == pytest.approx(16 * EPS["float64"])
    # bfloat16 eps is 2**-7 (8 significant bits)
    assert EPS["bfloat16"] == float(torch.finfo(torch.bfloat16).eps)
    assert EPS["float16"] == float(torch.finfo(torch.float16).eps)


def test_compare_reports_worst_element_and_exact_ints():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    got = ref.copy()
    got[1, 0] += 1e-3
    c = compare("y", got, ref, dtype="float32", dtype_scale=np.abs(ref))
    assert not c.ok and c.worst_index == (1, 0) and c.n_bad == 1
    assert compare("i", np.array([1, 2]), np.array([1, 2]), dtype="float32").ok
    assert not compare("i", np.array([1, 3]), np.array([1, 2]), dtype="float32").ok
    assert not compare("t", ref.T.copy()[None], ref, dtype="float32").ok  # shapes must match
    assert not compare("n", np.array([np.nan]), np.array([1.0]), dtype="float32", dtype_scale=1.0).ok
    assert compare("m", np.array([9, 2]), np.array([0, 2]), dtype="float32", compared=np.array([False, True])).ok


def test_uniform_relative_angle_error_fails():
    """A float32 implementation whose angles are all off by 1.5e-6 relative (12 eps) is caught."""
    g = load(by_id()["rope-llama3-8b"])
    p = g.case.params
    pid = torch.from_numpy(g.inputs["position_ids"])

    def off(q):
        d = q.shape[-1]
        inv = (1.0 / (p.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))) * (1 + 1.5e-6)
        phi = pid[..., None].double() * inv
        return _rotate_half(q, torch.cos(phi)[:, None], torch.sin(phi)[:, None]).float()
    out = {n: off(torch.from_numpy(g.inputs[n])).double().numpy() for n in ("q", "k")}
    assert not all(c.ok for c in compare_outputs(g, out, "float32"))


def test_angle_scale_amplification_by_hand():

    from posenc.spec.models import RopeParams
    p = RopeParams(head_dim=8, rope_theta=10000.0)
    x = np.zeros((1, 1, 1, 8))
    x[..., 1] = 1.0  # pair (1, 5) at frequency i = 1, exponent 2/8
    _, an = registry.reference_of("rope.apply").scales(p, {"q": x, "k": x, "position_ids": np.array([[3]])})["q"]
    phi = 3 * 10000 ** (-2 / 8)
    assert an[0, 0, 0, 1] == pytest.approx(phi * (1 + 0.25 * np.log(10000)), rel=1e-14)
    assert an[0, 0, 0, 0] == 0 and an[0, 0, 0, 2] == 0
