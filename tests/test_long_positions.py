"""Long positions (issue 30, part 4): goldens at 2**20, 2**24 and int32's largest position (RoPE, its
sequence-dependent scalings through the offset form, M-RoPE, T5 buckets), and the elements where the
tolerance rule's float32 angle term stops constraining anything, counted as "not checkable at this dtype"
(spec.tolerance.not_checkable), never a silent pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posenc.spec.errors import Unsupported
from posenc.spec.tolerance import Comparison, compare, not_checkable

HERE = Path(__file__).resolve().parent
BROKEN = HERE / "broken_form_adapters.py"


def test_the_highest_frequency_stops_being_checkable_near_2_22():
    """At float32 angles, the bound of a rotated pair at the highest frequency (e_0 = 0, |x_pair| 1) reaches 2,
    the largest error a rotation can make, at position 2**22 -- not at 2**21; a lower frequency later; an
    operation without an angle term never."""
    def unchecked(p, w=1.0, dtype="float32"):
        return bool(not_checkable(dtype, 1.0, p * w, True))
    assert not unchecked(2**21) and unchecked(2**22) and unchecked(2**24)
    assert not unchecked(2**24, w=2**-4) and unchecked(2**24, w=2**-2)
    assert all(unchecked(2**22, dtype=d) for d in ("float64", "bfloat16", "float16"))  # float32 angles at every dtype
    assert not bool(not_checkable("float32", 1.0, 2**30, False))  # no angle term: always checkable
    assert not bool(not_checkable("float32", 0.0, 2**30, True))  # an exact element (a pass-through): checkable


def test_compare_counts_them_and_still_judges_them():
    """Counted, and still compared: an output of the wrong magnitude fails there."""
    e = np.array([1.0, 0.5])
    c = compare("q", e, e, dtype="float32", dtype_scale=np.array([1.0, 1.0]), angle_scale=np.array([2.0**24, 1.0]),
                angle_based=True)
    assert c.ok and c.n_unchecked == 1
    bad = compare("q", np.array([50.0, 0.5]), e, dtype="float32", dtype_scale=np.array([1.0, 1.0]),
                  angle_scale=np.array([2.0**24, 1.0]), angle_based=True)
    assert not bad.ok and bad.n_unchecked == 1


def test_a_case_with_no_checkable_element_is_unsupported_not_passed():
    from posenc.harness.runner import note_not_checkable, take_not_checkable
    take_not_checkable()
    all_out = [Comparison(True, 0.5, 0, 8, None, None, None, "q: ok", 8)]
    with pytest.raises(Unsupported, match=r"not checkable at float32: every one of the 8 compared elements of far"):
        note_not_checkable("far", all_out, "float32")
    note_not_checkable("far", [Comparison(True, 0.5, 0, 8, None, None, None, "q: ok", 3)], "float32")
    assert take_not_checkable() == 11 and take_not_checkable() == 0


def test_the_run_counts_them_and_the_report_has_them(run_suite, tmp_path):
    rep = tmp_path / "r.json"
    r = run_suite("torch", "-k", "rope-position-2-24 or rope-cos-sin-llama3", "--dtype", "float32",
                  "--report-json", str(rep))
    out = r.stdout.str()
    assert r.ret == 0 and "not checkable at their dtype" in out, out[-3000:]
    recs = {x["test_id"]: x for x in json.loads(rep.read_text())["results"]}
    far = [x for k, x in recs.items() if "rope-position-2-24@" in k and k.startswith("test_golden")]
    near = [x for k, x in recs.items() if "rope-cos-sin-llama3@" in k]
    assert far and all(x["not_checkable"] > 0 and x["outcome"] == "passed" for x in far), far
    assert near and all(x["not_checkable"] == 0 for x in near), near


@pytest.mark.parametrize("adapter,k", [
    ("Int32Low21Bits", "call_form and rope-int32-max"),  # a kernel keeping 21 bits of an int32 position
    ("Int32IndexWraps", "call_form and rope-int32-max"),  # pos * 1024 in int32
    ("OffsetScalesFromT", "call_form and (rope-offset-dynamic or rope-offset-longrope)"),  # frequencies from T
])
def test_long_position_bugs_of_the_forms_fail(run_suite, adapter, k):
    """Bugs the goldens below 2**21 and with plain RoPE could not see (hostile review): each fails through
    its form, counted under the form's clause (ROPE-CALL-FORM), while the same cases pass through rope.apply."""
    r = run_suite(f"{BROKEN}:{adapter}", "-k", k, "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and "failed" in r.parseoutcomes(), out[-3000:]
    assert f"ROPE-CALL-FORM: broken-" in out and "ROPE-ANGLE: broken-" not in out, out[-3000:]
    primary = k.replace("call_form and ", "test_golden and ")
    assert run_suite(f"{BROKEN}:{adapter}", "-k", primary, "--dtype", "float32").ret == 0


def test_the_ports_pass_the_long_goldens_at_every_dtype(run_suite):
    r = run_suite("torch", "-k", "2-24 or int32-max or offset-dynamic or offset-longrope or qwen2-vl-long or "
                  "buckets-long", "--dtype", "all")
    assert r.ret == 0 and set(k for k in r.parseoutcomes() if k != "deselected") == {"passed"}, r.stdout.str()[-3000:]


def test_a_mutant_vacuous_at_long_positions_does_not_explain_a_failure(run_suite, tmp_path):
    """At 2**24 and 2**31 - 1 a mutant's widened bounds reach every differing element's whole range: a kernel
    that ignores its positions is named for what it does (DIV-ROPE-ARANGE-POSITIONS), not also for every
    divergence whose outputs differ there (theta ignored, pairing swapped ...), and a line recording one of
    those does not excuse it (hostile review)."""
    r = run_suite(f"{BROKEN}:IgnoresPositions", "-k", "test_golden and (rope-position-2-24 or rope-int32-max)",
                  "--dtype", "float32")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-ROPE-ARANGE-POSITIONS (violates" in out, out[-3000:]
    for other in ("DIV-ROPE-THETA-DEFAULT", "DIV-ROPE-PAIRING-SWAPPED", "DIV-ROPE-TABLE-NARROWER"):
        assert f"    {other} (violates" not in out, (other, out[-3000:])
    import torch
    exp = tmp_path / "exp.yaml"
    exp.write_text("format: 2\nexpected_failures:\n  - case: rope-int32-max\n    check: golden\n    dtypes: [float32]\n"
                   "    clause: ROPE-INV-FREQ\n    divergence: DIV-ROPE-THETA-DEFAULT\n    evidence: a theta bug\n"
                   f"    library: torch\n    library_version: \"{torch.__version__}\"\n")
    r = run_suite(f"{BROKEN}:IgnoresPositions", "-k", "test_golden and rope-int32-max", "--dtype", "float32",
                  "--expectations", str(exp))
    assert r.ret == 1 and r.parseoutcomes().get("failed") == 1, r.stdout.str()[-3000:]


def test_a_kernel_wrong_at_one_special_head_size_fails_the_default_run(run_suite):
    """The head sizes kernels special-case have a golden each: a kernel wrong at head 80 alone fails the
    default run (float32, the default examples), not only when a draw happens to reach 80."""
    r = run_suite(f"{BROKEN}:WrongAtHead80", "-k", "rope-head-80", "--dtype", "float32")
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, r.stdout.str()[-3000:]


def test_llama3_blend_rounding_is_within_the_angle_term():
    """SCALE-LLAMA3's blend computed in float32, as transformers computes it (wavelength, smooth factor, blend):
    near the band's low edge the smooth factor's rounding is amplified (theta 148, head 80: 37 float32 eps at
    frequency 22, found by a generated case at position 2**20); the rule's angle term now covers it, and without
    the blend's amplification it would not."""
    import math
    import torch
    from posenc.families.rope import exponent_amplification
    from posenc.reference.rope_scaling import llama3_blend_amplification
    from posenc.reference import rope
    from posenc.spec.models import RopeParams
    from posenc.spec.tolerance import EPS, K_ANGLE
    p = RopeParams(head_dim=80, rope_theta=148.4131591025766, rope_type="llama3", factor=7.38905609893065,
                   original_max_position_embeddings=295, low_freq_factor=3.0, high_freq_factor=4.0)
    w64 = rope.inv_freq(p)[0]
    inv = 1.0 / (p.rope_theta ** (torch.arange(0, 80, 2, dtype=torch.int64).float() / 80))
    wl = 2 * math.pi / inv
    low, high = 295 / 3.0, 295 / 4.0
    scaled = torch.where(wl > low, inv / p.factor, inv)
    s = (295 / wl - 3.0) / (4.0 - 3.0)
    blended = (1 - s) * scaled / p.factor + s * scaled
    hf = torch.where(~(wl < high) & ~(wl > low), blended, scaled).double().numpy()
    rel = np.abs(hf - w64) / w64 / EPS["float32"]
    base = exponent_amplification(w64, p.rope_theta, 80)
    assert (rel <= K_ANGLE * (base + llama3_blend_amplification(p))).all()
    assert rel[22] > K_ANGLE * base[22]  # the case that needed it
