"""A conformance failure: its message, the clauses it violates, its diagnosis; calling an adapter.

:func:`fail` raises :class:`ConformanceFailure` with a header naming the clauses, adapter, case and
dtype; :func:`assert_conforms` compares outputs with a golden and fails with the worst element, the
known divergences that reproduce them (:mod:`posenc.harness.diagnosis`) or what they are
(:mod:`posenc.harness.inference`); :func:`call_adapter` turns anything an adapter raises, but
``Unsupported``, into a failure naming where it was raised.  Checks use these through
:mod:`posenc.harness.checks`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import traceback
from typing import TYPE_CHECKING, Callable, Iterable, Optional

import numpy as np
import pytest

from posenc import registry
from posenc.spec.errors import AdapterError, Unsupported, exception_text

from posenc.harness import golden as _golden
from posenc.harness.diagnosis import caught_outputs, diagnose, diagnose_calls, separating_case, shape_error_diagnosis
from posenc.harness.failure_plots import PlotData
from posenc.harness.inference import flat_params, infer
from posenc.harness.remote import RemoteFailure
from posenc.harness.runner import (OutputShapeError, compare_outputs, note_not_checkable, run_case, run_in_form,
                                   through_form)
from posenc.registry import all_cases
from posenc.registry.cases import Case
from posenc.registry.forms import SENTINEL, form_clauses

if TYPE_CHECKING:  # the adapter contract, for the annotations only (the harness sits below the adapters)
    from posenc.adapters import Adapter


def invariant_clauses(invariant: str) -> set[str]:
    """The clauses that declare oracle-free property ``invariant`` (``cache_prefill``, ...)."""
    return {c.id for c in registry.spec().clauses.values() if invariant in c.invariants}


@functools.lru_cache(maxsize=None)
def _manifest(directory):
    return _golden.read_manifest(directory)


@functools.lru_cache(maxsize=None)  # each golden is verified once per process (~110 MB for all of them)
def load_golden(case_id: str) -> _golden.Golden:
    case = next(c for c in all_cases() if c.id == case_id)
    directory = _golden.golden_dir(case)
    return _golden.load(case, directory, manifest=_manifest(directory))


def require_dtype(adapter: Adapter, dtype: str) -> None:
    if dtype not in adapter.dtypes:
        raise Unsupported(f"adapter {adapter.name!r} does not support dtype {dtype}")


class ConformanceFailure(pytest.fail.Exception):
    """A conformance test failed; carries the clauses it violates and the diagnosed divergences.

    ``violated`` is what the summary counts the failure under: the clauses the test checks that
    the matched divergences violate; else those of the case's clauses (``case_clauses``) the
    closest match violates; else, when they violate only clauses neither lists (bf16 angles in a pairing case:
    ROPE-PRECISION), those; with no diagnosis, the test's clauses.  ``raised``: the
    adapter raised or returned a malformed output (no verdict on the values, so never an
    expected divergence).
    """

    #: the call form operation whose own failure this is (the primary passes: :func:`as_form_failure`), or None
    form: Optional[str] = None

    def __init__(self, msg: str, clauses: Iterable[str], matches: tuple = (), raised: bool = False,
                 inferred: Iterable[str] = (), reason: Optional[str] = None, diagnosed: bool = False,
                 case_clauses: Iterable[str] = ()):
        super().__init__(msg, pytrace=False)
        #: the outputs were compared with the reference and its mutants (a golden, a decode step,
        #: a generated example, or an oracle-free check's own calls): no second diagnosis
        self.diagnosed = diagnosed or bool(matches) or raised
        #: what is wrong, in one line (the report's ``reason``): the first output out of tolerance,
        #: the exception, the crash -- never a context line such as "decode step 3"
        self.reason = (reason or msg).strip().split("\n", 1)[0]
        self.clauses = tuple(clauses)
        self.matches = tuple(matches)
        self.raised = raised
        self.inferred = tuple(inferred)  # what the output is, when no divergence reproduces it
        self.divergences = tuple(m.divergence for m in matches)
        hit = tuple(dict.fromkeys(c for m in matches for c in m.violates))
        # the test's clauses the matches violate; else the case's clauses the closest match
        # violates (a sign flip seen by a ROPE-ANGLE check of a half-pairing case: ROPE-PAIR-HALF,
        # not every pairing's clause); else all the matches violate, the closest match's first
        best = tuple(c for c in matches[0].violates if c in tuple(case_clauses)) if matches else ()
        self.violated = tuple(c for c in self.clauses if c in hit) or best or hit or self.clauses

    #: the values the failure was judged on (``failure_plots.PlotData``: golden, outputs, dtype) for
    #: ``--plot-dir``; None for a failure without compared values (an exception, a malformed output)
    plot_data = None
    #: the failing case's parameters, ``{dotted path: value}`` (a generated test's: the drawn
    #: example's), for the report's ``params``; None when the failure has no case
    params = None


def fail(clauses: Iterable[str], adapter: Adapter, case: Case, dtype: str, detail: str, matches=(),
         raised: bool = False, inferred: Iterable[str] = (), reason: Optional[str] = None,
         diagnosed: bool = False, plot_data=None) -> None:
    """Fail a conformance test with a header naming the clauses, adapter, case and dtype;
    ``reason``: what is wrong in one line, when ``detail`` starts with context (else its first line);
    ``diagnosed``: the outputs were compared with the reference (see :func:`rediagnosed`);
    ``plot_data``: the compared values, for ``--plot-dir`` (:mod:`posenc.harness.failure_plots`)."""
    clauses = tuple(clauses)
    lines = [f"{', '.join(clauses)}: {adapter.name} fails case {case.id} ({dtype})", f"  {detail}"]
    lines += diagnosis_lines(case, matches, dtype, adapter)
    e = ConformanceFailure("\n".join(lines), clauses, matches, raised, inferred, reason or detail, diagnosed,
                           case.clauses)
    e.plot_data = plot_data
    e.params = _plain_params(case)
    raise e


def _plain_params(case: Case) -> Optional[dict]:
    """``case``'s parameters as ``{dotted path: value}`` of JSON values (None where they are not)."""
    try:
        flat = flat_params(case.params)
        json.dumps(flat, allow_nan=False)
        return flat
    except Exception:  # noqa: BLE001 - parameters of an adapter-made case the report cannot hold
        return None


