"""The pytest plugin behind ``pytest conformance --adapter NAME`` (entry point ``pytest11``).

Options: ``--adapter`` (registered name, ``module:attr`` or ``path.py``), ``--device`` (cpu,
cuda, cuda:N; ``gpu`` / ``gpu:N`` are aliases of ``cuda`` / ``cuda:N`` for every framework; an
unavailable device is a usage error), ``--dtype`` (float32 default; float64, bfloat16,
float16, a comma list, or ``all``), ``--expectations`` (an implementer-owned YAML file; by
default ``adapters/expectations/<adapter>.yaml`` when it exists; format 2, keyed by case, check and
dtypes: :mod:`posenc.conformance.expectations`), ``--report-json PATH`` (every test's verdict as
JSON, ``report_format`` :data:`REPORT_FORMAT`: the input of ``posenc matrix`` and ``posenc
expectations init``; documented in docs/report-json.md, schema ``report_schema.json``),
``--plot-dir DIR`` (a PNG per failing case: :mod:`posenc.harness.failure_plots`).

Reporting: the header names adapter, library versions, device, dtypes and spec version; the
summary counts passed / failed / expected divergences / unsupported per clause.  A run in
which no check passed or diverged as expected fails, and so does an expectation line that is stale.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from posenc import registry
from posenc.adapters import Adapter, Unsupported, load_adapter
from posenc.conformance import expectations as expectations_mod
from posenc.conformance.booking import (
    Booker,
    checked_plot_dir,
    clauses_of_item,
    expectation_entry,
    inherited_entry,
    judge_expected,
    line_clauses,
    plot_failed,
    record_of,
    report,
    rerun_command,
    skip_reason,
    unexpect,
    write_contradicted,
    write_not_checkable,
)
from posenc.conformance.crashes import LEDGER_KEY, Crashes, drop_ledger, new_ledger
from posenc.conformance.generated import GeneratedDivergence, TimedOut, generated_examples
from posenc.conformance.isolation import RemoteAdapter, RemoteFailure, is_remote
from posenc.conformance.state import (
    DEFAULT_TIMEOUT,
    STATE_KEY,
    State,
    adapter_name,
    check_adapter_attributes,
    check_attns,
    check_report_path,
    default_expectations,
    isolated,
    model_attns,
    normalize_device,
    parse_dtypes,
    state,
)
from posenc.conformance.stops import StopWatch, interrupted_line
from posenc.spec import SPEC_VERSION
from posenc.spec.errors import AdapterError, GoldenError, PosencError, exception_text


def pytest_addoption(parser):
    g = parser.getgroup("posenc", "positional-encoding conformance")
    g.addoption("--adapter", default=None, help="adapter: registered name, package.module:attr, or path/to/file.py")
    g.addoption("--model", default=None, help="model adapter (the model-level suite, MODEL-*): hf:<model_type>, "
                "path/to/config.json, package.module:attr, or path/to/file.py[:Name]; excludes --adapter")
    g.addoption("--attn", default=None, metavar="NAMES",
                help="--model: the attention implementations to run (a comma list; default the model's "
                     "attn_implementations; hf: models also take sdpa-flash, sdpa-efficient on CUDA)")
    g.addoption("--device", default="cpu", help="device: cpu (default), cuda, cuda:N (gpu, gpu:N: aliases)")
    g.addoption("--dtype", default="float32", help="float32 (default), float64, bfloat16, float16, a comma list, or all")
    g.addoption("--expectations", default=None, help="expectation file (YAML) of known divergences; none: no file "
                "(default: the adapter's or model's own, when the kit has one)")
    g.addoption("--report-json", default=None, metavar="PATH",
                help="write every test's verdict (clause, dtype, outcome, divergence, reason) as JSON")
    g.addoption("--plot-dir", default=None, metavar="DIR",
                help="write a PNG per failing case (|error| / bound by position and by pair / head, the "
                     "diagnosed divergence's mutant overlaid) into DIR; --report-json links it (needs matplotlib: "
                     "the [docs] extra)")
    g.addoption("--left-pad-fill", type=int, default=None,
                help="opt in to clause POS-LEFT-PAD-FILL: the position_ids value promised at padded slots")
    g.addoption("--clause", action="append", default=[], metavar="ID",
                help="only the tests that check clause ID (repeatable, or a comma list)")
    g.addoption("--family", action="append", default=[], metavar="NAME",
                help="only the tests that check a clause of spec family NAME (repeatable, or a comma list)")
    g.addoption("--posenc-examples", type=int, default=None, metavar="N",
                help="generated cases per operation and dtype (default 6, or the adapter's generated_examples; 0: none)")
    g.addoption("--posenc-seed", type=int, default=None, metavar="N",
                help="draw other generated cases; with --model, other tokens and weights (default 0: the same on "
                     "every run)")
    g.addoption("--posenc-isolation", choices=("process", "none"), default="process",
                help="process (default): the adapter runs in a worker process, restarted after a crash (an "
                     "exit, a signal, a hang past --posenc-timeout fails that test; -n N: one per pytest-xdist "
                     "worker); none: in pytest's own process (-n N: each pytest-xdist worker is the isolation)")
    g.addoption("--posenc-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                help=f"fail a conformance test that runs longer than S seconds (default {DEFAULT_TIMEOUT:g}; "
                     "0: no limit); with -n N the hung worker is killed and restarted")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With -n N and no --max-worker-restart: the third crashed worker ends the run (two restarts;
    the rest is reported as not run, naming the first crash), not pytest-xdist's 4 x N restarts."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "maxworkerrestart", "") is None:
        config.option.maxworkerrestart = "2"


def pytest_configure(config):
    config.addinivalue_line("markers", "posenc: a conformance test (parametrized over --dtype)")
    config.addinivalue_line("markers", "clauses(*ids): the spec clauses a conformance test checks")
    name, model = config.getoption("--adapter"), config.getoption("--model")
    if name and model:
        raise pytest.UsageError("--adapter and --model are mutually exclusive: --adapter checks an implementation's "
                                "operations, --model a whole model (run them as two commands)")
    if not name and not model:
        return
    plot_dir = checked_plot_dir(config)  # before the adapter loads: a missing matplotlib is said at once
    info = None
    try:
        registry.load_checks()  # every registered family, validated: a broken one is named here
        ledger = getattr(config, "workerinput", {}).get(LEDGER_KEY)  # -n N: the run's crash credits
        limit = config.getoption("--posenc-timeout") or None  # loading and describing it, too
        if model:
            from posenc.adapters import load_model_adapter
            from posenc.conformance.model_suite import model_info
            adapter = RemoteAdapter(f"model:{model}", ledger, limit) if isolated(config) else load_model_adapter(model)
            check_adapter_attributes(adapter)
            info = model_info(adapter)
            check_attns(config, adapter)
        else:
            adapter = RemoteAdapter(name, ledger, limit) if isolated(config) else load_adapter(name)
            check_adapter_attributes(adapter)
    except PosencError as e:
        raise pytest.UsageError(str(e))
    device = normalize_device(config.getoption("--device"))
    dev_kind = device.split(":")[0]
    if dev_kind not in adapter.devices:
        raise pytest.UsageError(f"--device {device}: adapter {adapter.name!r} supports {', '.join(adapter.devices)}")
    if not adapter.device_available(device):
        raise pytest.UsageError(f"--device {device}: not available on this machine (adapter {adapter.name!r}); "
                                "the kit never falls back to the CPU silently")
    dtypes = parse_dtypes(config.getoption("--dtype"))
    check_report_path(config)
    exp = config.getoption("--expectations")
    if exp == "none":  # no expectation file: every failure counts
        exp = None
    elif exp is None:
        default = default_expectations(adapter.name, info)
        # a model's recorded divergences are transformers' own: the kit's hf: models and tiny models of a
        # config.json take them, never a user's model adapter whatever its name
        kit_model = str(config.getoption("--model") or "").startswith("hf:") or \
            str(config.getoption("--model") or "").endswith(".json")
        exp = default if default.is_file() and (info is None or kit_model) else None
    st = config.stash[STATE_KEY] = State(adapter, device, dtypes, Path(exp) if exp else None, config)
    st.model_info = info
    st.plot_dir = plot_dir
    from posenc.harness.failure import probe_hints_on
    probe_hints_on(device)  # a failure's hints name only cases this adapter runs
    config.pluginmanager.register(StopWatch(st, config), "posenc-stopwatch")
    if not hasattr(config, "workerinput"):  # not a pytest-xdist worker: this process books the verdicts
        if getattr(config.option, "numprocesses", None) and config.getoption("--posenc-isolation") == "process":
            st.crash_ledger = new_ledger()  # every xdist worker's adapter process draws on the run's credits
        config.pluginmanager.register(Booker(st), "posenc-booker")


def pytest_ignore_collect(collection_path, config):
    """``--model`` collects the model-level suite only; ``--adapter`` everything but it.  The suite's
    folder is this one or any copy of it (a second checkout beside an installed kit): a
    ``conformance`` folder holding the plugin."""
    here = collection_path.parent
    ours = here == Path(__file__).resolve().parent or (here.name == "conformance" and (here / "plugin.py").is_file())
    if not ours or not collection_path.name.startswith("test_"):
        return None
    if config.getoption("--model"):
        return collection_path.name != "test_model.py" or None
    return collection_path.name == "test_model.py" or None


def pytest_unconfigure(config):
    st = config.stash.get(STATE_KEY, None)
    if st is not None:
        from posenc.harness.failure import probe_hints_on
        probe_hints_on(None)
    if st is not None and is_remote(st.adapter):
        st.adapter.posenc_close()
    if st is not None:
        drop_ledger(st.crash_ledger)


def pytest_runtest_setup(item):
    st = item.config.stash.get(STATE_KEY, None)
    if st is not None and is_remote(st.adapter):
        st.adapter.posenc_set_current(item.nodeid)


@pytest.fixture(scope="session")
def left_pad_fill(request):
    """The opt-in fill value for POS-LEFT-PAD-FILL, or None."""
    return request.config.getoption("--left-pad-fill")


def pytest_report_header(config):
    st = config.stash.get(STATE_KEY, None)
    if st is None:
        return None
    a = st.adapter
    vers = ", ".join(f"{k} {v}" for k, v in st.versions.items()) or "n/a"
    if st.model_info is not None:
        i = st.model_info
        enc = ", ".join(f"{k}: {type(v).__name__}" for k, v in i["encodings"].items()) or "none"
        return [f"posenc spec {SPEC_VERSION}: model {a.name} ({i['architecture']}, {i['kind']}; {a.framework}; {vers})",
                f"posenc device {st.device}, dtypes {', '.join(st.dtypes)}, attention {', '.join(model_attns(config))}"
                + (f"; {a.notes}" if a.notes else ""),
                f"posenc encodings: {enc}; capabilities: {', '.join(i['capabilities']) or 'none'}; probes: "
                f"{', '.join(i['probes']) or 'none'}",
                f"posenc expectations: {st.expectations_path or 'none'}",
                "posenc seed " + (f"{config.getoption('--posenc-seed')} (the tokens drawn and the weights built)"
                                  if config.getoption("--posenc-seed") is not None
                                  else "0 (deterministic; --posenc-seed N draws other tokens and weights)")]
    return [
        f"posenc spec {SPEC_VERSION}: adapter {a.name} ({a.framework}; {vers})",
        f"posenc device {st.device}, dtypes {', '.join(st.dtypes)}; cos/sin tables at bfloat16 / float16: "
        f"{st.table_dtype} (table_dtype, ROPE-TABLE-DTYPE)" + (f"; policy: {a.notes}" if a.notes else ""),
        f"posenc expectations: {st.expectations_path or 'none'}",
        f"posenc call forms served: {', '.join(st.call_forms) or 'none'} (ROPE-CALL-FORM)",
        f"posenc generated cases: {generated_examples(config)} per operation and dtype, "
        + (f"seed {config.getoption('--posenc-seed')}" if config.getoption("--posenc-seed") is not None
           else "seed 0 (deterministic; --posenc-seed N for others)"),
    ] + (["posenc float64: angle-based operations are checked at float32 precision (ROPE-PRECISION, "
          "SIN-PRECISION allow float32 angles and cos/sin)"] if "float64" in st.dtypes else []) + (
        ["posenc opt-in clauses not requested: POS-LEFT-PAD-FILL (--left-pad-fill N)"]
        if config.getoption("--left-pad-fill") is None else [])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    st = config.stash.get(STATE_KEY, None)
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
    _mark_timeout(config, items)


def _mark_timeout(config, items) -> None:
    """--posenc-timeout through pytest-timeout: SIGALRM in a serial run (the hung call raises; a
    hang that never returns to Python is only stopped with -n N), a timer thread that ends the
    process in a pytest-xdist worker (the controller books the crash and starts another worker)."""
    limit = config.getoption("--posenc-timeout")
    if limit is None or limit < 0:
        raise pytest.UsageError(f"--posenc-timeout {limit}: must be 0 (no limit) or more seconds")
    if limit == 0:
        return
    # a pytest-xdist worker whose adapter runs in its own process waits for it in Python: SIGALRM as serially
    method = "thread" if hasattr(config, "workerinput") and not isolated(config) else "signal"
    for item in items:
        if clauses_of_item(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit, method=method))


def _mark_expected(st: State, items) -> None:
    """Mark every test an expectation line lists as a strict xfail (after checking that the line's
    clause belongs to the test), and record the stale lines: those whose (case, check) matches
    no collected test at any dtype."""
    for item in items:
        case_id, check, _ = expectations_mod.key_of(item)
        if case_id is not None:
            st.collected.add((case_id, check))
        e = expectation_entry(st, item)
        if e:
            if e.clause not in line_clauses(st, item, e):
                raise pytest.UsageError(
                    f"{st.expectations_path}: expected_failures.{st.expectations.position(e)} ({item.name}): clause "
                    f"{e.clause} is neither checked by the test ({', '.join(clauses_of_item(item))}) nor violated by "
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
    keep = [i for i in items if set(clauses_of_item(i)) & clauses]
    drop = [i for i in items if not set(clauses_of_item(i)) & clauses]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends a worker's collected IDs
def pytest_collection_finish(session):
    st = session.config.stash.get(STATE_KEY, None)
    opt = session.config.getoption
    # a selection -- -k, -m, --clause, --family, --attn, or test node IDs (a posenc rerun line) -- does not
    # judge the expectation lines of the tests it left out
    node_ids = any("::" in str(a) for a in session.config.args)
    selected = opt("keyword") or opt("markexpr") or opt("--clause") or opt("--family") or opt("--attn") or node_ids
    if st and st.stale and not selected:
        if hasattr(session.config, "workerinput"):
            session.items.clear()  # a pytest-xdist worker runs nothing; the controller reports the lines
            return
        raise pytest.UsageError("\n".join(st.stale))
    if st:
        st.stale = []  # a selection: stale lines are not judged


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """``Unsupported`` (and only it) becomes a reported skip with its reason.

    The suite itself never calls ``pytest.skip``: a skip raised inside a conformance test came
    from the adapter (e.g. ``pytest.importorskip`` of the wrapped library) and is a failure.
    """
    if pyfuncitem.get_closest_marker("clauses") is None:
        return (yield)
    from posenc.harness.runner import forget_inputs, take_not_checkable
    forget_inputs()
    take_not_checkable()  # this test's count starts at 0
    try:
        try:
            return (yield)
        finally:  # an input modified in place is the failure, whatever the test concluded from it
            n = take_not_checkable()
            if n:  # compared elements whose bound reaches the largest error they can have (spec.tolerance)
                pyfuncitem.user_properties.append(("posenc_not_checkable", n))
            _inputs_unchanged(pyfuncitem)
    except Unsupported as e:
        pytest.skip(e.reason if e.reason.startswith("n/a: ") else f"unsupported: {e.reason}")  # n/a: a model scenario
    except pytest.fail.Exception as e:
        from posenc.harness.failure import ConformanceFailure, is_timeout
        if isinstance(e, TimedOut) or is_timeout(e):
            clauses = clauses_of_item(pyfuncitem)
            raise ConformanceFailure(
                f"{', '.join(clauses)}: {adapter_name(pyfuncitem.config)} did not finish {pyfuncitem.name} "
                f"within {pyfuncitem.config.getoption('--posenc-timeout'):g} s (--posenc-timeout): a hung or far too "
                f"slow adapter call{_ended(pyfuncitem)}", clauses, raised=True) from None
        raise
    except pytest.skip.Exception as e:
        pytest.fail(f"the adapter raised a pytest skip ({e.msg}); only posenc.adapters.Unsupported "
                    "reports an unsupported case, and a missing library is a failure", pytrace=False)
    except Exception as e:
        # outside call_adapter (an attribute read, an input conversion of a step-by-step check):
        # the adapter's process crashed, or its object raised -- the verdict of the test all the same
        if not isinstance(e, (AdapterError, RemoteFailure)):  # (RemoteFailure: a mixin of the worker's exceptions)
            raise
        from posenc.harness.failure import ConformanceFailure
        clauses = clauses_of_item(pyfuncitem)
        raise ConformanceFailure(f"{', '.join(clauses)}: {adapter_name(pyfuncitem.config)} fails {pyfuncitem.name}\n"
                                 f"  {type(e).__name__}: {exception_text(e)}", clauses, raised=True,
                                 reason=f"{type(e).__name__}: {exception_text(e)}") from None


def _ended(item) -> str:
    """For an isolated adapter ended at this test's timeout: that it counts as a crash, and which."""
    from posenc.conformance.isolation import MAX_CRASHES
    adapter = state(item.config).adapter
    n = adapter.posenc_ended(item.nodeid) if is_remote(adapter) else None
    if n is None:
        return ""  # in pytest's process, or the time ran out in the kit's own code
    return (f"; its process was ended, which counts as crash {n} of {MAX_CRASHES}"
            + ("" if n < MAX_CRASHES else ": no process is started again, the remaining tests fail"))


