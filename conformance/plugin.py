"""The pytest plugin behind ``pytest conformance --adapter NAME`` (entry point ``pytest11``).

Options: ``--adapter`` (registered name, ``module:attr`` or ``path.py``), ``--device`` (cpu,
cuda, cuda:N; ``gpu`` / ``gpu:N`` are aliases of ``cuda`` / ``cuda:N`` for every framework; an
unavailable device is a usage error), ``--dtype`` (float32 default; float64, bfloat16,
float16, a comma list, or ``all``), ``--expectations`` (an implementer-owned YAML file; by
default ``adapters/expectations/<adapter>.yaml`` when it exists; format 2, keyed by case, check and
dtypes: :mod:`posenc.conformance.expectations`), ``--report-json PATH`` (every test's verdict as
JSON, ``report_format`` :data:`REPORT_FORMAT`: the input of ``posenc matrix`` and ``posenc
expectations init``; documented in docs/report-json.md, schema ``report_schema.json``),
``--plot-dir DIR`` (a PNG per failing case: :mod:`posenc.conformance.failure_plots`).

Reporting: the header names adapter, library versions, device, dtypes and spec version; the
summary counts passed / failed / expected divergences / unsupported per clause.  A run in
which no check passed or diverged as expected fails, and so does an expectation line that is stale.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import shlex
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

import pytest

from posenc import families
from posenc.adapters import Adapter, Unsupported, load_adapter, registered
from posenc.spec import SPEC_VERSION, load_spec
from posenc.spec.errors import AdapterError, GoldenError, PosencError, exception_text
from posenc.spec.models import DTYPES

from . import expectations as expectations_mod
from .isolation import RemoteAdapter, RemoteFailure, is_remote

EXPECTATIONS_DIR = Path(__file__).resolve().parent.parent / "adapters" / "expectations"
#: --posenc-timeout's default, seconds: over ten times the slowest registered test (about 15 s,
#: keras-hub-jax's generated attention.probs at float16 on 2 CPU cores).
DEFAULT_TIMEOUT = 300.0
_KEY = pytest.StashKey["State"]()


def _versions(adapter: Adapter) -> dict[str, str]:
    """``adapter.versions()``, checked once at the start: a ``{library: version}`` dict of strings."""
    try:
        v = adapter.versions()
    except BaseException as e:  # noqa: BLE001 - a usage error now, not a lost summary at the end
        if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
            raise
        raise pytest.UsageError(f"adapter {adapter.name!r}: versions() raised {type(e).__name__}: {exception_text(e)}") from None
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise pytest.UsageError(f"adapter {adapter.name!r}: versions() must return a dict of library name to "
                                f"version string, got {v!r}")
    return dict(v)


def _adapter_attributes(adapter: Adapter) -> None:
    """The attributes the plugin reads, read once at the start: a raising or ill-typed one is a
    usage error here, not an INTERNALERROR later."""
    from posenc.spec.errors import UsageError
    try:
        checks = {"name": adapter.name, "framework": adapter.framework, "devices": tuple(adapter.devices),
                  "dtypes": tuple(adapter.dtypes), "notes": adapter.notes,
                  "generated_examples": getattr(adapter, "generated_examples", None)}
        adapter.device_available("cpu")
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
            raise
        raise UsageError(f"adapter {type(adapter).__name__}: reading its attributes raised {type(e).__name__}: {exception_text(e)}") from None
    for key in ("name", "framework"):
        if not isinstance(checks[key], str) or not checks[key]:
            raise UsageError(f"adapter {type(adapter).__name__}: {key} must be a non-empty string, got {checks[key]!r}")
    ge = checks["generated_examples"]
    if ge is not None and (isinstance(ge, bool) or not isinstance(ge, int)):
        raise UsageError(f"adapter {checks['name']!r}: generated_examples must be an integer, got {ge!r}")


def _report_path(config) -> None:
    """``--report-json PATH`` must be writable: checked before the run, not after it."""
    path = config.getoption("--report-json")
    if not path:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        why = ("is a directory" if p.is_dir() else f"folder {parent} does not exist" if not parent.is_dir()
               else "is not writable")
        raise pytest.UsageError(f"--report-json {path}: {why}")


class State:
    def __init__(self, adapter: Adapter, device: str, dtypes: list[str], expectations: Optional[Path], config=None):
        self.adapter, self.device, self.dtypes, self.config = adapter, device, dtypes, config
        self.versions = _versions(adapter)
        self.spec = load_spec()
        self.expectations_path = expectations
        try:
            #: the loaded expectation file: ``lookup(case_id, check, dtype)``, ``excuse_generated(...)``
            self.expectations = (expectations_mod.load(expectations, self.spec, self.versions) if expectations
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
        self.kit_errors: list[str] = []  # a golden or kit fault: named, never counted against a clause
        self.complete = True  # false when the session was interrupted or stopped early
        self.booked: set[str] = set()  # node IDs with a verdict
        self.scheduled: Optional[set[str]] = None  # pytest-xdist: the node IDs the workers collected
        self.crashes: list[str] = []  # pytest-xdist: node IDs whose worker died
        self.not_run: list[str] = []  # pytest-xdist: scheduled, never booked (the run was ended)
        self.contradicted: list[dict] = []  # suite.contradicted_diagnoses of the run's records
        self.model_info: Optional[dict] = None  # --model: the model adapter's description
        self.plot_dir: Optional[Path] = None  # --plot-dir, absolute


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
                     "exit, a signal, a hang past --posenc-timeout fails that test); none: in pytest's own "
                     "process (-n N: each pytest-xdist worker is the isolation)")
    g.addoption("--posenc-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                help=f"fail a conformance test that runs longer than S seconds (default {DEFAULT_TIMEOUT:g}; "
                     "0: no limit); with -n N the hung worker is killed and restarted")


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
    plot_dir = _plot_dir(config)  # before the adapter loads: a missing matplotlib is said at once
    info = None
    try:
        families.load_checks()  # every registered family, validated: a broken one is named here
        if model:
            from posenc.adapters import load_model_adapter
            from .model_suite import model_info
            adapter = RemoteAdapter(f"model:{model}") if _isolated(config) else load_model_adapter(model)
            _adapter_attributes(adapter)
            info = model_info(adapter)
            _check_attns(config, adapter)
        else:
            adapter = RemoteAdapter(name) if _isolated(config) else load_adapter(name)
            _adapter_attributes(adapter)
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
    _report_path(config)
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
    st = config.stash[_KEY] = State(adapter, device, dtypes, Path(exp) if exp else None, config)
    st.model_info = info
    st.plot_dir = plot_dir
    if not hasattr(config, "workerinput"):  # not a pytest-xdist worker: this process books the verdicts
        config.pluginmanager.register(_Booker(st), "posenc-booker")


def _check_attns(config, adapter) -> None:
    """A model's attention implementations: a non-empty tuple of names; ``--attn`` names among them
    (or the model's ``attn_extra``: the hf: models' forced CUDA kernels)."""
    from posenc.spec.errors import UsageError
    own = adapter.attn_implementations
    if isinstance(own, str) or not isinstance(own, (tuple, list)) or not own or \
            not all(isinstance(a, str) and a for a in own):
        raise UsageError(f"model {adapter.name!r}: attn_implementations must be a non-empty tuple of names, got {own!r}")
    given = config.getoption("--attn")
    if given is None:
        return
    names = [a.strip() for a in given.split(",") if a.strip()]
    extra = tuple(getattr(adapter, "attn_extra", ()) or ())
    unknown = [a for a in names if a not in own and a not in extra]
    if not names or unknown:
        raise UsageError(f"--attn {given!r}: " + (f"unknown {', '.join(unknown)}; " if unknown else "no name; ")
                         + f"model {adapter.name!r} runs {', '.join((*own, *extra))}")


def model_attns(config) -> tuple[str, ...]:
    """The attention implementations a --model run checks: ``--attn`` as given, else the model's own."""
    given = config.getoption("--attn")
    if given:
        return tuple(dict.fromkeys(a.strip() for a in given.split(",") if a.strip()))
    return tuple(state(config).adapter.attn_implementations)