def diagnosis_lines(case: Case, matches, dtype: str, adapter: Optional[Adapter] = None) -> list[str]:
    """The failure message's lines naming the matched divergences (none when nothing matched);
    ``adapter``: the failing one, whose unsupported cases the hints never name."""
    if not matches:
        return []
    lines = ["  diagnosis: the output matches known divergence(s)" + (", closest first:" if len(matches) > 1 else ":")]
    lines += [f"    {m.divergence} (violates {', '.join(m.violates)}): {m.description} "
              f"[max |err|/bound {m.ratio:.3g}]" for m in matches]
    return lines + separation_lines(case, [m.divergence for m in matches], dtype, supported(adapter, dtype))


def rediagnosed(e: ConformanceFailure, case: Case, calls, dtype: str,
                adapter: Optional[Adapter] = None) -> Optional[ConformanceFailure]:
    """An oracle-free check's failure ``e`` diagnosed on the operation calls the check made
    (``calls``: :class:`posenc.harness.runner.Call`, recorded by ``runner.recording``): each
    call's outputs compared with the reference on the same inputs, then with every known
    divergence's mutant (:func:`posenc.harness.runner.diagnose_calls`).  The failure again,
    its message extended by the first call out of tolerance and the divergences reproducing every
    call (or what the output is, inferred); its ``violated`` clauses those of the matches.  None
    when ``e`` was diagnosed already or no call is out of the reference's tolerance (the check's
    own rule found what a comparison with the reference does not)."""
    if e.diagnosed or not calls:
        return None
    try:
        return _rediagnosed(e, case, calls, dtype, adapter)
    except Exception:  # noqa: BLE001 - the check's own failure always survives its diagnosis
        return None


