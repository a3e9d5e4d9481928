"""The pytest plugin behind ``pytest conformance --adapter NAME`` (entry point ``pytest11``).

Options: ``--adapter`` (registered name, ``module:attr`` or ``path.py``), ``--device`` (cpu,
cuda, cuda:N; ``gpu`` / ``gpu:N`` are aliases of ``cuda`` / ``cuda:N`` for every framework; an
unavailable device is a usage error), ``--dtype`` (float32 default; float64, bfloat16,
float16, a comma list, or ``all``), ``--expectations`` (an implementer-owned YAML file; by
default ``adapters/expectations/<adapter>.yaml`` when it exists; format 2, keyed by case, check and
dtypes: :mod:`posenc.conformance.expectations`), ``--report-json PATH`` (every test's verdict as
JSON, ``report_format`` :data:`REPORT_FORMAT`: the input of ``posenc matrix`` and ``posenc
expectations init``; documented in docs/report-json.md, schema ``report_schema.json``).

Reporting: the header names adapter, library versions, device, dtypes and spec version; the
summary counts passed / failed / expected divergences / unsupported per clause.  A run in
which no check passed or diverged as expected fails, and so does an expectation line that is stale.
"""

from __future__ import annotations

import difflib
import json
import math
import shlex
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

import pytest

from posenc import families
from posenc.adapters import Adapter, Unsupported, load_adapter, registered
from posenc.spec import SPEC_VERSION, load_spec
from posenc.spec.errors import PosencError
from posenc.spec.models import DTYPES

from . import expectations as expectations_mod

EXPECTATIONS_DIR = Path(__file__).resolve().parent.parent / "adapters" / "expectations"
_KEY = pytest.StashKey["State"]()


class State:
    def __init__(self, adapter: Adapter, device: str, dtypes: list[str], expectations: Optional[Path]):
        self.adapter, self.device, self.dtypes = adapter, device, dtypes
        self.spec = load_spec()
        self.expectations_path = expectations
        try:
            #: the loaded expectation file: ``lookup(case_id, check, dtype)``, ``excuse_generated(...)``
            self.expectations = (expectations_mod.load(expectations, self.spec, adapter.versions()) if expectations
                                 else expectations_mod.Expectations())
        except expectations_mod.ExpectationError as e:
            raise pytest.UsageError(str(e))
        self.collected: set[tuple[str, str]] = set()  # (case, check) of every collected test, any dtype
        self.outcomes: dict[str, Counter] = defaultdict(Counter)
        self.checked = 0  # passed, or failed exactly as an expectation file says
        self.failed = 0
        self.stale: list[str] = []
        self.records: list[dict] = []  # one verdict per test, for --report-json
        self.partly_unsupported: list[str] = []  # generated tests that passed with unsupported draws


def pytest_addoption(parser):
    g = parser.getgroup("posenc", "positional-encoding conformance")
    g.addoption("--adapter", default=None, help="adapter: registered name, package.module:attr, or path/to/file.py")
    g.addoption("--device", default="cpu", help="device: cpu (default), cuda, cuda:N (gpu, gpu:N: aliases)")
    g.addoption("--dtype", default="float32", help="float32 (default), float64, bfloat16, float16, a comma list, or all")
    g.addoption("--expectations", default=None, help="expectation file (YAML) of known divergences")
    g.addoption("--report-json", default=None, metavar="PATH",
                help="write every test's verdict (clause, dtype, outcome, divergence, reason) as JSON")
    g.addoption("--left-pad-fill", type=int, default=None,
                help="opt in to clause POS-LEFT-PAD-FILL: the position_ids value promised at padded slots")
    g.addoption("--clause", action="append", default=[], metavar="ID",
                help="only the tests that check clause ID (repeatable, or a comma list)")
    g.addoption("--family", action="append", default=[], metavar="NAME",
                help="only the tests that check a clause of spec family NAME (repeatable, or a comma list)")
    g.addoption("--posenc-examples", type=int, default=None, metavar="N",
                help="generated cases per operation and dtype (default 6, or the adapter's generated_examples; 0: none)")
    g.addoption("--posenc-seed", type=int, default=None, metavar="N",
                help="draw other generated cases (default 0: the same cases on every run)")


