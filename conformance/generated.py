"""The generated-case test's runtime: ``test_generated[<dtype>-<op>]`` explores the drawn cases of one
operation on the adapter (:mod:`posenc.harness.generation`), counts the unsupported draws, excuses
a failure an expectation line records, fails with the shrunk case; :func:`replay` reruns one drawn
case outside pytest.
"""

from __future__ import annotations

import re
import unittest
from typing import Optional

import pytest
from hypothesis import reject
from hypothesis.errors import Unsatisfiable

from posenc import registry
from posenc.adapters import Adapter, Unsupported
from posenc.conformance.expectations import NUMBER, no_finding_note
from posenc.conformance.state import STATE_KEY, state
from posenc.harness.generation import (
    GIVE_UP_AFTER,
    GIVE_UP_AFTER_VARIED,
    Crashed,
    GeneratedFailure,
    Outcomes,
    Stopped,
    check_example,
    explore,
    params_repr,
    replay_snippet,
)
from posenc.registry.cases import Case


class _NothingSupported(unittest.SkipTest):
    """Stops the Hypothesis engine at once (a skip exception is re-raised, never shrunk)."""


def run_generated(config, adapter: Adapter, device: str, dtype: str, op: str, excuse=None) -> Outcomes:
    """Check ``--posenc-examples`` drawn cases of ``op``; fail with the shrunk case."""
    getattr(adapter, registry.operation(op).method)  # an adapter without the method: Unsupported, at once
    outcomes = Outcomes()

    def visit(example):
        c, seed = example
        verdict = check_example(adapter, c, seed, dtype, device, excuse)
        outcomes.add(verdict, c.clauses)
        if verdict.startswith("unsupported:"):
            reasons = [k for k in outcomes if k.startswith("unsupported:")]
            unsupported = sum(outcomes[k] for k in reasons)
            limit = GIVE_UP_AFTER if len(reasons) == 1 else GIVE_UP_AFTER_VARIED
            if unsupported >= limit and unsupported == sum(outcomes.values()):
                raise _NothingSupported(op)
            reject()  # not an example: Hypothesis draws another (the adapter may support part of the operation)

    failure = None
    try:
        explore(op, dtype, generated_examples(config), config.getoption("--posenc-seed", None), visit)
    except GeneratedFailure as e:
        failure = e
    except Crashed as e:  # the first crash ends the search: no replay, no shrink (each would crash again)
        failure = e.failure
    except (Unsatisfiable, _NothingSupported):
        pass  # every drawn example was unsupported: reported as unsupported with the reasons
    except Stopped as e:
        raise TimedOut(str(e)) from None
    if failure is not None:  # outside the except block: the report is not a chained traceback
        raise_failure(config, adapter, dtype, device, failure)
    return outcomes


def raise_failure(config, adapter: Adapter, dtype: str, device: str, e: GeneratedFailure) -> None:
    from posenc.harness.failure import fail
    how = "shrunk" if e.shrunk else "not shrunk: the adapter's process crashed on it, so it is not called again"
    detail = (f"generated case ({how}; input values seed {e.seed}, drawn with the case): {e.case.op} with "
              f"{params_repr(e.case.params)}\n  {e.detail}")
    if e.inferred:
        detail += "\n  diagnosis: no known divergence reproduces this output" + "".join(
            f"\n  inferred: {s}" for s in e.inferred)
    elif not e.matches and not e.raised:
        detail += "\n  diagnosis: no known divergence reproduces this output"
    detail += _unexplained(config, e, dtype)
    snippet = replay_snippet(e.case, e.seed, adapter_option(config, adapter), dtype, device)
    detail += f"\n  replay the {'shrunk ' if e.shrunk else ''}case in Python:\n" + "\n".join(f"    {ln}" for ln in snippet.splitlines())
    from posenc.harness.failure_plots import PlotData
    values = getattr(e, "plot_data", None)
    fail(e.clauses or e.case.clauses, adapter, e.case, dtype, detail, e.matches, raised=e.raised, inferred=e.inferred,
         reason=(f"generated case: {e.reason}; the case: {e.case.op} with {params_repr(e.case.params)}"
                 if e.reason else f"generated case: {e.detail}"), diagnosed=True,
         plot_data=PlotData(values[0], values[1], dtype) if values else None)