def _inputs_unchanged(item) -> None:
    """Fail the test, naming its clauses, when a check handed the adapter an input it then
    modified in place (``run_op`` checks its own call at once)."""
    from posenc.harness.runner import check_inputs
    try:
        check_inputs()
    except PosencError as e:
        from posenc.harness.failure import ConformanceFailure
        raise ConformanceFailure(f"{', '.join(clauses_of_item(item))}: {e}", clauses_of_item(item), raised=True) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    st = item.config.stash.get(STATE_KEY, None)
    if st is None or not clauses_of_item(item):
        return rep
    exc = call.excinfo.value if call.excinfo is not None else None
    entry = expectation_entry(st, item)
    if entry is None and isinstance(exc, GeneratedDivergence):
        entry = exc.entries[0]  # a generated test excused by the line(s) its diagnosis named
    if entry is None and rep.when == "call" and rep.failed and (entry := inherited_entry(st, item, exc)) is not None:
        rep.outcome, rep.wasxfail = "skipped", (f"expected divergence {entry.divergence} of {entry.clause} (the line of "
                                                f"the case's own test, seen through its call form): {entry.evidence}")
    if entry and rep.when == "call":
        judge_expected(item, rep, exc, entry, st.expectations_path)
    if rep.when == "call" and rep.outcome == "skipped" and not hasattr(rep, "wasxfail") and isinstance(rep.longrepr, tuple):
        rep.longrepr = (str(item.path), (item.location[1] or 0) + 1, rep.longrepr[2])  # point at the test
    if isinstance(exc, GoldenError) and rep.when == "call":  # the kit's data, not the adapter: never a clause
        unexpect(rep, f"posenc kit error (not counted against {adapter_name(item.config)} or a clause): "
                       f"{exc}")
    if rep.when == "call" or rep.outcome == "failed" or (rep.when == "setup" and rep.outcome == "skipped"):
        if isinstance(exc, GoldenError):
            kind = "kit error"
        elif hasattr(rep, "wasxfail"):  # only an expectation line may make an expected divergence
            kind = "diverges (expected)" if rep.outcome == "skipped" and entry is not None else "failed"
        elif rep.outcome == "skipped":
            kind = "n/a" if skip_reason(rep).startswith("n/a: ") else "unsupported"
        else:
            kind = rep.outcome
        if kind == "failed":
            rep.sections.append(("posenc rerun", rerun_command(item)))
        if kind == "diverges (expected)":  # the clause(s) the expectation file records
            clauses = list(dict.fromkeys(e.clause for e in getattr(exc, "entries", None) or (entry,)))
        else:
            clauses = getattr(exc, "violated", None) if kind != "passed" else None
        props = dict(item.user_properties)
        # a kit error is counted apart (the matrix's KIT ERROR cell), never as the adapter's failure
        counted = {c: kind for c in (clauses or clauses_of_item(item))}
        gen = props.get("posenc_clauses")
        if gen and kind == "passed":  # a generated test: only the clauses its passing examples exercised
            counted = {c: "unsupported" for c in gen["unsupported"]} | {c: "passed" for c in gen["passed"]}
        # What the summary and the report count, attached to the report so that it travels with it
        # from a pytest-xdist worker to the controller (plain JSON data): booked by book.
        record = record_of(item, rep, kind, entry, clauses, exc, counted)
        if kind == "failed" and st.plot_dir is not None:
            plot_failed(item, rep, exc, record, st.plot_dir)
        rep.posenc = {"kind": kind, "counted": counted, "nodeid": item.nodeid,
                      "record": record,
                      "partly_unsupported": props.get("posenc_partly_unsupported"),
                      "lines": props.get("posenc_lines"),
                      "kit_error": f"{item.nodeid}: {exc}" if kind == "kit error" else None}
    return rep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = config.stash.get(STATE_KEY, None)
    if st is None or hasattr(config, "workerinput"):
        return
    tr = terminalreporter
    if st.stale and getattr(config.option, "numprocesses", None):  # pytest-xdist: found by the workers
        tr.write_line("\n".join(st.stale), red=True)
    if st.lines_stale:
        tr.write_line("posenc: stale generated expectation lines (every drawn case they cover passed):", red=True)
        for line in st.lines_stale:
            tr.write_line(f"  {line}")
    if st.lines_not_exercised:
        tr.write_line("posenc: generated expectation lines not exercised (not judged: no drawn case met them):",
                      yellow=True)
        for line in st.lines_not_exercised:
            tr.write_line(f"  {line}")
    if st.kit_errors:
        tr.write_line(f"posenc: {len(st.kit_errors)} kit error(s): the kit's own data or code is at fault, "
                      "not the adapter (not counted under any clause):", red=True)
        for line in st.kit_errors:
            tr.write_line(f"  {line}")
    if not st.outcomes:
        return
    tr.section(f"posenc conformance: {st.adapter.name} on {st.device} ({', '.join(st.dtypes)})")
    kinds = ["passed", "failed", "diverges (expected)", "unsupported"]
    if any(st.outcomes[c]["n/a"] for c in st.outcomes):
        kinds.append("n/a")
    w = max(len(c) for c in st.outcomes) + 2
    tr.write_line(f"{'clause':{w}s}" + "".join(f"{k:>{len(k) + 2}s}" for k in kinds))
    for c in sorted(st.outcomes):
        tr.write_line(f"{c:{w}s}" + "".join(f"{st.outcomes[c][k]:>{len(k) + 2}d}" for k in kinds))
    if st.partly_unsupported:
        tr.write_line("posenc: checks the model could not run (the rest of each test was checked):" if st.model_info
                      else "posenc: generated cases the adapter reported unsupported (redrawn; not passed):", yellow=True)
        for line in st.partly_unsupported:
            tr.write_line(f"  {line}")
    write_not_checkable(tr, st.not_checkable)
    write_contradicted(tr, st.contradicted)
    if st.checked == 0 and st.failed == 0:
        tr.write_line("posenc: no conformance check ran to a verdict: a run that checks nothing fails", red=True)
    if st.not_run:
        tr.write_line(f"posenc: {len(st.not_run)} test(s) did not run: pytest-xdist stopped after "
                      f"{len(st.crashes)} crashed worker(s) (--max-worker-restart, default 2 restarts here); first crash: "
                      f"{st.crashes[0] if st.crashes else '?'}", red=True)
    crashes = st.adapter.posenc_crashes() if is_remote(st.adapter) else Crashes(st.crash_ledger).all() \
        if st.crash_ledger else []
    if crashes:
        tr.write_line(f"posenc: the adapter's process crashed or was ended {len(crashes)} time(s) (each fails its "
                      f"test by ID); first: {crashes[0]}", red=True)
    if interrupted_line(st):
        tr.write_line(interrupted_line(st), red=True)
    if not st.complete:  # set by pytest_sessionfinish, which runs before this summary
        tr.write_line(f"posenc: the run was cut short: these counts cover the {len(st.records)} test(s) that ran"
                      + (" (the --report-json report says complete: false)" if config.getoption("--report-json") else ""),
                      red=True)