def _parse_dtypes(text: str) -> list[str]:
    if text == "all":
        return list(DTYPES)
    out = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))  # float32,float32 runs once
    bad = [t for t in out if t not in DTYPES]
    if bad or not out:
        what = f"unknown dtype(s) {', '.join(bad)}" if bad else "no dtype given"
        raise pytest.UsageError(f"--dtype {text!r}: {what}; choose from {', '.join(DTYPES)}, a comma list, or all")
    return out


def normalize_device(device: str) -> str:
    """``gpu`` / ``gpu:N`` -> ``cuda`` / ``cuda:N``: one name per device for every framework."""
    kind, sep, index = device.strip().lower().partition(":")
    return ("cuda" if kind == "gpu" else kind) + sep + index


def pytest_configure(config):
    config.addinivalue_line("markers", "posenc: a conformance test (parametrized over --dtype)")
    config.addinivalue_line("markers", "clauses(*ids): the spec clauses a conformance test checks")
    name = config.getoption("--adapter")
    if not name:
        return
    try:
        families.load_checks()  # every registered family, validated: a broken one is named here
        adapter = load_adapter(name)
    except PosencError as e:
        raise pytest.UsageError(str(e))
    device = normalize_device(config.getoption("--device"))
    dev_kind = device.split(":")[0]
    if dev_kind not in adapter.devices:
        raise pytest.UsageError(f"--device {device}: adapter {adapter.name!r} supports {', '.join(adapter.devices)}")
    if not adapter.device_available(device):
        raise pytest.UsageError(f"--device {device}: not available on this machine (adapter {adapter.name!r}); "
                                "the kit never falls back to the CPU silently")
    dtypes = _parse_dtypes(config.getoption("--dtype"))
    exp = config.getoption("--expectations")
    if exp is None:
        default = EXPECTATIONS_DIR / f"{adapter.name}.yaml"
        exp = default if default.is_file() else None
    config.stash[_KEY] = State(adapter, device, dtypes, Path(exp) if exp else None)


@pytest.fixture(scope="session")
def left_pad_fill(request):
    """The opt-in fill value for POS-LEFT-PAD-FILL, or None."""
    return request.config.getoption("--left-pad-fill")


def state(config) -> State:
    st = config.stash.get(_KEY, None)
    if st is None:
        regs = ", ".join(sorted(registered()))
        raise pytest.UsageError(f"the conformance suite needs --adapter NAME (registered: {regs})")
    return st


def pytest_report_header(config):
    st = config.stash.get(_KEY, None)
    if st is None:
        return None
    a = st.adapter
    vers = ", ".join(f"{k} {v}" for k, v in a.versions().items()) or "n/a"
    return [
        f"posenc spec {SPEC_VERSION}: adapter {a.name} ({a.framework}; {vers})",
        f"posenc device {st.device}, dtypes {', '.join(st.dtypes)}" + (f"; policy: {a.notes}" if a.notes else ""),
        f"posenc expectations: {st.expectations_path or 'none'}",
        f"posenc generated cases: {generated_examples(config)} per operation and dtype, "
        + (f"seed {config.getoption('--posenc-seed')}" if config.getoption("--posenc-seed") is not None
           else "seed 0 (deterministic; --posenc-seed N for others)"),
    ] + (["posenc float64: angle-based operations are checked at float32 precision (ROPE-PRECISION, "
          "SIN-PRECISION allow float32 angles and cos/sin)"] if "float64" in st.dtypes else []) + (
        ["posenc opt-in clauses not requested: POS-LEFT-PAD-FILL (--left-pad-fill N)"]
        if config.getoption("--left-pad-fill") is None else [])