def _unexplained(config, e: GeneratedFailure, dtype: str) -> str:
    """The generated expectation lines that cover the failing case but do not explain it, and why."""
    exps = state(config).expectations
    covering = getattr(exps, "covering", None)
    if covering is None or e.raised:
        return ""
    out = []
    for line in covering(e.case.op, e.case.params, dtype):
        i = exps.position(line)
        why = (f"the diagnosis does not name {line.divergence}" if line.named else
               f"the kit named {', '.join(m.divergence for m in e.matches)}" if e.matches else
               f"no inferred line says {line.finding!r}{no_finding_note(e.inferred)}")
        out.append(f"\n  expected_failures.{i} ({line.label()}, {line.divergence}) covers this case but does not "
                   f"explain it: {why}")
    return "".join(out)


def adapter_option(config, adapter: Adapter) -> str:
    opt = config.getoption("--adapter", None)
    return opt or adapter.name


def replay(c: Case, seed: int, adapter: str, dtype: str = "float32", device: str = "cpu") -> str:
    """Run one generated case on ``adapter`` (a name, ``module:attr`` or ``file.py``) and return
    the verdict as text: ``conforms``, or the failing outputs and the diagnosis."""
    from posenc.adapters import load_adapter
    a = load_adapter(adapter)
    try:
        verdict = check_example(a, c, seed, dtype, device)
    except GeneratedFailure as e:
        lines = [f"{', '.join(c.clauses)}: {a.name} fails ({dtype})", f"  {e.detail}"]
        lines += [f"  diagnosis: {m.divergence} (violates {', '.join(m.violates)}): {m.description}" for m in e.matches]
        lines += [f"  inferred: {s}" for s in e.inferred]
        return "\n".join(lines)
    return "conforms" if verdict == "passed" else verdict


def generated_examples(config) -> int:
    """``--posenc-examples`` (default :data:`posenc.harness.generation.DEFAULT_EXAMPLES`)."""
    n = config.getoption("--posenc-examples")
    st = config.stash.get(STATE_KEY, None)
    if st is not None and st.model_info is not None:
        return 0  # the model-level suite draws no generated cases
    if n is None:
        from posenc.harness.generation import DEFAULT_EXAMPLES
        hint = getattr(st.adapter, "generated_examples", None) if st else None
        if hint is not None and int(hint) < 1:
            raise pytest.UsageError(f"adapter {st.adapter.name!r}: generated_examples = {hint}: an adapter may "
                                    "lower the number of generated cases, never switch them off (--posenc-examples 0 "
                                    "is the user's choice)")
        return DEFAULT_EXAMPLES if hint is None else int(hint)
    if n < 0:
        raise pytest.UsageError(f"--posenc-examples {n}: must be 0 or more")
    return n


class _Excuses:
    """The expectation file's rule for generated failures, recording the lines it applied and, for
    the generated lines of this test's operation and dtype, how many drawn cases each covered,
    passed and excused (``tally``: line index -> ``[covered, passed, excused]``)."""

    def __init__(self, expectations=None, op: Optional[str] = None, dtype: Optional[str] = None):
        self.expectations = expectations
        self.rule = getattr(expectations, "excuse_generated", None)
        self.entries: list = []
        lines = getattr(expectations, "generated_lines", None)
        self.tally = {i: [0, 0, 0] for i in lines(op, dtype)} if lines and op and dtype else {}
        self._last = None

    def __call__(self, clauses, dtype, divergences, case=None, inferred=()):
        e = self.rule(clauses, dtype, divergences, case=case, inferred=inferred) if self.rule else None
        if e is not None and e not in self.entries:
            self.entries.append(e)
        self._last = e
        return e

    def observe(self, case, dtype: str, verdict: str) -> None:
        """Count a drawn case's verdict under every generated line that covers it."""
        excused_by, self._last = self._last, None
        for i, t in self.tally.items():
            e = self.expectations.entries[i]
            if e.covers(case.op, case.params, dtype):
                t[0] += 1
                t[1] += verdict == "passed"
                t[2] += verdict.startswith("excused:") and e is excused_by

    def attach(self, node) -> None:
        """The tally on the test's report (plain lists: it travels from a pytest-xdist worker)."""
        if self.tally:
            node.user_properties.append(("posenc_lines", [[i, *t] for i, t in sorted(self.tally.items())]))