def default_expectations(name: str, model_info: Optional[dict] = None) -> Path:
    """The default expectation file of an adapter (``adapters/expectations/<name>.yaml``) or of a model
    (``adapters/expectations/models/<name>.yaml``, ``:`` written ``-``: ``hf-llama.yaml``; a tiny
    model of a user's config.json, ``config:<file>``, takes its architecture's: what transformers
    does there is the architecture's code, whatever the config's numbers)."""
    if model_info is not None:
        if name.startswith("config:"):
            name = f"hf:{model_info['architecture']}"
        return EXPECTATIONS_DIR / "models" / f"{name.replace(':', '-').replace('/', '-')}.yaml"
    return EXPECTATIONS_DIR / f"{name}.yaml"


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


def _isolated(config) -> bool:
    """The adapter runs in a worker process: --posenc-isolation process (the default) in a run
    that is not pytest-xdist's (there each xdist worker is the isolation, and the controller
    only reads the adapter's attributes)."""
    xdist = getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput")
    return config.getoption("--posenc-isolation") == "process" and not xdist


def pytest_unconfigure(config):
    st = config.stash.get(_KEY, None)
    if st is not None and is_remote(st.adapter):
        st.adapter.posenc_close()


def pytest_runtest_setup(item):
    st = item.config.stash.get(_KEY, None)
    if st is not None and is_remote(st.adapter):
        st.adapter.posenc_set_current(item.nodeid)


