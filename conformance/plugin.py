"""The pytest plugin behind ``pytest conformance --adapter NAME`` (entry point ``pytest11``).

Options: ``--adapter`` (registered name, ``module:attr`` or ``path.py``), ``--device`` (cpu,
cuda, cuda:N; ``gpu`` / ``gpu:N`` are aliases of ``cuda`` / ``cuda:N`` for every framework; an
unavailable device is a usage error), ``--dtype`` (float32 default; float64, bfloat16,
float16, a comma list, or ``all``), ``--expectations`` (an implementer-owned YAML file; by
default ``adapters/expectations/<adapter>.yaml`` when it exists), ``--report-json PATH`` (every
test's verdict as JSON: the input of ``posenc matrix``).

Reporting: the header names adapter, library versions, device, dtypes and spec version; the
summary counts passed / failed / expected divergences / unsupported per clause.  A run in
which no check passed or diverged as expected fails, and so does an expectation line that is stale.
"""

from __future__ import annotations

import difflib
import json
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
            self.expectations = expectations_mod.load(expectations, self.spec, adapter.versions()) if expectations else {}
        except expectations_mod.ExpectationError as e:
            raise pytest.UsageError(str(e))
        self.collected: set[str] = set()
        self.outcomes: dict[str, Counter] = defaultdict(Counter)
        self.checked = 0  # passed, or failed exactly as an expectation file says
        self.failed = 0
        self.stale: list[str] = []
        self.records: list[dict] = []  # one verdict per test, for --report-json


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


def _parse_dtypes(text: str) -> list[str]:
    if text == "all":
        return list(DTYPES)
    out = [t.strip() for t in text.split(",") if t.strip()]
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
    _select_by_clause(config, st.spec, items)
    for item in items:
        tid = item.name
        st.collected.add(tid)
        e = st.expectations.get(tid)
        if e:
            allowed = set(_clauses_of(item))
            div = st.spec.divergences.get(e.divergence)
            if div:
                allowed |= set(div.violates)
            if e.clause not in allowed:
                raise pytest.UsageError(
                    f"{st.expectations_path}: {tid}: clause {e.clause} is neither checked by the test "
                    f"({', '.join(_clauses_of(item))}) nor violated by {e.divergence}")
            item.add_marker(pytest.mark.xfail(
                strict=True, reason=f"expected divergence {e.divergence} of {e.clause}: {e.evidence}"))
    known = {expectations_mod.without_dtype(t) for t in st.collected}
    for tid, e in st.expectations.items():
        if tid not in st.collected and expectations_mod.without_dtype(tid) not in known:
            st.stale.append(f"{st.expectations_path}: test_id {tid!r} ({e.divergence}) matches no test: stale line")


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
    entry = st.expectations.get(item.name)
    if entry and rep.when == "call" and hasattr(rep, "wasxfail") and getattr(exc, "raised", True):
        # an exception (anything but a suite.ConformanceFailure on the values): no expectation
        # line can explain it
        rep.outcome = "failed"
        del rep.wasxfail
        rep.longrepr = (f"{item.nodeid}: listed as expected divergence {entry.divergence} "
                        f"({st.expectations_path}), but the test did not reach a verdict on the values:\n"
                        f"{getattr(exc, 'msg', None) or f'{type(exc).__name__}: {exc}'}")
    elif entry and rep.when == "call" and hasattr(rep, "wasxfail"):
        found = getattr(exc, "divergences", None)
        if (found is not None and entry.divergence not in found
                and not entry.divergence.startswith(expectations_mod.UNNAMED)):
            # failed, but not the way the expectation file says: a different bug hides behind it
            rep.outcome = "failed"
            del rep.wasxfail
            rep.longrepr = (f"{item.nodeid}: expected divergence {entry.divergence} ({st.expectations_path}), "
                            f"but the output matches {', '.join(found) or 'no known divergence'}:\n{exc.msg}")
    elif entry and rep.when == "call" and rep.outcome == "skipped":
        rep.outcome = "failed"
        rep.longrepr = (f"{item.nodeid}: listed as expected divergence {entry.divergence} "
                        f"({st.expectations_path}) but reported {rep.longrepr[2] if isinstance(rep.longrepr, tuple) else 'skipped'}")
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
        st.records.append(_record(item, rep, kind, entry, clauses))
    return rep


def rerun_command(item) -> str:
    """A command that reruns exactly this test, as pasted (same adapter, device, dtype, options)."""
    opt = item.config.getoption
    cmd = ["pytest", f"{item.path}::{item.name}", "--adapter", opt("--adapter"), "--device", opt("--device"),
           "--dtype", item.callspec.params.get("dtype", "float32") if hasattr(item, "callspec") else "float32"]
    for name in ("--expectations", "--left-pad-fill"):
        if opt(name) is not None:
            cmd += [name, str(opt(name))]
    return " ".join(shlex.quote(str(c)) for c in cmd)


def _record(item, rep, kind: str, entry, violated) -> dict:
    """One test's verdict for ``--report-json`` (and ``posenc matrix``)."""
    callspec = getattr(item, "callspec", None)
    reason = ""
    if kind == "unsupported" and isinstance(rep.longrepr, tuple):
        reason = rep.longrepr[2].removeprefix("Skipped: ").removeprefix("unsupported: ")
    elif kind == "failed":
        reason = str(getattr(rep, "longreprtext", "") or "").strip().splitlines()[-1:] or [""]
        reason = reason[0][:300]
    return {
        "test_id": item.name,
        "dtype": callspec.params.get("dtype") if callspec else None,
        "clauses": _clauses_of(item),
        "outcome": {"diverges (expected)": "diverges"}.get(kind, kind),
        "violated": list(violated or []),
        "divergence": entry.divergence if entry and kind == "diverges (expected)" else None,
        "reason": reason,
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
        a = st.adapter
        Path(path).write_text(json.dumps({
            "adapter": a.name, "framework": a.framework, "versions": a.versions(), "device": st.device,
            "dtypes": st.dtypes, "spec_version": SPEC_VERSION, "exit_status": int(session.exitstatus),
            "expectations": str(st.expectations_path.name) if st.expectations_path else None,
            "results": st.records,
        }, indent=1) + "\n", encoding="utf-8")


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
