"""Generated cases: every operation checked on inputs no adapter can have memorised (the engine).

Each operation with a registered generator (``@posenc.families.generator(op)``, in the family
modules ``posenc.families.<family>_generated``) gets the test ``test_generated[<dtype>-<op>@...]``:
Hypothesis draws cases -- parameters from the spec's declared domains (``parameters:`` of the
family files), shapes from a small set (so compiled adapters see few distinct shapes), positions
anywhere in range (near powers of two, above 65504, near a table's end), float inputs from the
example's seed -- the reference is computed on the fly and compared under the same tolerance
rule as the goldens, with the same diagnosis.

* deterministic (the same examples on every run, other ones per dtype); ``--posenc-seed N`` draws others,
  ``--posenc-examples N`` sets how many per operation and dtype (default
  :data:`DEFAULT_EXAMPLES`; 0 disables generated cases);
* a failure is shrunk to a minimal case, printed as a Python snippet that replays it
  (:func:`posenc.conformance.generated.replay`) and with the pytest command that reruns the test;
* an example the adapter reports unsupported is counted, never a pass, and another is drawn in
  its place; after :data:`GIVE_UP_AFTER` unsupported draws with one reason (or
  :data:`GIVE_UP_AFTER_VARIED` with several) and none checked the test stops drawing and is
  unsupported, with the reasons;
* a failure is excused only when its diagnosis names the divergence an expectation line records
  for one of its clauses at its dtype (``excuse_generated`` of the expectation file); excused
  examples are not shrunk and the test reports the expected divergence.

The draw helpers are :mod:`posenc.harness.generators` (the generator author's façade); the pytest
test that runs this engine is the suite's (:mod:`posenc.conformance.generated`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import unittest
from collections import Counter
from typing import TYPE_CHECKING, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from posenc import registry
from posenc.spec.errors import Unsupported, exception_text

from posenc.harness import golden as _golden
from posenc.harness.diagnosis import diagnose, shape_error_diagnosis
from posenc.harness.failure import is_timeout
from posenc.harness.remote import RemoteCrash
from posenc.harness.runner import OutputShapeError, compare_outputs, note_not_checkable, run_case, run_in_form
from posenc.registry.cases import Case, Gen
from posenc.registry.forms import form_clauses

if TYPE_CHECKING:
    from posenc.adapters import Adapter

DEFAULT_EXAMPLES = 6
SEEDS = st.integers(0, 2 ** 32 - 1)
#: Unsupported draws, with none checked, after which a generated test stops drawing: 40 when they
#: all give one reason (the adapter lacks the operation, or one whole mode of it), else 200 (the
#: reasons depend on the drawn parameters: some draw may be supported; Hypothesis itself would
#: stop after about 460).
GIVE_UP_AFTER = 40
GIVE_UP_AFTER_VARIED = 200


class Stopped(unittest.SkipTest):
    """An example ran into --posenc-timeout: the engine stops at once (a hung adapter is not
    called again to shrink the case)."""


class Crashed(unittest.SkipTest):
    """The adapter's process died (or was ended) on an example: the engine stops at once -- a
    replay or a shrink would crash it again, and each crash costs one of the run's crash credits.
    ``failure``: the :class:`GeneratedFailure` of that (unshrunk) example."""

    def __init__(self, failure: "GeneratedFailure"):
        super().__init__(failure.detail)
        self.failure = failure


# ---- running ----------------------------------------------------------------------------------


def example_golden(c: Case, seed: int, dtype: Optional[str] = None) -> _golden.Golden:
    """The reference outputs and error scales of a generated case, computed now; at ``dtype``
    float32 / float64 on full-precision inputs rounded to it (``golden.case_inputs``)."""
    return _golden.computed(c, _golden.case_inputs(c, seed, dtype))


class GeneratedFailure(Exception):
    """One generated example failed (an ``Exception``, so Hypothesis shrinks it)."""

    def __init__(self, c: Case, seed: int, detail: str, matches=(), raised: bool = False, inferred=()):
        super().__init__(detail)
        self.case, self.seed, self.detail = c, seed, detail
        self.matches, self.raised, self.inferred = tuple(matches), raised, tuple(inferred)

    #: the report's one-line reason where it is not the detail's first line (a crash: without the
    #: worker's output), and whether the example was shrunk (a crash ends the search unshrunk)
    reason: Optional[str] = None
    shrunk = True
    #: the clauses the failure is counted under where not the case's (a call form's own failure: ROPE-CALL-FORM)
    clauses: Optional[tuple[str, ...]] = None


def check_example(adapter: Adapter, c: Case, seed: int, dtype: str, device: str, excuse=None) -> str:
    """Run one generated example; returns ``passed``, ``unsupported:<reason>`` or ``excused:<ID>``;
    raises :class:`GeneratedFailure` on any other outcome.

    ``excuse(clauses, dtype, divergences, case=, inferred=)``: the expectation line that excuses a
    failure on the values, or None; where it has an ``observe(case, dtype, verdict)`` method, it is
    told every verdict (``passed``, ``excused:<ID>``, ``failed``; not unsupported draws), so a line's
    coverage can be counted."""
    verdict, seen = "failed", [c]
    try:
        verdict = _check_example(adapter, c, seed, dtype, device, excuse, seen)
        return verdict
    finally:
        observe = getattr(excuse, "observe", None)
        if observe is not None and not verdict.startswith("unsupported:"):
            observe(seen[0], dtype, verdict)  # the example as it ran: through a call form, that form's operation


def through(c: Case, form: Optional[str]) -> Case:
    """``c`` as run through call form operation ``form`` (its ``op`` the form's): what an expectation line's
    ``forms:`` condition is judged on (:func:`posenc.conformance.expectation_keys.seen_as`)."""
    return c if form is None else dataclasses.replace(c, op=form)


def example_form(adapter: Adapter, g, seed: int) -> Optional[str]:
    """The call form a generated example runs through: one of the forms of its operation the adapter
    serves (``call_forms``) that the example can be put in, chosen by the example's seed among those and
    the primary (None) -- the examples are shared across the forms, never multiplied."""
    return choose_form(adapter, g.case.op, g.case.params, g.inputs, seed)


def form_candidates(adapter: Adapter, op: str, params, inputs: dict) -> list[Optional[str]]:
    """The primary (None) and the call forms of ``op`` the adapter serves (``call_forms``) that ``inputs`` can
    be put in, in the operation table's order.  ``inputs`` need hold only what the forms' ``reads`` name."""
    from posenc.registry.forms import forms_of
    served = set(getattr(adapter, "call_forms", ()) or ())
    return [None] + [f.op for f in forms_of(op) if f.op in served and f.why_not(params, inputs) is None]


def choose_form(adapter: Adapter, op: str, params, inputs: dict, pick: int) -> Optional[str]:
    """Entry ``pick`` (modulo their number) of :func:`form_candidates`: the one form a shared example runs
    through."""
    forms = form_candidates(adapter, op, params, inputs)
    return forms[pick % len(forms)]


def spread_forms(candidates: dict[str, list[Optional[str]]], pick: dict[str, int]) -> dict[str, Optional[str]]:
    """One form per case (``candidates``: case ID -> :func:`form_candidates`) such that the forms are spread
    over the cases: each case, the most constrained first, takes among its candidates the one used least so
    far, a rarer one (fewer cases can take it) first on a tie, then entry ``pick[case]`` of the tied ones --
    so a form some case can be put in is used by at least one (an offset form only a few single-row cases
    take is not left to chance), and no form is used much more than another."""
    can_take = {}
    for forms in candidates.values():
        for f in forms:
            can_take[f] = can_take.get(f, 0) + 1
    used = dict.fromkeys(can_take, 0)
    out: dict[str, Optional[str]] = {}
    for cid in sorted(candidates, key=lambda c: (len(candidates[c]), c)):
        forms = candidates[cid]
        best = min((used[f], can_take[f]) for f in forms)
        tied = [f for f in forms if (used[f], can_take[f]) == best]
        out[cid] = f = tied[pick[cid] % len(tied)]
        used[f] += 1
    return out


def _check_example(adapter: Adapter, c: Case, seed: int, dtype: str, device: str, excuse=None, seen=None) -> str:
    g = example_golden(c, seed, dtype)
    try:
        form = example_form(adapter, g, seed)
        if seen is not None:
            seen[0] = through(c, form)
        out = run_case(adapter, g, dtype, device) if form is None else run_in_form(adapter, g, form, dtype, device)
    except OutputShapeError as e:  # a shape a known divergence gives is judged as its values
        detail, matches = shape_error_diagnosis(registry.spec(), e, dtype)
        if not matches:
            raise GeneratedFailure(c, seed, detail, raised=True) from None
        return _judged(c, seed, dtype, excuse, detail, matches, (), seen=through(c, form))
    except Unsupported as e:
        return f"unsupported:{e.reason}"
    except pytest.fail.Exception as e:
        if is_timeout(e):  # stop, never shrink
            raise Stopped(str(e.msg)) from None
        raise GeneratedFailure(c, seed, f"the adapter raised pytest's {type(e).__name__} ({exception_text(e)})", raised=True) from None
    except KeyboardInterrupt:
        raise
    except RemoteCrash as e:  # the adapter's process died: never called again on this test's examples
        failure = GeneratedFailure(c, seed, f"{type(e).__name__}: {exception_text(e)}", raised=True)
        failure.reason = f"{type(e).__name__}: {e.summary or exception_text(e)}"
        failure.shrunk = False
        raise Crashed(failure) from None
    except BaseException as e:  # noqa: BLE001 - every other exception is a failure, reported precisely
        raise GeneratedFailure(c, seed, f"{type(e).__name__}: {exception_text(e)}", raised=True) from None
    cmps = compare_outputs(g, out, dtype)
    bad = [r for r in cmps if not r.ok]
    if not bad:
        try:
            note_not_checkable(c.id, cmps, dtype)
        except Unsupported as e:  # no element checkable at this dtype: redrawn, never a pass
            return f"unsupported:{e.reason}"
        return "passed"
    primary_g = g
    if form is not None:
        g = dataclasses.replace(g, form=form)
    matches = diagnose(registry.spec(), g, out, dtype)
    inferred = _infer(g, out, dtype) if not matches else ()
    detail = (f"through {form}: " if form else "") + "\n  ".join(r.message for r in bad)
    own = form is not None and _primary_passes(adapter, primary_g, dtype, device)
    if own:  # the form's own failure (as a golden's: harness.failure.as_form_failure): counted under its clauses
        clauses = form_clauses(form)
        matches = [dataclasses.replace(m, violates=clauses) for m in matches]
        detail += (f"\n  {c.op} passes this example: the failure is {form}'s own ({', '.join(clauses)})")
    return _judged(c, seed, dtype, excuse, detail, matches, inferred, (g, out), seen=through(c, form),
                   clauses=form_clauses(form) if own else None)


def _primary_passes(adapter: Adapter, g, dtype: str, device: str) -> bool:
    """The example passes through its primary operation (the failure path of an example run through a form)."""
    try:
        return all(r.ok for r in compare_outputs(g, run_case(adapter, g, dtype, device), dtype))
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - unsupported, raising or crashing there: not the form's alone
        return False


def _judged(c: Case, seed: int, dtype: str, excuse, detail: str, matches, inferred, plot_data=None, seen=None,
            clauses=None) -> str:
    """A failing example's verdict: ``excused:<ID>`` by the line that explains it, else the failure raised.
    ``seen``: the example as it ran (:func:`through` its call form), what the lines' ``forms:`` are judged on;
    ``clauses``: the clauses the failure is counted under where not the case's (a call form's own failure)."""
    hit = {v for m in matches for v in m.violates}
    own = set(clauses) if clauses is not None else set(c.clauses)
    entry = excuse(own | hit, dtype, tuple(m.divergence for m in matches), case=seen or c,
                   inferred=inferred) if excuse else None
    if entry is not None:
        return f"excused:{entry.divergence}"
    failure = GeneratedFailure(c, seed, detail, matches, inferred=inferred)
    failure.plot_data = plot_data  # --plot-dir: the shrunk example's golden and outputs
    failure.clauses = tuple(clauses) if clauses is not None else None
    raise failure


def _infer(g, out, dtype) -> tuple[str, ...]:
    try:
        from posenc.harness import inference
    except ImportError:
        return ()
    try:
        return tuple(inference.infer(g, out, dtype))
    except Exception:  # noqa: BLE001 - an inference never hides the failure
        return ()


@functools.lru_cache(maxsize=None)
def _strategy(op: str):
    """``(case, seed)`` of ``op``'s generator: built once per operation (Hypothesis inspects a
    strategy's function source when it is built)."""
    gen = registry.generators()[op]

    def draw_case(draw):
        return gen(draw)
    return st.tuples(st.composite(draw_case)(), SEEDS)