@pytest.fixture(scope="session")
def left_pad_fill(request):
    """The opt-in fill value for POS-LEFT-PAD-FILL, or None."""
    return request.config.getoption("--left-pad-fill")


def state(config) -> State:
    st = config.stash.get(_KEY, None)
    if st is None:
        regs = ", ".join(sorted(registered()))
        raise pytest.UsageError(f"the conformance suite needs --adapter NAME (an implementation's operations; "
                                f"registered: {regs}) or --model NAME (a whole model: hf:<model_type>, a config.json, "
                                "or a model adapter file)")
    return st


def pytest_report_header(config):
    st = config.stash.get(_KEY, None)
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
    method = "thread" if hasattr(config, "workerinput") else "signal"
    for item in items:
        if _clauses_of(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(limit, method=method))


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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends a worker's collected IDs
def pytest_collection_finish(session):
    st = session.config.stash.get(_KEY, None)
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
    from .runner import forget_inputs
    forget_inputs()
    try:
        try:
            return (yield)
        finally:  # an input modified in place is the failure, whatever the test concluded from it
            _inputs_unchanged(pyfuncitem)
    except Unsupported as e:
        pytest.skip(e.reason if e.reason.startswith("n/a: ") else f"unsupported: {e.reason}")  # n/a: a model scenario
    except pytest.fail.Exception as e:
        from .suite import ConformanceFailure, is_timeout
        if isinstance(e, TimedOut) or is_timeout(e):
            clauses = _clauses_of(pyfuncitem)
            raise ConformanceFailure(
                f"{', '.join(clauses)}: {_adapter_name(pyfuncitem.config)} did not finish {pyfuncitem.name} "
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
        from .suite import ConformanceFailure
        clauses = _clauses_of(pyfuncitem)
        raise ConformanceFailure(f"{', '.join(clauses)}: {_adapter_name(pyfuncitem.config)} fails {pyfuncitem.name}\n"
                                 f"  {type(e).__name__}: {exception_text(e)}", clauses, raised=True,
                                 reason=f"{type(e).__name__}: {exception_text(e)}") from None


def _ended(item) -> str:
    """For an isolated adapter ended at this test's timeout: that it counts as a crash, and which."""
    from .isolation import MAX_CRASHES
    adapter = state(item.config).adapter
    n = adapter.posenc_ended(item.nodeid) if is_remote(adapter) else None
    if n is None:
        return ""  # in pytest's process, or the time ran out in the kit's own code
    return (f"; its process was ended, which counts as crash {n} of {MAX_CRASHES}"
            + ("" if n < MAX_CRASHES else ": no process is started again, the remaining tests fail"))


def _adapter_name(config) -> str:
    try:
        return str(state(config).adapter.name)
    except BaseException:  # noqa: BLE001 - a crashed or hostile adapter
        return config.getoption("--adapter") or "the adapter"


def _inputs_unchanged(item) -> None:
    """Fail the test, naming its clauses, when a check handed the adapter an input it then
    modified in place (``run_op`` checks its own call at once)."""
    from .runner import check_inputs
    try:
        check_inputs()
    except PosencError as e:
        from .suite import ConformanceFailure
        raise ConformanceFailure(f"{', '.join(_clauses_of(item))}: {e}", _clauses_of(item), raised=True) from None


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
    if isinstance(exc, GoldenError) and rep.when == "call":  # the kit's data, not the adapter: never a clause
        _unexpect(rep, f"posenc kit error (not counted against {item.config.getoption('--adapter')} or a clause): "
                       f"{exc}")
    if rep.when == "call" or rep.outcome == "failed" or (rep.when == "setup" and rep.outcome == "skipped"):
        if isinstance(exc, GoldenError):
            kind = "kit error"
        elif hasattr(rep, "wasxfail"):  # only an expectation line may make an expected divergence
            kind = "diverges (expected)" if rep.outcome == "skipped" and entry is not None else "failed"
        elif rep.outcome == "skipped":
            kind = "n/a" if _skip_reason(rep).startswith("n/a: ") else "unsupported"
        else:
            kind = rep.outcome
        if kind == "failed":
            rep.sections.append(("posenc rerun", rerun_command(item)))
        if kind == "diverges (expected)":
            clauses = [entry.clause]  # the clause the expectation file records
        else:
            clauses = getattr(exc, "violated", None) if kind != "passed" else None
        props = dict(item.user_properties)
        # a kit error is counted apart (the matrix's KIT ERROR cell), never as the adapter's failure
        counted = {c: kind for c in (clauses or _clauses_of(item))}
        gen = props.get("posenc_clauses")
        if gen and kind == "passed":  # a generated test: only the clauses its passing examples exercised
            counted = {c: "unsupported" for c in gen["unsupported"]} | {c: "passed" for c in gen["passed"]}
        # What the summary and the report count, attached to the report so that it travels with it
        # from a pytest-xdist worker to the controller (plain JSON data): booked by _book.
        record = _record(item, rep, kind, entry, clauses, exc, counted)
        if kind == "failed" and st.plot_dir is not None:
            _plot(item, rep, exc, record, st.plot_dir)
        rep.posenc = {"kind": kind, "counted": counted, "nodeid": item.nodeid,
                      "record": record,
                      "partly_unsupported": props.get("posenc_partly_unsupported"),
                      "kit_error": f"{item.nodeid}: {exc}" if kind == "kit error" else None}
    return rep


_TEST_ID = re.compile(r"test_(?P<check>\w+)\[(?P<dtype>[a-z0-9]+)-(?P<case>[^@\]]+)(?:@(?P<clauses>[^\]]+))?\]")


def _skip_reason(rep) -> str:
    return rep.longrepr[2].removeprefix("Skipped: ") if isinstance(rep.longrepr, tuple) else ""


def _crash_payload(st: State, report) -> Optional[dict]:
    """The verdict of a test whose worker process died (an exit, a signal, an OOM kill, a
    --posenc-timeout): failed under the clauses of its ID, by ID, with the cause; the report's
    text gets the clause header."""
    name = report.nodeid.rsplit("::", 1)[-1]
    m = _TEST_ID.fullmatch(name)
    if m is None:
        return None
    check, dtype, case = m["check"], m["dtype"], m["case"]
    clauses = m["clauses"].split("+") if m["clauses"] else []
    if not clauses and check == "generated":
        try:
            clauses = list(families.operation(case).clauses)
        except KeyError:
            pass
    cause = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "the worker process died"
    limit = st.config.getoption("--posenc-timeout")
    text = (f"{', '.join(clauses)}: {st.adapter.name} crashed its process on case {case} ({dtype}): {cause}; "
            f"an exit, a signal, an out-of-memory kill{f' or --posenc-timeout ({limit:g} s)' if limit else ''} "
            "(the worker's stderr above says which). The worker was restarted")
    report.longrepr = text
    node = report.nodeid if Path(report.nodeid.split("::")[0]).is_absolute() else \
        str(Path(str(st.config.rootpath)) / report.nodeid)
    report.sections.append(("posenc rerun", _rerun(st.config, node, dtype)))
    record = {"test_id": name, "case": case, "check": check, "dtype": dtype, "clauses": clauses,
              "outcome": "failed", "violated": clauses, "divergence": None, "expected_reason": None,
              "diagnosis": [], "inferred": [], "raised": True, "reason": text[:300], "generated": None,
              "counted": {c: "failed" for c in clauses}}
    st.crashes.append(report.nodeid)
    return {"kind": "failed", "counted": {c: "failed" for c in clauses}, "record": record, "partly_unsupported": None,
            "kit_error": None, "nodeid": report.nodeid}


def _book(st: State, payload: dict) -> None:
    """Count one test's verdict (``rep.posenc`` of its report) in the run's state."""
    kind = payload["kind"]
    if kind in ("passed", "diverges (expected)"):
        st.checked += 1
    if kind in ("failed", "kit error"):
        st.failed += 1
    if kind == "kit error":
        st.kit_errors.append(payload["kit_error"])
    for c, k in payload["counted"].items():
        st.outcomes[c][k] += 1
    if st.plot_dir is not None:  # --plot-dir: every record says whether it has a picture
        payload["record"].setdefault("plot", None)
    st.records.append(payload["record"])
    st.booked.add(payload["nodeid"])
    if payload["partly_unsupported"]:
        st.partly_unsupported.append(payload["partly_unsupported"])


class _Booker:
    """Books every report where the run is summarised: the pytest process itself, or, under
    pytest-xdist, the controller (a worker only attaches ``rep.posenc`` and forwards the report)."""

    def __init__(self, st: State):
        self.st = st

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints a crash report
    def pytest_runtest_logreport(self, report):
        payload = getattr(report, "posenc", None)
        if payload is None and report.failed and report.when not in ("setup", "call", "teardown"):
            payload = _crash_payload(self.st, report)  # pytest-xdist: the worker died inside the test
        if payload is not None:
            _book(self.st, payload)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):  # what the workers will run
        self.st.scheduled = set(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):  # pytest-xdist controller: a worker's stale lines
        for line in getattr(node, "workeroutput", {}).get("posenc_stale", []):
            if line not in self.st.stale:
                self.st.stale.append(line)


