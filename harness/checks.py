"""The check author's façade: what a family's ``<family>_checks`` module may import.

An oracle-free check (``@posenc.families.check(name, ops=..., invariant=...)``) is a handler
``(request, adapter, device, dtype, case)``: it calls the adapter through :func:`run_op` /
:func:`call_adapter` (a prepared object step by step, through each served call form: :func:`run_steps`, :func:`step_forms`) (inputs as private copies, outputs contract-checked, every call recorded so a
failure is diagnosed on the check's own calls), compares, and fails through :func:`fail` (the
header names the clauses, adapter, case and dtype) or :func:`assert_conforms` (a golden's tolerance
rule and diagnosis).  The helpers below are shared by the kit's checks: :func:`clauses_of` (the
clauses of the running test), :func:`step` and :func:`rows` (a golden cut to a decode step or a
query row), :func:`exact_decode_steps` and :func:`left_pad_rows`.

A family's inference models (``@posenc.families.inference``) are written with
:class:`InferenceContext`, :data:`Candidate`, :func:`int_models`, :func:`shift_sentence`, :func:`sig`, :func:`sig_at`
and :data:`SHIFTS` (:mod:`posenc.harness.inference`).

The model-level harness's driver and facts (:class:`Run`, :class:`Facts`, :class:`Scenario`) are
here too: the ``model`` family's scenarios and model-level mutants are written with them.
Everything else of the harness is private (docs/architecture.md, "Public API").
"""

from __future__ import annotations

import numpy as np

from posenc.harness.diagnosis import Match, diagnose
from posenc.harness.failure import (ConformanceFailure, as_form_failure, assert_conforms, call_adapter, fail,
                                    invariant_clauses, load_golden, require_dtype, run_and_check)
from posenc.harness.golden import Golden, computed, generate
from posenc.harness.inference import (SHIFTS, Candidate, InferenceContext, Outputs, golden_section, int_models,
                                      shift_sentence, sig, sig_at)
from posenc.harness.model_run import CAPABILITIES, CAUSAL, MODEL_KINDS, Facts, Run, Scenario, as_array, cached_real
from posenc.harness.runner import (checked_outputs, compare_outputs, native, native_inputs, record, recording, run_case,
                                   run_op, run_steps, step_forms)
from posenc.registry import spec
from posenc.registry.cases import Case, Gen, arange_x, pos
from posenc.spec.errors import Unsupported
from posenc.spec.tolerance import identical


def clauses_of(request) -> tuple[str, ...]:
    """The clauses the running check test is parametrized with (its ID lists them)."""
    return tuple(request.node.get_closest_marker("clauses").args)


def step(g: Golden, t: int, inputs: dict, t_axis: dict) -> Golden:
    """Golden for decode step ``t``: the step's own inputs, outputs and scales sliced at ``t``."""
    def cut(d):
        return {n: np.take(v, [t], axis=t_axis[n]) for n, v in d.items() if n in t_axis}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based,
                  cut(g.accumulation_scales))


def rows(g: Golden, t: int, tk: int, inputs: dict) -> Golden:
    """Golden of query row ``t`` over the first ``tk`` keys (outputs, masks and scales)."""
    def cut(d):
        return {n: np.asarray(v)[..., t:t + 1, :tk] for n, v in d.items()}
    return Golden(g.case, inputs, cut(g.outputs), cut(g.dtype_scales), cut(g.angle_scales), g.angle_based,
                  cut(g.accumulation_scales))


def exact_decode_steps(adapter, case, dtype, device, cl, g: Golden, name: str, steps, call, inputs=None) -> None:
    """Integer outputs decoded one step at a time (``call(t)``) equal the prefill's column ``t``;
    ``inputs(t)``: step ``t`` as the operation's NumPy inputs, recorded with its outputs so that a
    failure is diagnosed on the steps (``runner.record``)."""
    c0 = int(g.inputs.get("cache_length", 0))
    for t in steps:
        out = call_adapter(adapter, case, dtype, cl, lambda: checked_outputs(adapter, case.op, call(t), dtype, device))
        if inputs is not None:
            record(case.op, case.params, inputs(t), out)
        got = out[name]
        want = g.outputs[name][:, t:t + 1]
        if got.shape != want.shape or not np.array_equal(got, want):
            fail(cl, adapter, case, dtype, f"decode step {t} (cache_length {c0 + t}): got {got.tolist()}, "
                 f"the prefill gives {want.tolist()}")