def _clauses_of(item) -> list[str]:
    m = item.get_closest_marker("clauses")
    return list(m.args) if m else []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    st = config.stash.get(_KEY, None)
    if st is None:
        return
    if config.getoption("--left-pad-fill") is None:
        optin = [i for i in items if i.originalname == "test_left_pad_fill"]
        if optin:
            config.hook.pytest_deselected(items=optin)
            items[:] = [i for i in items if i.originalname != "test_left_pad_fill"]
    if generated_examples(config) == 0:  # --posenc-examples 0: no generated cases
        gen = [i for i in items if getattr(i, "originalname", "") == "test_generated"]
        if gen:
            config.hook.pytest_deselected(items=gen)
            items[:] = [i for i in items if getattr(i, "originalname", "") != "test_generated"]
    _select_by_clause(config, st.spec, items)
    _mark_expected(st, items)


def _entry(st: State, item):
    """The expectation line of a collected item (its case, check and dtype), or None."""
    return st.expectations.lookup(*expectations_mod.key_of(item))


def _mark_expected(st: State, items) -> None:
    """Mark every test an expectation line lists as a strict xfail (after checking that the line's
    clause belongs to the test), and record the stale lines: those whose (case, check) matches
    no collected test at any dtype."""
    for item in items:
        case_id, check, _ = expectations_mod.key_of(item)
        if case_id is not None:
            st.collected.add((case_id, check))
        e = _entry(st, item)
        if e:
            allowed = set(_clauses_of(item))
            div = st.spec.divergences.get(e.divergence)
            if div:
                allowed |= set(div.violates)
            if e.clause not in allowed:
                raise pytest.UsageError(
                    f"{st.expectations_path}: expected_failures.{st.expectations.position(e)} ({item.name}): clause "
                    f"{e.clause} is neither checked by the test ({', '.join(_clauses_of(item))}) nor violated by "
                    f"{e.divergence}")
            item.add_marker(pytest.mark.xfail(
                strict=True, reason=f"expected divergence {e.divergence} of {e.clause}: {e.evidence}"))
    st.stale = st.expectations.stale(st.collected)