def _rediagnosed(e: ConformanceFailure, case: Case, calls, dtype: str, adapter) -> Optional[ConformanceFailure]:
    d = diagnose_calls(registry.spec(), case, calls, dtype)
    if d is None or not d.wrong:
        return None
    i = d.wrong[0]
    g, call = d.goldens[i], calls[i]
    lines = [e.msg, f"  compared with the reference on the same inputs: out of tolerance in {len(d.wrong)} of the "
             f"check's {len(calls)} operation call(s), first in call {i + 1} ({call.op}, {_call_inputs(call, case)}):"]
    lines += [f"    {m}" for m in d.first_bad]
    inferred: tuple = ()
    if d.matches:
        lines += diagnosis_lines(case, d.matches, dtype, adapter)
    else:
        inferred = tuple(infer(g, call.outputs, dtype))
        lines.append("  diagnosis: no known divergence reproduces the outputs of all of the check's calls")
        lines += [f"  inferred (call {i + 1}): {s}" for s in inferred]
    out = ConformanceFailure("\n".join(lines), e.clauses, d.matches, False, inferred, e.reason, True, case.clauses)
    out.plot_data = PlotData(g, call.outputs, dtype)  # --plot-dir: the first call out of tolerance
    out.params = e.params
    return out


def _call_inputs(call, case: Case) -> str:
    """The integer inputs of a recorded call, short (positions, cache length, lengths), and the
    parameters it changed from the case's (the permutation check's pairing)."""
    out = []
    try:
        mine, theirs = call.params.model_dump(), case.params.model_dump()
        out += [f"{k}={v!r}" for k, v in mine.items() if theirs.get(k, v) != v]
    except Exception:  # noqa: BLE001 - parameters of another model (an M-RoPE check's 1-D RoPE call)
        pass
    for n, v in call.inputs.items():
        a = np.asarray(v)
        if np.issubdtype(a.dtype, np.integer) and a.size:
            out.append(f"{n} {a.tolist()}" if a.size <= 8 else f"{n} {a.min()}..{a.max()} (shape {list(a.shape)})")
    return ", ".join(out) or "no integer inputs"


#: How many of a run's named divergences :func:`contradicted_diagnoses` checks (the most named first).
CONTRADICTION_LIMIT = 8


def _values_verdict(r: dict) -> bool:
    """A failed record that compared the outputs' values (not an exception, a crash, a malformed
    output or a strict XPASS of an expectation line)."""
    return r.get("outcome") == "failed" and not r.get("raised") and not str(r.get("reason", "")).startswith("[XPASS")


def _kind(params: dict) -> tuple:
    """A case's kind, what :func:`contradicted_diagnoses` compares like with like by: its
    parameters' choices -- every string, boolean and unset (None) value by its dotted path, and
    which numeric values are set -- never the numbers themselves (a θ, a factor, a width)."""
    return tuple(sorted((k, v if v is None or isinstance(v, (str, bool)) else "<set>") for k, v in params.items()))


