"""Diagnosis: which known divergences reproduce a wrong output (their mutants, registered by the families).

``diagnose`` runs every current divergence whose mutant has a form for the case's operation and
keeps those that reproduce the adapter's outputs within the tolerance rule, best first;
``diagnose_calls`` does it over the calls an oracle-free check made; ``separating_case`` finds the
golden case that tells two matches apart.  What an output is when no divergence reproduces it is
:mod:`posenc.harness.inference`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from posenc import registry
from posenc.registry.forms import convert_scales, form_clauses, form_of, forms_of
from posenc.registry.outputs import ReferenceOutputs, own_scales
from posenc.spec import Spec
from posenc.spec.errors import exception_text
from posenc.spec.tolerance import not_checkable

from posenc.harness.golden import Golden, computed, scale_terms
from posenc.harness.runner import Call, compare_outputs


@dataclass(frozen=True)
class Match:
    divergence: str
    violates: tuple[str, ...]
    description: str
    ratio: float


def same_non_finite(mut: dict[str, np.ndarray], outputs: dict[str, np.ndarray]):
    """``(mutant, outputs)`` with their non-finite elements zeroed where the adapter's output is
    non-finite exactly where the mutant's is (NaN for NaN, +inf for +inf, -inf for -inf); None
    where the patterns differ.  Outputs without non-finite mutant elements are passed unchanged,
    so a NaN the mutant does not produce still fails the comparison."""
    m_out, a_out = dict(mut), dict(outputs)
    for n, m in mut.items():
        if n not in outputs or not np.issubdtype(m.dtype, np.floating):
            continue
        bad = ~np.isfinite(m)
        if not bad.any():
            continue
        a = np.asarray(outputs[n])
        if a.shape != m.shape or not np.issubdtype(a.dtype, np.floating):
            return None
        a = a.astype(np.float64)
        if not np.array_equal(~np.isfinite(a), bad):
            return None
        inf = bad & ~np.isnan(m)
        if not (np.array_equal(np.isnan(a), np.isnan(m)) and np.array_equal(a[inf], m[inf])):
            return None
        m_out[n], a_out[n] = np.where(bad, 0.0, m), np.where(bad, 0.0, a)
    return m_out, a_out


def _candidates(spec: Spec, case, form: Optional[str] = None) -> list:
    """The divergences a diagnosis of ``case`` considers: every one whose mutant has a form for
    the case's operation, whatever clause it violates (a precision bug of the RoPE angles shows
    in a SCALE-* case, or in a multi-call ``rope.cos_sin_calls`` case, as well) or, for outputs that came through
    call form ``form``, for that form."""
    forms = registry.mutants()
    ops = {case.op, form} - {None}
    return [d for d in spec.current_divergences.values() if ops & set(forms.get(d.mutant, {}))]


def diagnose(spec: Spec, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Match]:
    """Known divergences whose mutant reproduces ``outputs`` within tolerance, best first.

    Considers every divergence whose mutant has a form for the case's operation.
    """
    found = []
    for d in _candidates(spec, golden.case, golden.form):
        try:
            m = _match(d, golden, outputs, dtype)
        except Exception:  # noqa: BLE001 - the diagnosis never raises: a mutant that cannot judge does not match
            continue
        if m is not None:
            found.append(m)
    return sorted(found, key=lambda m: m.ratio)


def diagnose_shapes(spec: Spec, op: str, params, inputs: dict, outputs: dict[str, np.ndarray], dtype: str) -> list[Match]:
    """Known divergences whose mutant gives outputs of exactly the shapes the adapter returned where
    they are not the operation table's (a rotary width rounded up: inv_freq one element longer), and
    reproduces them within the tolerance rule at the mutant run's own error scales; best first.  Only
    a mutant that is the reference run at other parameters (it carries its scales) can be judged so:
    the case's scales are of the table's shapes."""
    from posenc.registry.cases import Case
    case = Case("shape", op, (), params, {})
    found = []
    for d in _candidates(spec, case):
        try:
            fn = registry.mutants()[d.mutant][op]
            mut = fn(params, inputs, dtype)
            if mut is None or not own_scales(mut) or set(outputs) - set(mut):
                continue
            arrays = {n: np.asarray(v) for n, v in mut.items()}
            if any(np.shape(arrays[n]) != np.shape(v) for n, v in outputs.items()):
                continue
            ds, an, acc = ({n: np.broadcast_to(np.asarray(v, np.float64), arrays[n].shape) for n, v in t.items()}
                           for t in scale_terms(own_scales(mut)))
            g = Golden(case, dict(inputs), arrays, ds, an, registry.operation(op).eps_floor_float32, acc)
            masked = same_non_finite({n: arrays[n] for n in outputs}, outputs)
            if masked is None:
                continue
            cmp = compare_outputs(replace(g, outputs={**arrays, **masked[0]}), masked[1], dtype)
        except Exception:  # noqa: BLE001 - the diagnosis never raises: a mutant that cannot judge does not match
            continue
        if cmp and all(c.ok for c in cmp):
            found.append(Match(d.id, tuple(d.violates), d.description, max(c.ratio for c in cmp)))
    return sorted(found, key=lambda m: m.ratio)


def shape_error_diagnosis(spec: Spec, e, dtype: str) -> tuple[str, list[Match]]:
    """A :class:`~posenc.harness.runner.OutputShapeError`'s failure line and :func:`diagnose_shapes`' matches
    (the golden, invariant and generated tests say the same: the shape, and that a known divergence gives it)."""
    matches = diagnose_shapes(spec, e.op, e.params, e.inputs, e.outputs, dtype)
    detail = f"{type(e).__name__}: {exception_text(e)}"
    return (f"{detail}: the shape (and values) a known divergence gives" if matches else detail), matches


@dataclass(frozen=True)
class CallsDiagnosis:
    """:func:`diagnose_calls`' verdict: ``goldens`` (the reference on each call), ``wrong`` (the
    indices of the calls whose outputs are out of tolerance of the reference), ``first_bad`` (the
    out-of-tolerance messages of the first of them), ``matches`` (the divergences reproducing
    every call, best first)."""
    goldens: tuple
    wrong: tuple[int, ...]
    first_bad: tuple[str, ...]
    matches: tuple[Match, ...]


def diagnose_calls(spec: Spec, case, calls: list[Call], dtype: str) -> Optional[CallsDiagnosis]:
    """Diagnose an oracle-free check's failure on the operation calls it made (``calls``,
    recorded by :func:`recording`): the reference's golden of each call, which calls are out of
    its tolerance, and the known divergences whose mutant reproduces the outputs of *every*
    call (each within tolerance, as :func:`diagnose`) and differs from the reference on at least
    one.  None when there is nothing to judge (no call, or the reference cannot compute one).
    Never raises."""
    try:
        goldens = tuple(dataclasses.replace(computed(dataclasses.replace(case, op=c.op, params=c.params, inputs={}),
                                                     c.inputs), form=getattr(c, "form", None))
                        for c in calls)
        bad = [[x.message for x in compare_outputs(g, c.outputs, dtype) if not x.ok] for g, c in zip(goldens, calls)]
    except Exception:  # noqa: BLE001 - a call the reference cannot judge: no diagnosis
        return None
    wrong = tuple(i for i, b in enumerate(bad) if b)
    if not goldens:
        return None
    found = []
    candidates = {d.id: d for g in goldens for d in _candidates(spec, g.case, g.form)} if wrong else {}
    for d in candidates.values():
        ratios, differs = [], False
        for g, c in zip(goldens, calls):
            try:  # where the mutant has no form for a call's operation, the call must be the reference's
                r = _reproduction(d, g, c.outputs, dtype, reference_where_no_form=True)
            except Exception:  # noqa: BLE001 - a mutant that cannot judge does not match
                r = None
            if r is None:
                break
            ratios.append(r[0])
            differs = differs or r[1]
        else:
            if differs:
                found.append(Match(d.id, tuple(d.violates), d.description, max(ratios)))
    return CallsDiagnosis(goldens, wrong, tuple(bad[wrong[0]]) if wrong else (),
                          tuple(sorted(found, key=lambda m: m.ratio)))


def mutant_outputs(d, golden: Golden, dtype: str) -> Optional[dict[str, np.ndarray]]:
    """What divergence ``d``'s mutant gives on ``golden``'s case, or None where it has no form
    for that case (or raises there)."""
    try:
        forms = registry.mutants().get(d.mutant, {})
        if golden.form in forms:  # the form's own bug: run in the form, converted back
            out = _through_form(forms[golden.form], golden, dtype)
        else:
            fn = forms.get(golden.case.op)
            out = None if fn is None else fn(golden.case.params, golden.inputs, dtype)
    except Exception:  # noqa: BLE001 - a mutant that cannot run on this case
        return None
    if out is None:
        return None
    arrays = {n: np.asarray(v) for n, v in out.items()}
    return ReferenceOutputs(arrays, out.scales) if isinstance(out, ReferenceOutputs) else arrays


def _through_form(fn, golden: Golden, dtype: str) -> Optional[dict]:
    """A form mutant's outputs on ``golden``'s case put in the form ``golden.form``, in the primary's layout."""
    f = form_of(golden.form)
    x = f.to_form(golden.case.params, golden.inputs)
    if isinstance(x, str):
        return None
    out = fn(golden.case.params, x, dtype)
    if out is None:
        return None

    def convert(o: dict) -> dict:
        return f.outputs_to_primary(golden.case.params, x, o, golden.inputs)
    return ReferenceOutputs(convert(dict(out)), lambda: convert_scales(own_scales(out), convert))