# ---- --plot-dir (conformance/failure_plots.py) ------------------------------------------------


def _plot_dir(config) -> Optional[Path]:
    """``--plot-dir DIR``: matplotlib importable (else a usage error naming the ``[docs]`` extra),
    an --adapter run, the folder made; the absolute path, or None without the option."""
    given = config.getoption("--plot-dir")
    if not given:
        return None
    if config.getoption("--model"):
        raise pytest.UsageError("--plot-dir: the model-level suite (--model) draws no plots; it plots the "
                                "failing cases of an --adapter run")
    from .failure_plots import PlotsUnavailable, require_matplotlib
    try:
        require_matplotlib()
    except PlotsUnavailable as e:
        raise pytest.UsageError(str(e)) from None
    p = Path(given).resolve()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise pytest.UsageError(f"--plot-dir {given}: {exception_text(e)}") from None
    if not os.access(p, os.W_OK):
        raise pytest.UsageError(f"--plot-dir {given}: is not writable")
    return p


def _plot(item, rep, exc, record: dict, plot_dir: Path) -> None:
    """Draw a failed test's picture (a failure that compared values: golden, generated, an
    invariant check's first call out of tolerance) and link it in ``record["plot"]``: the path
    relative to the --report-json file's folder (else absolute).  A plot that cannot be drawn never
    changes the verdict: the report's ``posenc plot`` section says why."""
    data = getattr(exc, "plot_data", None)
    if data is None or record.get("raised"):
        return
    from .failure_plots import plot_failure, plot_name
    try:
        diag = record.get("diagnosis") or []
        path = plot_failure(plot_dir / plot_name(item.name, item.nodeid), data, test_id=item.name,
                            clauses=record.get("violated") or record.get("clauses") or (),
                            divergence=diag[0]["divergence"] if diag else None)
    except Exception as e:  # noqa: BLE001 - the verdict stands without its picture
        rep.sections.append(("posenc plot", f"not drawn: {type(e).__name__}: {exception_text(e)}"))
        return
    if path is None:
        return
    report = item.config.getoption("--report-json")
    link = str(path)
    if report:
        try:
            link = Path(os.path.relpath(path, Path(report).resolve().parent)).as_posix()
        except ValueError:  # another drive
            pass
    record["plot"] = link
    rep.sections.append(("posenc plot", str(path)))


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
    st = config.stash.get(_KEY, None)
    if st is not None and st.model_info is not None:
        return 0  # the model-level suite draws no generated cases
    if n is None:
        from .generated import DEFAULT_EXAMPLES
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
        groups.setdefault(re.sub(r"(?<![\w.:])[-+]?\d+(\.\d+)?(e[-+]?\d+)?(?![\w])", "#", r), []).append(r)
    return [g[0] if len(g) == 1 else f"{g[0]} (and {len(g) - 1} more like it, other values)" for g in groups.values()]


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
            f"({'; '.join(r[:120] for r in reasons[:3])}{' ...' if len(reasons) > 3 else ''})"))
    if excuses is not None and excuses.entries:
        ids = ", ".join(dict.fromkeys(e.divergence for e in excuses.entries))
        raise GeneratedDivergence(f"expected divergence {ids} ({counts['excused']} of {sum(outcomes.values())} "
                                  f"generated examples; the others passed or were unsupported)", excuses.entries)
    if counts["passed"] == 0:
        raise Unsupported("; ".join(reasons) or f"no generated example of {op} ran")