def contradicted_diagnoses(records: list[dict]) -> list[dict]:
    """Diagnoses the run itself contradicts, where the divergence a failure is diagnosed as (its
    closest match, the name the user reads) at a dtype (``failures``: how many) is refuted by a
    golden case at that dtype (``case``): its mutant fails the golden -- of an operation those
    failures ran, and of a kind of case one of them failed on (the same pairing, scaling type,
    flags and unset fields: like with like, so a bug shown only under one rope_type is not refuted
    by a golden of another) -- which *passed* (``golden: "passed"``) or failed diagnosed as other
    divergences only or as none (``golden: "failed as <DIV>"``, ``"failed as no known divergence"``); or
    an invariant check named it for a
    case whose own golden test judged the values and failed without naming it (``golden:
    "failed without it"``: the golden's inputs tell more than the check's few calls).  The adapter
    then does not have that bug as such but a narrower or another one that agrees with it on the
    failing calls (an offset only at long positions, positions x 2 seen at position 1 only), and
    the name must not be taken at its word.  ``records``: the run's ``--report-json`` records;
    the most named (divergence, dtype) first, at most :data:`CONTRADICTION_LIMIT` checked.
    Never raises an ``Exception``."""
    try:
        cases = {c.id: c for c in all_cases()}
        kind_of_case = functools.lru_cache(maxsize=None)(
            lambda cid: _kind(flat_params(cases[cid].params)) if cid in cases else _kind({}))
        named: dict[tuple[str, str], list[dict]] = {}
        goldens: dict[tuple[str, str], dict] = {}
        for r in records:
            if r.get("check") == "golden":
                goldens[(r.get("case"), r.get("dtype"))] = r
            if _values_verdict(r) and r.get("diagnosis"):
                named.setdefault((r["diagnosis"][0]["divergence"], r["dtype"]), []).append(r)
        out = []
        for (div, dtype), rs in sorted(named.items(), key=lambda kv: -len(kv[1]))[:CONTRADICTION_LIMIT]:
            d = registry.spec().divergences.get(div)
            if d is None:
                continue
            found = None
            for r in rs:  # an invariant check's name that its case's own golden does not give
                g = goldens.get((r.get("case"), dtype))
                if r.get("check") != "golden" and g is not None and _values_verdict(g) and \
                        div not in [m["divergence"] for m in g.get("diagnosis") or ()]:
                    found = (r["case"], "failed without it")
                    break
            # the operations the failures ran (a generated test's case is its operation), and the
            # kinds of case they failed on: a passing golden refutes the name only if it is of one
            # of those kinds (a bug shown only under YaRN is not refuted by a default-RoPE golden)
            ops = {cases[r["case"]].op if r.get("case") in cases else r.get("case") for r in rs}
            kinds = {_kind(r["params"]) if r.get("params") else kind_of_case(r.get("case")) for r in rs}
            same = [(cid, g) for (cid, gd), g in goldens.items()
                    if gd == dtype and cid in cases and cases[cid].op in ops and kind_of_case(cid) in kinds]
            found = found or _refuting_golden(d, dtype, same)
            if found:
                out.append({"divergence": div, "dtype": dtype, "failures": len(rs), "case": found[0],
                            "golden": found[1]})
        return out
    except Exception:  # noqa: BLE001 - an advisory: it never breaks the run's report
        return []


def _refuting_golden(d, dtype: str, goldens: list[tuple[str, dict]]) -> Optional[tuple[str, str]]:
    """The first of ``goldens`` (``(case id, record)``, of the failures' operations and kinds) that
    refutes divergence ``d``: one that passed, or whose values failed but not as ``d`` (as others, or as
    none) -- either way its output is not ``d``'s mutant's -- where the mutant changes it."""
    for cid, g in goldens:
        names = [m["divergence"] for m in g.get("diagnosis") or ()]
        judged = _values_verdict(g) or g.get("outcome") == "diverges" and not g.get("raised")  # a recorded one too
        if g.get("outcome") != "passed" and (not judged or d.id in names):
            continue
        gold = _loaded(cid)
        if gold is not None and caught_outputs(d, gold, dtype) is not None:
            how = "diverges (expected)" if g.get("outcome") == "diverges" else "failed"
            return cid, ("passed" if g.get("outcome") == "passed" else
                         f"{how} as {names[0]}" if names else f"{how} as no known divergence")
    return None


#: How many of several matched divergences the failure message compares with the closest one.
SEPARATE_TOP = 3