def pytest_sessionfinish(session, exitstatus):
    st = session.config.stash.get(STATE_KEY, None)
    if st is None:
        return
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: its controller reports
        session.config.workeroutput["posenc_stale"] = st.stale
        return
    if st.stale and getattr(session.config.option, "numprocesses", None):
        session.exitstatus = pytest.ExitCode.USAGE_ERROR  # the serial run refuses these at collection
    elif st.outcomes and st.checked == 0 and st.failed == 0 and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # xdist stopped restarting crashed workers (an interrupted run: the rest is not run, as serially)
    st.not_run = [] if st.interrupted else sorted((st.scheduled or set()) - st.booked)
    st.complete = not (exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
                       or session.shouldstop or session.shouldfail or st.not_run)
    if st.not_run and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # the generated expectation lines, on the cases the generated tests that ran drew (every worker's)
    st.lines_stale, st.lines_not_exercised = st.expectations.judge_generated(st.line_tally)
    if st.lines_stale and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    from posenc.harness.failure import contradicted_diagnoses
    try:
        st.contradicted = contradicted_diagnoses(st.records)
    except KeyboardInterrupt:  # an advisory: the report is still written
        st.contradicted, st.complete = [], False
    path = session.config.getoption("--report-json")
    if path:
        Path(path).write_text(json.dumps(report(session.config, st, session.exitstatus), indent=1) + "\n",
                              encoding="utf-8")


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    if "dtype" in metafunc.fixturenames and metafunc.definition.get_closest_marker("posenc") is not None:
        metafunc.parametrize("dtype", state(metafunc.config).dtypes)
    if "model_case" in metafunc.fixturenames:
        from posenc.conformance.model_suite import test_ids
        st = state(metafunc.config)
        if st.model_info is None:
            raise pytest.UsageError("the model-level suite (conformance/test_model.py) needs --model NAME")
        attns = model_attns(metafunc.config)
        metafunc.parametrize("model_case", [pytest.param(case, id=f"{cid}@{'+'.join(cl)}", marks=pytest.mark.clauses(*cl))
                                            for cid, case, cl in test_ids(st.model_info, attns)])


@pytest.fixture(scope="session")
def adapter(request) -> Adapter:
    """The adapter under test (from ``--adapter``)."""
    return state(request.config).adapter


@pytest.fixture(scope="session")
def model_under_test(request):
    """``(model adapter, its info, run)``: ``run(scenario, dtype, attn, device)`` runs a scenario where
    the model lives (its worker process, or here with ``--posenc-isolation none``)."""
    st = state(request.config)
    if st.model_info is None:
        raise pytest.UsageError("the model-level suite needs --model NAME")
    a = st.adapter
    seed = request.config.getoption("--posenc-seed") or 0  # the tokens drawn and the weights built
    if is_remote(a):
        def run(name, dtype, attn, device):
            return a.posenc_run_scenario(name, dtype, attn, device, seed)
    else:
        from posenc.conformance.model_suite import run_scenario

        def run(name, dtype, attn, device):
            return run_scenario(a, name, dtype, attn, device, seed)
    return a, st.model_info, run


@pytest.fixture(scope="session")
def device(request) -> str:
    return state(request.config).device


@pytest.fixture(scope="session")
def spec(request):
    return state(request.config).spec