def rerun_command(item) -> str:
    """A command that reruns exactly this test, as pasted (same adapter, device, dtype, options)."""
    dtype = item.callspec.params.get("dtype", "float32") if hasattr(item, "callspec") else "float32"
    return _rerun(item.config, f"{item.path}::{item.name}", dtype)


def _rerun(config, node: str, dtype: str) -> str:
    opt = config.getoption
    which = "--model" if opt("--model") else "--adapter"
    cmd = ["pytest", node, which, opt(which), "--device", opt("--device"), "--dtype", dtype]
    for name in ("--expectations", "--left-pad-fill", "--posenc-examples", "--posenc-seed", "--attn"):
        if opt(name) is not None:
            cmd += [name, str(opt(name))]
    if opt("--posenc-timeout") != DEFAULT_TIMEOUT:
        cmd += ["--posenc-timeout", f"{opt('--posenc-timeout'):g}"]
    if opt("--posenc-isolation") != "process":
        cmd += ["--posenc-isolation", opt("--posenc-isolation")]
    return " ".join(shlex.quote(str(c)) for c in cmd)


#: ``report_format`` of ``--report-json`` (docs/report-json.md, conformance/report_schema.json):
#: bumped when a field changes meaning or is removed; adding a field does not bump it.
REPORT_FORMAT = 1