def _select_by_clause(config, spec, items) -> None:
    """``--clause ID`` / ``--family NAME``: keep the tests that check one of those clauses (a
    family's clauses are those of its spec file); an unknown ID or family is a usage error."""
    def wanted(option, known, norm):
        out = {norm(x.strip()) for v in config.getoption(option) for x in v.split(",") if x.strip()}
        bad = sorted(out - set(known))
        if bad:
            near = [m for b in bad for m in difflib.get_close_matches(b, known, n=2)]
            raise pytest.UsageError(f"{option} {', '.join(bad)}: unknown" + (f"; did you mean {', '.join(near)}?"
                                    if near else f"; known: {', '.join(sorted(known)) if option == '--family' else 'see posenc spec list'}"))
        return out
    clauses = wanted("--clause", spec.clauses, str.upper)
    fams = wanted("--family", spec.families, str.lower)
    if not clauses and not fams:
        return
    clauses |= {c.id for f in fams for c in spec.families[f].clauses}
    keep = [i for i in items if set(_clauses_of(i)) & clauses]
    drop = [i for i in items if not set(_clauses_of(i)) & clauses]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session):
    st = session.config.stash.get(_KEY, None)
    opt = session.config.getoption
    selected = opt("keyword") or opt("markexpr") or opt("--clause") or opt("--family")
    if st and st.stale and not selected:
        raise pytest.UsageError("\n".join(st.stale))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """``Unsupported`` (and only it) becomes a reported skip with its reason.

    The suite itself never calls ``pytest.skip``: a skip raised inside a conformance test came
    from the adapter (e.g. ``pytest.importorskip`` of the wrapped library) and is a failure.
    """
    if pyfuncitem.get_closest_marker("clauses") is None:
        return (yield)
    try:
        return (yield)
    except Unsupported as e:
        pytest.skip(f"unsupported: {e.reason}")
    except pytest.skip.Exception as e:
        pytest.fail(f"the adapter raised a pytest skip ({e.msg}); only posenc.adapters.Unsupported "
                    "reports an unsupported case, and a missing library is a failure", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    st = item.config.stash.get(_KEY, None)
    if st is None or not _clauses_of(item):
        return rep
    exc = call.excinfo.value if call.excinfo is not None else None
    entry = _entry(st, item)
    if entry is None and isinstance(exc, GeneratedDivergence):
        entry = exc.entries[0]  # a generated test excused by the line(s) its diagnosis named
    if entry and rep.when == "call":
        _judge_expected(item, rep, exc, entry, st.expectations_path)
    if rep.when == "call" and rep.outcome == "skipped" and not hasattr(rep, "wasxfail") and isinstance(rep.longrepr, tuple):
        rep.longrepr = (str(item.path), (item.location[1] or 0) + 1, rep.longrepr[2])  # point at the test
    if rep.when == "call" or rep.outcome == "failed" or (rep.when == "setup" and rep.outcome == "skipped"):
        if hasattr(rep, "wasxfail"):
            kind = "diverges (expected)" if rep.outcome == "skipped" else "failed"
        elif rep.outcome == "skipped":
            kind = "unsupported"
        else:
            kind = rep.outcome
        if kind in ("passed", "diverges (expected)"):
            st.checked += 1
        if kind == "failed":
            st.failed += 1
            rep.sections.append(("posenc rerun", rerun_command(item)))
        if kind == "diverges (expected)":
            clauses = [entry.clause]  # the clause the expectation file records
        else:
            clauses = getattr(exc, "violated", None) if kind != "passed" else None
        for c in clauses or _clauses_of(item):
            st.outcomes[c][kind] += 1
        st.records.append(_record(item, rep, kind, entry, clauses, exc))
    return rep


def _unexpect(rep, longrepr: str) -> None:
    """Turn a strict xfail (the expected divergence) into a plain failure with ``longrepr``."""
    rep.outcome = "failed"
    if hasattr(rep, "wasxfail"):
        del rep.wasxfail
    rep.longrepr = longrepr


def _judge_expected(item, rep, exc, entry, path) -> None:
    """Keep an expected divergence only if the test failed the way its line says.

    Failed instead: an exception or a malformed output (no verdict on the values, never
    excused); a diagnosis that does not name the line's divergence (for a ``DIV-UNNAMED-*``
    line: a diagnosis that names any divergence); an unsupported report.  A pass is already a
    strict XPASS failure.
    """
    where = f"{item.nodeid}: listed as expected divergence {entry.divergence} ({path})"
    if hasattr(rep, "wasxfail") and getattr(exc, "raised", True):
        _unexpect(rep, f"{where}, but the test did not reach a verdict on the values:\n"
                       f"{getattr(exc, 'msg', None) or f'{type(exc).__name__}: {exc}'}")
    elif hasattr(rep, "wasxfail"):
        found = getattr(exc, "divergences", None)
        if found is not None and entry.divergence not in found and (entry.named or found):
            # failed, but not the way the expectation file says: a different bug hides behind it
            why = (f"but the output matches {', '.join(found) or 'no known divergence'}" if entry.named else
                   f"but the kit diagnosed the named divergence(s) {', '.join(found)}: an unnamed line "
                   "never excuses a named divergence (record that one instead)")
            _unexpect(rep, f"{item.nodeid}: expected divergence {entry.divergence} ({path}), {why}:\n{exc.msg}")
    elif rep.outcome == "skipped":
        _unexpect(rep, f"{where} but reported {rep.longrepr[2] if isinstance(rep.longrepr, tuple) else 'skipped'}")


def generated_examples(config) -> int:
    """``--posenc-examples`` (default :data:`posenc.conformance.generated.DEFAULT_EXAMPLES`)."""
    n = config.getoption("--posenc-examples")
    if n is None:
        from .generated import DEFAULT_EXAMPLES
        st = config.stash.get(_KEY, None)
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
    """The expectation file's rule for generated failures, recording the lines it applied."""

    def __init__(self, rule):
        self.rule, self.entries = rule, []

    def __call__(self, clauses, dtype, divergences):
        e = self.rule(clauses, dtype, divergences) if self.rule else None
        if e is not None and e not in self.entries:
            self.entries.append(e)
        return e


def excuse_generated(config) -> _Excuses:
    """The excuse rule of a generated test (``excuse_generated`` of the expectation file)."""
    return _Excuses(getattr(state(config).expectations, "excuse_generated", None))


class GeneratedDivergence(pytest.xfail.Exception):
    """A generated test whose failing examples are all excused: the expected divergence(s)."""

    def __init__(self, msg: str, entries):
        super().__init__(msg)
        self.entries = tuple(entries)
        self.raised = False


def report_generated(request, op: str, dtype: str, outcomes, excuses: Optional[_Excuses] = None) -> None:
    """End a generated test: unsupported when no example reached a verdict; the expected
    divergence when an example was excused; else pass.  The counts go to the report."""
    counts = {"passed": 0, "unsupported": 0, "excused": 0}
    for k, n in outcomes.items():
        counts[k.split(":", 1)[0]] += n
    request.node.user_properties.append(("generated", dict(counts, examples=sum(outcomes.values()))))
    reasons = sorted({k.split(":", 1)[1] for k in outcomes if k.startswith("unsupported:")})
    if counts["unsupported"] and counts["passed"]:
        state(request.config).partly_unsupported.append(
            f"{request.node.name}: {counts['passed']} checked, {counts['unsupported']} unsupported "
            f"({'; '.join(r[:120] for r in reasons[:3])}{' ...' if len(reasons) > 3 else ''})")
    if excuses is not None and excuses.entries:
        ids = ", ".join(dict.fromkeys(e.divergence for e in excuses.entries))
        raise GeneratedDivergence(f"expected divergence {ids} ({counts['excused']} of {sum(outcomes.values())} "
                                  f"generated examples; the others passed or were unsupported)", excuses.entries)
    if counts["passed"] == 0:
        raise Unsupported("; ".join(reasons) or f"no generated example of {op} ran")


def rerun_command(item) -> str:
    """A command that reruns exactly this test, as pasted (same adapter, device, dtype, options)."""
    opt = item.config.getoption
    cmd = ["pytest", f"{item.path}::{item.name}", "--adapter", opt("--adapter"), "--device", opt("--device"),
           "--dtype", item.callspec.params.get("dtype", "float32") if hasattr(item, "callspec") else "float32"]
    for name in ("--expectations", "--left-pad-fill", "--posenc-examples", "--posenc-seed"):
        if opt(name) is not None:
            cmd += [name, str(opt(name))]
    return " ".join(shlex.quote(str(c)) for c in cmd)


#: ``report_format`` of ``--report-json`` (docs/report-json.md, conformance/report_schema.json):
#: bumped when a field changes meaning or is removed; adding a field does not bump it.
REPORT_FORMAT = 1


def _ratio(x) -> Optional[float]:
    x = float(x)
    return x if math.isfinite(x) else None


def _record(item, rep, kind: str, entry, violated, exc=None) -> dict:
    """One test's verdict for ``--report-json`` (and ``posenc matrix``); fields: docs/report-json.md."""
    callspec = getattr(item, "callspec", None)
    case_id, check, dtype = expectations_mod.key_of(item)
    reason = ""
    if kind == "unsupported" and isinstance(rep.longrepr, tuple):
        reason = rep.longrepr[2].removeprefix("Skipped: ").removeprefix("unsupported: ")
    elif kind == "failed":
        reason = str(getattr(rep, "longreprtext", "") or "").strip().splitlines()[-1:] or [""]
        reason = reason[0][:300]
    diverges = kind == "diverges (expected)"
    return {
        "test_id": item.name,
        "case": case_id,
        "check": check,
        "dtype": callspec.params.get("dtype") if callspec else dtype,
        "clauses": _clauses_of(item),
        "outcome": {"diverges (expected)": "diverges"}.get(kind, kind),
        "violated": list(violated or []),
        "divergence": entry.divergence if entry and diverges else None,
        "expected_reason": entry.evidence if entry and diverges else None,
        "diagnosis": [{"divergence": m.divergence, "violates": list(m.violates), "ratio": _ratio(m.ratio)}
                      for m in getattr(exc, "matches", ()) or ()] if kind != "passed" else [],
        "inferred": [str(x) for x in getattr(exc, "inferred", ()) or ()] if kind != "passed" else [],
        "raised": bool(getattr(exc, "raised", True)) if kind == "failed" and exc is not None else False,
        "reason": reason,
        "generated": dict(item.user_properties).get("generated"),
    }


def _expectations_given(config, st: State) -> Optional[str]:
    """The expectation file as given on the command line; the default one relative to the kit's
    root (``adapters/expectations/<adapter>.yaml``), so that reports do not depend on the machine."""
    given = config.getoption("--expectations")
    if given is not None:
        return str(given)
    if st.expectations_path is None:
        return None
    try:
        return st.expectations_path.relative_to(EXPECTATIONS_DIR.parent.parent).as_posix()
    except ValueError:
        return str(st.expectations_path)


def report(config, st: State, exit_status: int) -> dict:
    """The ``--report-json`` document (format :data:`REPORT_FORMAT`)."""
    a = st.adapter
    return {
        "report_format": REPORT_FORMAT,
        "adapter": a.name, "framework": a.framework, "versions": a.versions(), "device": st.device,
        "dtypes": st.dtypes, "spec_version": SPEC_VERSION, "exit_status": int(exit_status),
        "expectations": _expectations_given(config, st),
        "examples": generated_examples(config),
        "results": st.records,
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = config.stash.get(_KEY, None)
    if st is None or not st.outcomes:
        return
    tr = terminalreporter
    tr.section(f"posenc conformance: {st.adapter.name} on {st.device} ({', '.join(st.dtypes)})")
    kinds = ["passed", "failed", "diverges (expected)", "unsupported"]
    w = max(len(c) for c in st.outcomes) + 2
    tr.write_line(f"{'clause':{w}s}" + "".join(f"{k:>{len(k) + 2}s}" for k in kinds))
    for c in sorted(st.outcomes):
        tr.write_line(f"{c:{w}s}" + "".join(f"{st.outcomes[c][k]:>{len(k) + 2}d}" for k in kinds))
    if st.partly_unsupported:
        tr.write_line("posenc: generated cases the adapter reported unsupported (redrawn; not passed):", yellow=True)
        for line in st.partly_unsupported:
            tr.write_line(f"  {line}")
    if st.checked == 0 and st.failed == 0:
        tr.write_line("posenc: no conformance check ran to a verdict: a run that checks nothing fails", red=True)


def pytest_sessionfinish(session, exitstatus):
    st = session.config.stash.get(_KEY, None)
    if st is None:
        return
    if st.outcomes and st.checked == 0 and st.failed == 0 and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    path = session.config.getoption("--report-json")
    if path:
        Path(path).write_text(json.dumps(report(session.config, st, session.exitstatus), indent=1) + "\n",
                              encoding="utf-8")


# ---- fixtures and parametrization ------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    if "dtype" in metafunc.fixturenames and metafunc.definition.get_closest_marker("posenc") is not None:
        metafunc.parametrize("dtype", state(metafunc.config).dtypes)


@pytest.fixture(scope="session")
def adapter(request) -> Adapter:
    """The adapter under test (from ``--adapter``)."""
    return state(request.config).adapter


@pytest.fixture(scope="session")
def device(request) -> str:
    return state(request.config).device


@pytest.fixture(scope="session")
def spec(request):
    return state(request.config).spec