def explore(op: str, dtype: str, n: int, chosen: Optional[int], visit) -> None:
    """Call ``visit((case, seed))`` on the ``n`` examples the suite draws for ``op`` at ``dtype``.

    Deterministic: the Hypothesis seed is a hash of the operation, the dtype and ``chosen``
    (``--posenc-seed``, default 0), so every run draws the same examples and each dtype others.
    An exception ``visit`` raises is shrunk by Hypothesis and re-raised for the minimal example."""
    strategy = _strategy(op)

    def one(example):
        visit(example)

    # report_multiple_bugs=False: two different failures of one operation (an exception on one
    # branch, wrong values on another) are one failure, the first found, shrunk -- never an
    # ExceptionGroup that no report could read
    run = settings(max_examples=n, database=None, deadline=None, report_multiple_bugs=False,
                   suppress_health_check=list(HealthCheck), print_blob=False,
                   phases=(Phase.explicit, Phase.generate, Phase.shrink))(given(strategy)(one))
    with _no_local_constants():
        hypothesis_seed(_golden._fnv1a64(f"{op}|{dtype}|{chosen or 0}"))(run)()


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis (6.170, pinned) biases draws towards literals found in the *local* modules
    loaded in the process (``providers._get_local_constants``): the drawn cases would depend on
    which of the kit's, the adapter's or the tests' modules happen to be imported (importing
    ``posenc.hf.config`` changed 1 of 300 ``rope.cos_sin_calls`` cases).  The suite's draws
    must be a function of the operation, the dtype and ``--posenc-seed`` only, so the pool is
    empty while the suite explores (only Hypothesis's global constants remain)."""
    from hypothesis.internal.conjecture import providers
    original = providers._get_local_constants  # noqa: SLF001 - the pinned version's hook
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty  # noqa: SLF001
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original  # noqa: SLF001
        providers.CONSTANTS_CACHE.cache.clear()


def drawn_examples(op: str, dtype: str, n: int = DEFAULT_EXAMPLES, chosen: Optional[int] = None) -> list[tuple[Case, int]]:
    """The examples a run at ``dtype`` with ``--posenc-examples n`` (``--posenc-seed chosen``) checks."""
    out: list = []
    explore(op, dtype, n, chosen, out.append)
    return out


class Outcomes(Counter):
    """Verdict counts of a generated test (``passed``, ``unsupported:<reason>``, ``excused:<ID>``)
    and ``by_clause``: per clause of the drawn cases, the verdict kinds its examples got -- a
    clause only unsupported draws reached is not credited with the others' passes."""

    def __init__(self):
        super().__init__()
        self.by_clause: dict[str, Counter] = {}

    def add(self, verdict: str, clauses) -> None:
        self[verdict] += 1
        for cl in clauses:
            self.by_clause.setdefault(cl, Counter())[verdict.split(":", 1)[0]] += 1


# ---- replay -----------------------------------------------------------------------------------


def params_repr(p) -> str:
    """``Model(field=value, ...)`` with the fields that differ from the defaults (valid Python)."""
    d = p.model_dump(exclude_defaults=True)
    body = ", ".join(f"{k}={_value_repr(getattr(p, k))}" for k in d)
    return f"{type(p).__name__}({body})"


def _value_repr(v) -> str:
    if hasattr(v, "model_dump"):
        return params_repr(v)
    return repr(v)


def _input_repr(v) -> str:
    if isinstance(v, Gen):
        return repr(v)
    if isinstance(v, (int, np.integer)):
        return repr(int(v))
    a = np.asarray(v)
    return f"np.array({a.tolist()!r}, dtype=np.{a.dtype})"


def replay_snippet(c: Case, seed: int, adapter: str, dtype: str, device: str) -> str:
    models = {type(c.params).__name__}
    if hasattr(c.params, "rope") and hasattr(c.params.rope, "model_dump"):
        models.add(type(c.params.rope).__name__)
    inputs = ", ".join(f"{k!r}: {_input_repr(v)}" for k, v in c.inputs.items())
    return "\n".join([
        "import numpy as np",
        "from posenc.families import Case, Gen",
        "from posenc.conformance.generated import replay",
        f"from posenc.spec.models import {', '.join(sorted(models))}",
        f"case = Case({c.id!r}, {c.op!r}, {c.clauses!r}, {params_repr(c.params)},",
        f"            {{{inputs}}})",
        f"print(replay(case, seed={seed}, adapter={adapter!r}, dtype={dtype!r}, device={device!r}))",
    ])