def excuse_generated(config, op: Optional[str] = None, dtype: Optional[str] = None) -> _Excuses:
    """The excuse rule of a generated test (``excuse_generated`` of the expectation file), counting
    the generated lines of ``op`` at ``dtype``."""
    return _Excuses(state(config).expectations, op, dtype)


class TimedOut(pytest.fail.Exception):
    """A generated example ran into --posenc-timeout (stops the search: nothing is shrunk)."""


class GeneratedDivergence(pytest.xfail.Exception):
    """A generated test whose failing examples are all excused: the expected divergence(s)."""

    def __init__(self, msg: str, entries):
        super().__init__(msg)
        self.entries = tuple(entries)
        self.raised = False


def distinct_reasons(reasons) -> list[str]:
    """The unsupported reasons of a generated test's examples, one per kind: reasons that differ only
    in the numbers they quote (``got 100``, ``got 1005.79``, ...) are one kind, said once with how
    many other values there were, so a report or the matrix lists each reason once."""
    groups: dict[str, list[str]] = {}
    for r in reasons:
        # a number standing on its own (not the digits of a name: float64, bfloat16, cuda:0 stay)
        groups.setdefault(NUMBER.sub("#", r), []).append(r)
    return [g[0] if len(g) == 1 else f"{g[0]} (and {len(g) - 1} more like it, other values)" for g in groups.values()]


def _clip(reason: str, limit: int = 160) -> str:
    """A reason cut at a word boundary, marked, its grouping suffix (``(and N more like it ...)``) kept."""
    m = re.search(r" \(and \d+ more like it, other values\)$", reason)
    body, suffix = (reason[:m.start()], m.group(0)) if m else (reason, "")
    if len(body) > limit:
        body = body[:limit].rsplit(" ", 1)[0] + " …"
    return body + suffix


def report_generated(request, op: str, dtype: str, outcomes, excuses: Optional[_Excuses] = None) -> None:
    """End a generated test: unsupported when no example reached a verdict; the expected
    divergence when an example was excused; else pass.  The counts go to the report."""
    counts = {"passed": 0, "unsupported": 0, "excused": 0}
    for k, n in outcomes.items():
        counts[k.split(":", 1)[0]] += n
    request.node.user_properties.append(("generated", dict(counts, examples=sum(outcomes.values()))))
    by_clause = getattr(outcomes, "by_clause", None)
    if by_clause:  # a pass counts under the clauses of the examples that passed, and no others
        request.node.user_properties.append(("posenc_clauses", {
            "passed": sorted(c for c, k in by_clause.items() if k["passed"]),
            "unsupported": sorted(c for c, k in by_clause.items() if not k["passed"] and not k["excused"])}))
    reasons = distinct_reasons(sorted({k.split(":", 1)[1] for k in outcomes if k.startswith("unsupported:")}))
    if counts["unsupported"] and counts["passed"]:
        request.node.user_properties.append((
            "posenc_partly_unsupported",
            f"{request.node.name}: {counts['passed']} checked, {counts['unsupported']} unsupported "
            f"({'; '.join(_clip(r) for r in reasons[:3])}{' ...' if len(reasons) > 3 else ''})"))
    if excuses is not None and excuses.entries:
        ids = ", ".join(dict.fromkeys(e.divergence for e in excuses.entries))
        raise GeneratedDivergence(f"expected divergence {ids} ({counts['excused']} of {sum(outcomes.values())} "
                                  f"generated examples; the others passed or were unsupported)", excuses.entries)
    if counts["passed"] == 0:
        raise Unsupported("; ".join(reasons) or f"no generated example of {op} ran")


def __getattr__(name: str):
    """The names this module had before the generator author's façade (:mod:`posenc.harness.generators`:
    ``field``, ``size``, ``positions``, ...) and the engine (:mod:`posenc.harness.generation`) took them:
    still resolved for one release (spec 0.4.x), with a warning."""
    import warnings

    from posenc.harness import generation, generators
    for module in (generators, generation):
        if hasattr(module, name):
            warnings.warn(f"posenc.conformance.generated.{name} is deprecated: use {module.__name__}.{name}",
                          DeprecationWarning, stacklevel=2)
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