def seen_through(goldens, ops) -> list[tuple[Golden, tuple[str, ...]]]:
    """``(golden, clauses)`` for each of ``goldens`` whose operation is in ``ops``, and for each put through a
    call form in ``ops`` (``golden.form`` set: a form's mutant runs in the form), with the clauses its test is
    marked with (the case's, or the form's own: ROPE-CALL-FORM)."""
    out = []
    for g in goldens:
        if g.case.op in ops:
            out.append((g, tuple(g.case.clauses)))
        for f in forms_of(g.case.op):
            if f.op in ops and f.why_not(g.case.params, g.inputs) is None:
                out.append((replace(g, form=f.op), form_clauses(f.op)))
    return out


def separating_case(spec: Spec, a: str, b: str, goldens: list[Golden], dtype: str) -> Optional[str]:
    """The first of ``goldens`` on which divergences ``a`` and ``b`` can be told apart whichever of
    the two it is: one's mutant output at least is caught there (out of tolerance of the reference),
    and neither's caught output is reproduced by the other's mutant (a case where ``b`` reproduces
    ``a``'s output says nothing to an adapter with ``a``'s bug, though ``a`` does not reproduce
    ``b``'s); None when no golden tells them apart."""
    da, db = spec.divergences[a], spec.divergences[b]
    for g in goldens:
        caught = [(y, caught_outputs(x, g, dtype)) for x, y in ((da, db), (db, da))]
        if any(out is not None for _, out in caught) and \
                all(out is None or _match(y, g, out, dtype) is None for y, out in caught):
            return g.case.id
    return None