def separation_lines(case: Case, divergences: list[str], dtype: str,
                     usable: Optional[Callable[[str], bool]] = None) -> list[str]:
    """For several divergences reproducing one output: which golden case tells the closest one
    from each other (rerun it to know which bug it is), or that none does.  ``usable(case_id)``:
    whether the adapter runs that case (:func:`supported`); a case it does not is never named
    (said instead, with the case); None: every case is."""
    if len(divergences) < 2:
        return []
    out = ["  these cases tell them apart (each reproduced by one of the two only; rerun them with -k CASE):"]
    first = divergences[0]
    for other in divergences[1:1 + SEPARATE_TOP]:
        seps = _separating(first, other, case.op, dtype)
        sep = next((c for c in seps if usable is None or usable(c)), None)
        out.append(f"    {first} / {other}: " + (
            f"case {sep}" if sep else
            f"no golden case at {dtype}: they give the same outputs on every case, so the outputs cannot say "
            "which of the two this is" if not seps else
            f"no case this adapter runs at {dtype} (case {seps[0]} would, and the adapter reports it unsupported "
            "or cannot run it)"))
    return out


#: How many golden cases :func:`separation_lines` offers the support probe for one pair.
SEPARATING_TRIED = 8


@functools.lru_cache(maxsize=None)
def _separating(a: str, b: str, op: str, dtype: str) -> tuple[str, ...]:
    """Golden cases telling ``a`` from ``b`` at ``dtype`` (at most :data:`SEPARATING_TRIED`): of
    operation ``op`` first, then of any operation both have a mutant form for."""
    found: list[str] = []
    for c in sorted(all_cases(), key=lambda c: c.op != op):
        g = _loaded(c.id)
        if g is not None and separating_case(registry.spec(), a, b, [g], dtype):
            found.append(c.id)
            if len(found) == SEPARATING_TRIED:
                break
    return tuple(found)


#: The device the hints' support probe runs a case on (the run's ``--device``, set by the suite's
#: plugin through :func:`probe_hints_on`); None: no probe, a hint may name any case.
_HINT_DEVICE: list[Optional[str]] = [None]
_SUPPORTED: dict[tuple[int, str, str], bool] = {}


def probe_hints_on(device: Optional[str]) -> None:
    """Let the failure messages' hints (:func:`separation_lines`) name only cases the failing
    adapter runs on ``device``, by running a candidate case once; None: stop probing."""
    _HINT_DEVICE[0] = device
    _SUPPORTED.clear()


def supported(adapter: Optional[Adapter], dtype: str) -> Optional[Callable[[str], bool]]:
    """``usable(case_id)`` of :func:`separation_lines` for ``adapter`` at ``dtype``: whether it runs
    that golden case (one run, kept per adapter, case and dtype; ``Unsupported`` or any other
    exception: False); None when hints are not probed (:func:`probe_hints_on`) or no adapter is known."""
    device = _HINT_DEVICE[0]
    if device is None or adapter is None:
        return None

    def usable(case_id: str) -> bool:
        key = (id(adapter), case_id, dtype)
        if key not in _SUPPORTED:
            try:
                g = _loaded(case_id)
                with through_form(None):  # a probe of the primary, never a check's call through a form
                    _SUPPORTED[key] = g is not None and run_case(adapter, g, dtype, device) is not None
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - the probe only asks: any failure means "not a hint"
                if is_timeout(e):  # --posenc-timeout ran out inside the probe: the test's, not the probe's
                    raise
                _SUPPORTED[key] = False
        return _SUPPORTED[key]
    return usable


def _loaded(case_id: str):
    try:
        return load_golden(case_id)
    except Exception:  # noqa: BLE001 - a golden that does not load is reported by its own test
        return None


def assert_conforms(adapter: Adapter, g: _golden.Golden, outputs: dict[str, np.ndarray], dtype: str,
                    what: str = "", clauses: Optional[Iterable[str]] = None) -> None:
    """Fail with the clause IDs, the worst element and the matching known divergences."""
    cmps = compare_outputs(g, outputs, dtype)
    bad = [c for c in cmps if not c.ok]
    if not bad:
        note_not_checkable(g.case.id, cmps, dtype)
        return
    matches = diagnose(registry.spec(), g, outputs, dtype)
    detail = "\n  ".join(c.message for c in bad) + sentinel_line(g, outputs)
    inferred = () if matches else tuple(infer(g, outputs, dtype))
    if not matches:
        detail += "\n  diagnosis: no known divergence reproduces this output"
        detail += "".join(f"\n  inferred: {s}" for s in inferred)
        detail += "".join(f"\n  {s}" for s in not_tried_lines(g.case.op))
    fail(clauses or g.case.clauses, adapter, g.case, dtype, f"{what.strip()}\n  {detail}" if what else detail, matches,
         inferred=inferred, reason=bad[0].message, diagnosed=True, plot_data=PlotData(g, outputs, dtype))