def _ratio(x) -> Optional[float]:
    x = float(x)
    return x if math.isfinite(x) else None


_OUTCOME = {"diverges (expected)": "diverges", "kit error": "error"}  # report names of the kinds


def _record(item, rep, kind: str, entry, violated, exc=None, counted=None) -> dict:
    """One test's verdict for ``--report-json`` (and ``posenc matrix``); fields: docs/report-json.md."""
    callspec = getattr(item, "callspec", None)
    case_id, check, dtype = expectations_mod.key_of(item)
    reason = ""
    if kind in ("unsupported", "n/a") and isinstance(rep.longrepr, tuple):
        reason = rep.longrepr[2].removeprefix("Skipped: ").removeprefix("unsupported: ").removeprefix("n/a: ")
    elif kind == "kit error":
        reason = str(exc)[:300]
    elif kind == "failed":
        from .suite import ConformanceFailure
        # the kit's failure says what is wrong in one line; anything else: its report's last line
        reason = (exc.reason if isinstance(exc, ConformanceFailure) else
                  (str(getattr(rep, "longreprtext", "") or "").strip().splitlines() or [""])[-1])[:300]
    diverges = kind == "diverges (expected)"
    return {
        "test_id": item.name,
        "case": case_id,
        "check": check,
        "dtype": callspec.params.get("dtype") if callspec else dtype,
        "clauses": _clauses_of(item),
        "outcome": _OUTCOME.get(kind, kind),
        "violated": list(violated or []),
        "divergence": entry.divergence if entry and diverges else None,
        "expected_reason": entry.evidence if entry and diverges else None,
        "diagnosis": [{"divergence": m.divergence, "violates": list(m.violates), "ratio": _ratio(m.ratio)}
                      for m in getattr(exc, "matches", ()) or ()] if kind != "passed" else [],
        "inferred": [str(x) for x in getattr(exc, "inferred", ()) or ()] if kind != "passed" else [],
        "raised": bool(getattr(exc, "raised", True)) if kind == "failed" and exc is not None else False,
        "reason": reason,
        "generated": dict(item.user_properties).get("generated"),
        "counted": {c: _OUTCOME.get(k, k) for c, k in (counted or {}).items()},
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
        "adapter": a.name, "framework": a.framework, "versions": st.versions, "device": st.device,
        "model": None if st.model_info is None else {"architecture": st.model_info["architecture"],
                                                     "kind": st.model_info["kind"],
                                                     "attn_implementations": list(model_attns(config)),
                                                     "notes": str(a.notes or "")},
        "dtypes": st.dtypes, "spec_version": SPEC_VERSION, "exit_status": int(exit_status),
        "expectations": _expectations_given(config, st),
        "examples": generated_examples(config),
        # false for a run cut short (Ctrl-C, -x / --maxfail, an internal error): its results are
        # the tests that ran; posenc matrix refuses it
        "complete": st.complete,
        # diagnoses the run contradicts: the named divergence's mutant fails a golden case that passed
        "contradicted": st.contradicted,
        "results": st.records,
    }


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = config.stash.get(_KEY, None)
    if st is None or hasattr(config, "workerinput"):
        return
    tr = terminalreporter
    if st.stale and getattr(config.option, "numprocesses", None):  # pytest-xdist: found by the workers
        tr.write_line("\n".join(st.stale), red=True)
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
    if st.contradicted:
        tr.write_line("posenc: diagnoses this run contradicts (a golden case refutes the divergence: the bug "
                      "agrees with it only on the failing calls; rerun the case with -k to compare):", yellow=True)
        for c in st.contradicted:
            why = (f"its mutant fails golden case {c['case']}, which passed" if c["golden"] == "passed" else
                   f"the golden test of case {c['case']} failed without naming it")
            tr.write_line(f"  {c['divergence']} (named for {c['failures']} failure(s) at {c['dtype']}): {why}")
    if st.checked == 0 and st.failed == 0:
        tr.write_line("posenc: no conformance check ran to a verdict: a run that checks nothing fails", red=True)
    if st.not_run:
        tr.write_line(f"posenc: {len(st.not_run)} test(s) did not run: pytest-xdist stopped after "
                      f"{len(st.crashes)} crashed worker(s) (--max-worker-restart, default 2 restarts here); first crash: "
                      f"{st.crashes[0] if st.crashes else '?'}", red=True)
    crashes = st.adapter.posenc_crashes() if is_remote(st.adapter) else []
    if crashes:
        tr.write_line(f"posenc: the adapter's process crashed or was ended {len(crashes)} time(s) (each fails its "
                      f"test by ID); first: {crashes[0]}", red=True)
    if not st.complete:  # set by pytest_sessionfinish, which runs before this summary
        tr.write_line(f"posenc: the run was cut short: these counts cover the {len(st.records)} test(s) that ran"
                      + (" (the --report-json report says complete: false)" if config.getoption("--report-json") else ""),
                      red=True)