def caught_outputs(d, golden: Golden, dtype: str) -> Optional[dict[str, np.ndarray]]:
    """``d``'s mutant outputs on ``golden`` when the golden catches them (a form of the golden's
    shapes, out of the reference's tolerance somewhere); None otherwise."""
    out = mutant_outputs(d, golden, dtype)
    if out is None or any(np.shape(out.get(n)) != v.shape for n, v in golden.outputs.items()
                          if not n.endswith(".compared")):
        return None
    try:
        caught = not all(c.ok for c in compare_outputs(golden, out, dtype))
    except Exception:  # noqa: BLE001 - an output the comparison cannot judge says nothing
        return None
    return out if caught else None


def _match(d, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> Optional[Match]:
    """``d``'s match when its mutant reproduces ``outputs`` on this case within tolerance, else None."""
    r = _reproduction(d, golden, outputs, dtype, differing=True)
    if r is None:  # not reproduced, or indistinguishable from the reference on this case
        return None
    return Match(d.id, tuple(d.violates), d.description, r[0])


def _reproduction(d, golden: Golden, outputs: dict[str, np.ndarray], dtype: str, differing: bool = False,
                  reference_where_no_form: bool = False) -> Optional[tuple[float, bool]]:
    """``(max |err|/bound, differs)`` when ``d``'s mutant reproduces ``outputs`` on this case
    within tolerance (``differs``: the mutant's outputs are not the reference's), else None;
    ``differing``: None as well when the mutant's outputs are the reference's;
    ``reference_where_no_form``: a mutant without a form for the case's operation gives the
    reference's outputs there (as :class:`~posenc.adapters.reference_adapter.MutantAdapter` does)."""
    mut = mut_run = mutant_outputs(d, golden, dtype)
    if mut is None and reference_where_no_form:
        mut = {n: v for n, v in golden.outputs.items() if not n.endswith(".compared")}
    if mut is None:
        return None
    if any(np.shape(mut[n]) != golden.outputs[n].shape for n in mut if n in golden.outputs):
        return None  # a mutant of another shape (a form that does not apply to this case) cannot match
    differs = not all(np.array_equal(np.asarray(mut[n]), golden.outputs[n]) for n in mut if n in golden.outputs)
    if differing and not differs:
        return None
    # A mutant that overflows gives inf/NaN: it matches only where the output's non-finite
    # elements are exactly the mutant's (same NaN / +inf / -inf pattern); the finite ones are
    # compared under the tolerance as usual.
    masked = same_non_finite(mut, outputs)
    if masked is None:
        return None
    mut, outs = masked
    # A mutant may compute where the reference copies (e.g. a rotated tail): widen the scales to
    # the mutant's own magnitudes, to the row's largest angle term and, for a mutant that is the
    # reference run at other parameters or inputs, to that run's own scales (a pairing swap rounds
    # each element with the other pair's norm) -- only at the elements where the mutant's output is
    # not the reference's.  Where they are equal the reference's tolerance stands, so an error there
    # (a pass-through tail off by one ulp) is never explained by a divergence that changes other
    # elements.
    def differing(n):
        return np.asarray(mut[n]) != np.asarray(golden.outputs[n]) if n in golden.outputs else True

    own_ds, own_an, _ = scale_terms(own_scales(mut_run))

    def own(terms, n, v):
        try:
            return np.broadcast_to(np.asarray(terms.get(n, 0.0), np.float64), np.shape(v))
        except ValueError:  # the run's scales are of another shape: no widening from them
            return 0.0

    ds = {n: np.where(differing(n), np.maximum(np.maximum(v, np.abs(mut[n])), own(own_ds, n, v)), v)
          for n, v in golden.dtype_scales.items() if n in mut}
    cmp, verdict = widened_comparison(golden, mut, outs, ds, differing, dtype, lambda n, v: own(own_an, n, v))
    return (max(c.ratio for c in cmp), differs) if verdict == "match" else None


def widened_comparison(golden: Golden, mut: dict, outs: dict, ds: dict, where, dtype: str,
                       own_angle=lambda n, v: 0.0) -> tuple[list, str]:
    """``(comparisons, verdict)`` of ``outs`` against a candidate's outputs ``mut`` (a mutant's, an inferred
    model's) under the dtype scales ``ds`` and the golden's angle scales widened, at the elements ``where(name)``
    selects, to the row's largest angle term and ``own_angle(name, scales)`` (the candidate run's own): verdict
    ``"match"`` (within tolerance, and some element the adapter gets wrong checkable under those bounds:
    :func:`explains_a_checkable_element`), ``"fails"`` (out of tolerance) or ``"vacuous"``.  At long positions
    the row's largest angle term makes every widened bound reach the element's whole range: the candidate is
    then judged again without that widening (each element's own angle term), where the elements the adapter
    gets wrong are still checkable.  The one rule of the diagnosis's and the inference's matches."""
    cmp: list = []
    for row in (True, False):
        an = {n: np.where(where(n), np.maximum(np.maximum(v, v.max(axis=-1, keepdims=True)) if row else v,
                                               own_angle(n, v)), v) if np.ndim(v) else v
              for n, v in golden.angle_scales.items() if n in mut}
        cmp = compare_outputs(replace(golden, outputs=mut, dtype_scales=ds, angle_scales=an), outs, dtype)
        if not all(c.ok for c in cmp):
            return cmp, "fails" if row else "vacuous"
        if explains_a_checkable_element(golden, outs, ds, an, dtype):
            return cmp, "match"
    return cmp, "vacuous"


def explains_a_checkable_element(golden: Golden, outs: dict, ds: dict, an: dict, dtype: str) -> bool:
    """Some element where ``outs`` fails the golden is checkable under the widened scales a mutant is matched
    with (``spec.tolerance.not_checkable``): else the match says nothing -- at long positions the widening to
    the row's largest angle term makes every differing element's bound reach its whole range, and any mutant
    would "reproduce" any output there (a kernel that ignores its positions matched DIV-ROPE-THETA-DEFAULT at
    2**31).  Where no element fails the golden (a check's own comparison), nothing is decided here."""
    bad_any = False
    for n, ref in golden.outputs.items():
        if n.endswith(".compared") or n not in outs or n not in ds or n not in an:
            continue
        y, g = np.asarray(outs[n], np.float64), np.asarray(ref, np.float64)
        if y.shape != g.shape or not np.issubdtype(g.dtype, np.floating):
            continue
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(y - g) <= golden.bound(n, dtype))
        mask = golden.outputs.get(f"{n}.compared")
        if mask is not None:
            bad &= np.broadcast_to(np.asarray(mask, bool), bad.shape)
        if not bad.any():
            continue
        bad_any = True
        vacuous = np.broadcast_to(not_checkable(dtype, np.broadcast_to(ds[n], g.shape), np.broadcast_to(an[n], g.shape),
                                                golden.angle_based), g.shape)
        if (bad & ~vacuous).any():
            return True
    return not bad_any