def sentinel_line(g: _golden.Golden, outputs: dict) -> str:
    """A line saying the outputs hold the kit's sentinel (``registry.forms.SENTINEL``, the value around the views
    a call form hands) where the golden does not: the adapter read or returned elements outside its view."""
    if g.form is None:
        return ""
    n = sum(int(np.count_nonzero((np.abs(np.asarray(v, np.float64)) == SENTINEL)
                                 & (np.abs(np.asarray(g.outputs[k], np.float64)) != SENTINEL)))
            for k, v in outputs.items() if k in g.outputs and np.shape(v) == np.shape(g.outputs[k]))
    return (f"\n  {n} output element(s) are the kit's sentinel {SENTINEL:g}, the value it puts around the views it "
            "hands: the adapter read or returned buffer elements outside its view") if n else ""


#: How many divergences :func:`not_tried_lines` names per reason.
NOT_TRIED_NAMED = 4


def not_tried_lines(op: str) -> list[str]:
    """The divergences a failure of ``op`` was not compared with: their mutants have a form for an
    operation ``op`` is built on and none for ``op`` (``registry.no_form``), one line per reason."""
    try:
        by_reason: dict[str, list[str]] = {}
        for div, reason in registry.no_form_reasons(op).items():
            by_reason.setdefault(reason or "no reason registered", []).append(div)
    except Exception:  # noqa: BLE001 - an advisory line never breaks a failure's message
        return []
    return [f"not compared on {op} (no mutant form: {reason}): {', '.join(ds[:NOT_TRIED_NAMED])}"
            + (f" and {len(ds) - NOT_TRIED_NAMED} more" if len(ds) > NOT_TRIED_NAMED else "")
            for reason, ds in by_reason.items()]


def is_timeout(e: BaseException) -> bool:
    """``e`` is pytest-timeout's failure (``--posenc-timeout``, SIGALRM in a serial run)."""
    try:
        return isinstance(e, pytest.fail.Exception) and str(e.msg or "").startswith("Timeout")
    except BaseException:  # noqa: BLE001 - an adapter's own subclass whose msg raises
        return False


def call_adapter(adapter: Adapter, case: Case, dtype: str, clauses: Iterable[str], fn, /, *args, **kwargs):
    """Call into the adapter; any exception but ``Unsupported`` fails with the clauses named (an output of
    another shape than the operation table's as well, but where a known divergence gives that shape and
    those values: a failure on the values, diagnosed, which an expectation line can record)."""
    matches = ()
    try:
        return fn(*args, **kwargs)
    except (Unsupported, ConformanceFailure, KeyboardInterrupt):
        raise  # the kit's own verdicts; Ctrl-C is the user's
    except pytest.fail.Exception as e:
        if is_timeout(e):  # the plugin names it
            raise
        detail = (f"the adapter raised pytest's {type(e).__name__} ({exception_text(e)}): an operation reports a "
                  "result, Unsupported, or an exception")
    except pytest.skip.Exception as e:
        detail = (f"the adapter raised a pytest skip ({exception_text(e)}); only posenc.adapters.Unsupported reports an "
                  "unsupported case, and a missing library is a failure")
    except OutputShapeError as e:  # a shape a known divergence gives is judged as its values; else malformed
        detail, matches = shape_error_diagnosis(registry.spec(), e, dtype)
    except BaseException as e:  # noqa: BLE001 - SystemExit, GeneratorExit ... too: a failure, reported precisely
        tb = traceback.extract_tb(e.__traceback__)
        if isinstance(e, RemoteFailure):  # raised in the adapter's worker process: where it was raised there
            tb = [traceback.FrameSummary(*e.remote_where[:2], e.remote_where[2])] if e.remote_where else []
        # an AdapterError is the kit's verdict on what the adapter did: its message says it all
        where = f" (at {tb[-1].filename}:{tb[-1].lineno} in {tb[-1].name})" if tb and not isinstance(e, AdapterError) else ""
        detail = f"{type(e).__name__}: {exception_text(e)}{where}"
    if matches:  # outside the handler: no chained traceback
        fail(clauses, adapter, case, dtype, detail, matches, reason=detail, diagnosed=True)
    fail(clauses, adapter, case, dtype, detail, raised=True)