def left_pad_rows(adapter, case, dtype, device, cl, g: Golden, positions) -> None:
    """Each left-padded row equals the same row without padding at its real tokens;
    ``positions(native_mask)`` is the adapter's positions of one row."""
    m = g.inputs["attention_mask"]
    checked = 0
    for b in range(m.shape[0]):
        real = m[b] == 1
        first = int(np.argmax(real))
        if first == 0 or not real[first:].all():
            continue  # only left-padded rows: padding before every real token
        outs = []
        for mask in (m[b:b + 1], m[b:b + 1, first:]):
            nm = native_inputs(adapter, {"m": mask}, dtype, device)["m"]
            out = call_adapter(adapter, case, dtype, cl, lambda: checked_outputs(
                adapter, case.op, positions(nm), dtype, device))
            record(case.op, case.params, {"attention_mask": mask, "cache_length": np.asarray(0)}, out)
            outs.append(next(iter(out.values())))
        if not np.array_equal(outs[0][:, first:], outs[1]):
            fail(cl, adapter, case, dtype, f"row {b}: the left-padded positions {outs[0].tolist()} differ at the "
                 f"real tokens from the unpadded row's {outs[1].tolist()}")
        checked += 1
    if not checked:
        raise Unsupported("case has no left-padded row")


def identical_qk(adapter, case, dtype, device, cl, g: Golden, op: str, who: str) -> None:
    """q and k come back bit-identical from ``op`` at the golden's positions and shifted by 1000 and
    131000 (the invariant ``identity``: NOPE-*, LAYERS-NO-ROPE), against the inputs as the adapter
    received them, up to the tolerance rule's representation limit ``tiny(dt)`` that the golden allows
    too (:func:`posenc.spec.tolerance.identical`); else fails the test: ``"positions shifted by <s>: <who>
    <q|k> must come back bit-identical; <n> elements differ"``."""
    for shift in (0, 1000, 131000):
        def go():  # contract-checked outputs, against the inputs as the adapter received them
            inputs = {**g.inputs, "position_ids": g.inputs["position_ids"] + shift}
            out = run_op(adapter, op, case.params, inputs, dtype, device)
            return [(out[n], adapter.to_numpy(native(adapter, g.inputs[n], dtype, device, n))) for n in ("q", "k")]
        for name, (y, x) in zip(("q", "k"), call_adapter(adapter, case, dtype, cl, go)):
            if y.shape != x.shape or not identical(y, x, dtype).all():  # exactly, up to tiny(dt) (the rule's limit)
                n = int(np.sum(~identical(y, x, dtype))) if y.shape == x.shape else -1
                fail(cl, adapter, case, dtype, f"positions shifted by {shift}: {who} {name} must come back "
                     f"bit-identical; " + (f"{n} elements differ" if n >= 0 else f"shape {list(y.shape)} != {list(x.shape)}"))


__all__ = ["Case", "Gen", "pos", "arange_x", "Golden", "Match", "ConformanceFailure", "Unsupported", "Run", "Facts",
           "Scenario", "CAPABILITIES", "CAUSAL", "MODEL_KINDS", "cached_real", "as_array", "assert_conforms", "call_adapter", "fail",
           "invariant_clauses", "load_golden", "require_dtype", "run_and_check", "computed", "generate", "checked_outputs", "run_steps", "step_forms", "as_form_failure",
           "compare_outputs", "diagnose", "native", "native_inputs", "record", "recording", "run_case", "run_op", "spec",
           "clauses_of", "step", "rows", "exact_decode_steps", "left_pad_rows", "identical_qk", "InferenceContext", "Candidate", "Outputs",
           "SHIFTS", "int_models", "shift_sentence", "sig", "sig_at", "golden_section"]