def pytest_sessionfinish(session, exitstatus):
    st = session.config.stash.get(_KEY, None)
    if st is None:
        return
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: its controller reports
        session.config.workeroutput["posenc_stale"] = st.stale
        return
    if st.stale and getattr(session.config.option, "numprocesses", None):
        session.exitstatus = pytest.ExitCode.USAGE_ERROR  # the serial run refuses these at collection
    elif st.outcomes and st.checked == 0 and st.failed == 0 and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    st.not_run = sorted((st.scheduled or set()) - st.booked)  # xdist stopped restarting crashed workers
    st.complete = not (exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
                       or session.shouldstop or session.shouldfail or st.not_run)
    if st.not_run and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    from .suite import contradicted_diagnoses
    try:
        st.contradicted = contradicted_diagnoses(st.records)
    except KeyboardInterrupt:  # an advisory: the report is still written
        st.contradicted, st.complete = [], False
    path = session.config.getoption("--report-json")
    if path:
        Path(path).write_text(json.dumps(report(session.config, st, session.exitstatus), indent=1) + "\n",
                              encoding="utf-8")


# ---- fixtures and parametrization ------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    if "dtype" in metafunc.fixturenames and metafunc.definition.get_closest_marker("posenc") is not None:
        metafunc.parametrize("dtype", state(metafunc.config).dtypes)
    if "model_case" in metafunc.fixturenames:
        from .model_suite import test_ids
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
        from .model_suite import run_scenario

        def run(name, dtype, attn, device):
            return run_scenario(a, name, dtype, attn, device, seed)
    return a, st.model_info, run


@pytest.fixture(scope="session")
def device(request) -> str:
    return state(request.config).device


@pytest.fixture(scope="session")
def spec(request):
    return state(request.config).spec