def run_and_check(adapter: Adapter, case: Case, dtype: str, device: str, form: Optional[str] = None) -> dict[str, np.ndarray]:
    """Run ``case``'s golden on ``adapter`` (through call form operation ``form`` where given) and judge it."""
    require_dtype(adapter, dtype)
    g = load_golden(case.id)
    if form is None:
        out = call_adapter(adapter, case, dtype, case.clauses, run_case, adapter, g, dtype, device)
        assert_conforms(adapter, g, out, dtype)
        return out
    clauses = form_clauses(form)
    out = call_adapter(adapter, case, dtype, clauses, run_in_form, adapter, g, form, dtype, device)
    try:
        assert_conforms(adapter, dataclasses.replace(g, form=form), out, dtype, what=f"through {form}", clauses=clauses)
    except ConformanceFailure as e:
        raise form_own_failure(e, adapter, g, form, dtype, device) from None
    return out


def form_own_failure(e: ConformanceFailure, adapter: Adapter, g, form: str, dtype: str, device: str) -> ConformanceFailure:
    """A call form's failure ``e`` (matched with the primary's divergences, or with none) told apart: where the
    same case passes through the primary operation, the fault is the form's own handling
    (:func:`as_form_failure`: counted under the form's clauses, the message says the primary passes); else ``e``
    as it is (the implementation's own bug, seen through the form).  Runs the primary once more, on the failure
    path only."""
    clauses = form_clauses(form)
    if any(set(m.violates) & set(clauses) for m in e.matches):  # a form's own divergence: named as it is
        return e
    try:
        assert_conforms(adapter, g, run_case(adapter, g, dtype, device), dtype)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - the primary fails, is unsupported or raises: the bug is not the form's alone
        return e
    return as_form_failure(e, form, g.case.op)


def as_form_failure(e: ConformanceFailure, form: str, primary: str, what: str = "this case") -> ConformanceFailure:
    """``e`` as call form ``form``'s own failure (``primary`` passes ``what``): counted under the form's
    clauses (ROPE-CALL-FORM), not those of the divergences it reproduces, and the message says so."""
    clauses = form_clauses(form)
    matches = tuple(dataclasses.replace(m, violates=clauses) for m in e.matches)
    msg = str(e.msg)
    for m in e.matches:  # the diagnosis lines name the clause the failure is counted under
        msg = msg.replace(f"{m.divergence} (violates {', '.join(m.violates)})", f"{m.divergence} (violates {', '.join(clauses)})")
    head, _, rest = msg.partition("\n")
    head = f"{', '.join(clauses)}: {head.split(': ', 1)[1]}" if ": " in head else head  # the clause it is counted under
    note = (f"  {primary} passes {what}: the failure is {form}'s own ({', '.join(clauses)})"
            + (f" -- through the form the output is {primary}'s under the divergence(s) named below, reached by the "
               "form's handling of its positions, documents, layout or buffer" if matches else ""))
    out = ConformanceFailure("\n".join([head, note, rest]), clauses, matches, e.raised,
                             e.inferred, e.reason, e.diagnosed, ())
    out.plot_data, out.params, out.form = e.plot_data, e.params, form
    return out
