"""The state of one conformance run: the adapter or model under test, its options and expectation file, what was
collected and booked (one :class:`State` in ``config.stash``), and the options read from the command line.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from importlib import resources
from pathlib import Path
from typing import Optional

import pytest

from posenc import registry
from posenc.spec.shapes import TABLE_POLICIES, table_policy
from posenc.adapters import Adapter, registered
from posenc.conformance import expectations as expectations_mod
from posenc.spec.errors import exception_text
from posenc.spec.models import DTYPES

#: The kit's expectation files (package data of :mod:`posenc.adapters`, found by package, not by path)
EXPECTATIONS_DIR = Path(str(resources.files("posenc.adapters").joinpath("expectations")))

#: --posenc-timeout's default, seconds: over ten times the slowest registered test (about 15 s,
#: keras-hub-jax's generated attention.probs at float16 on 2 CPU cores).
DEFAULT_TIMEOUT = 300.0

STATE_KEY = pytest.StashKey["State"]()

def adapter_versions(adapter: Adapter) -> dict[str, str]:
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

def check_adapter_attributes(adapter: Adapter) -> None:
    """The attributes the plugin reads, read once at the start: a raising or ill-typed one is a
    usage error here, not an INTERNALERROR later."""
    from posenc.spec.errors import UsageError
    try:
        checks = {"name": adapter.name, "framework": adapter.framework, "devices": tuple(adapter.devices),
                  "dtypes": tuple(adapter.dtypes), "notes": adapter.notes,
                  "generated_examples": getattr(adapter, "generated_examples", None),
                  "call_forms": getattr(adapter, "call_forms", ()) or (),
                  "table_dtype": getattr(adapter, "table_dtype", None)}
        adapter.device_available("cpu")
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):  # the user's Ctrl-C; anything else the adapter raises is reported
            raise
        raise UsageError(f"adapter {type(adapter).__name__}: reading its attributes raised {type(e).__name__}: {exception_text(e)}") from None
    for key in ("name", "framework"):  # one printable line: they head the report
        if not isinstance(checks[key], str) or not checks[key] or not checks[key].isprintable():
            raise UsageError(f"adapter {type(adapter).__name__}: {key} must be a non-empty printable string (no line "
                             f"break or control character), got {checks[key]!r}")
    ge = checks["generated_examples"]
    if ge is not None and (isinstance(ge, bool) or not isinstance(ge, int)):
        raise UsageError(f"adapter {checks['name']!r}: generated_examples must be an integer, got {ge!r}")
    _check_call_forms(checks["name"], checks["call_forms"])
    td = checks["table_dtype"]
    if td is not None and (not isinstance(td, str) or td not in TABLE_POLICIES):
        raise UsageError(f"adapter {checks['name']!r}: table_dtype must be one of {', '.join(map(repr, TABLE_POLICIES))} "
                         f"(ROPE-TABLE-DTYPE: the dtype of its cos/sin tables at bfloat16 / float16), got {td!r}")


def _check_call_forms(name: str, forms) -> None:
    """``call_forms`` names call form operations (spec ``form_of``): a typo or a primary operation is a usage
    error naming the known forms, never a form silently left unchecked."""
    from posenc import registry
    from posenc.spec.errors import UsageError
    if isinstance(forms, str) or not all(isinstance(f, str) for f in forms):
        raise UsageError(f"adapter {name!r}: call_forms must be a tuple of operation names, got {forms!r}")
    known = sorted(o.name for o in registry.spec().operations.values() if o.form_of is not None)
    bad = [f for f in forms if f not in known]
    if bad:
        raise UsageError(f"adapter {name!r}: call_forms {', '.join(map(repr, bad))}: not a call form (spec form_of); "
                         f"known: {', '.join(known)}")

def check_report_path(config) -> None:
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
        self.versions = adapter_versions(adapter)
        # read once, at the start: the report is written at the end, when an isolated adapter's process may be gone
        self.table_dtype = table_policy(adapter)
        self.call_forms = tuple(getattr(adapter, "call_forms", ()) or ())
        self.spec = registry.spec()
        self.expectations_path = expectations
        try:
            #: the loaded expectation file: ``lookup(case_id, check, dtype)``, ``excuse_generated(...)``
            self.expectations = (expectations_mod.load(expectations, self.spec, self.versions) if expectations
                                 else expectations_mod.Expectations())
        except expectations_mod.ExpectationError as e:  # before any test: no line of it excuses, none is charged
            raise pytest.UsageError(str(e))
        except Exception as e:  # noqa: BLE001 - the kit failed reading it: named in one line, never a traceback
            raise pytest.UsageError(f"posenc kit error reading expectation file {expectations}: {type(e).__name__}: "
                                    f"{exception_text(e)}") from None
        self.collected: set[tuple[str, str]] = set()  # (case, check) of every collected test, any dtype
        self.outcomes: dict[str, Counter] = defaultdict(Counter)
        self.checked = 0  # passed, or failed exactly as an expectation file says
        self.failed = 0
        self.stale: list[str] = []
        self.records: list[dict] = []  # one verdict per test, for --report-json
        #: [elements, tests] counted "not checkable at this dtype" (spec.tolerance.not_checkable); [] when none
        self.not_checkable: list[int] = []
        self.partly_unsupported: list[str] = []  # generated tests that passed with unsupported draws
        self.kit_errors: list[str] = []  # a golden or kit fault: named, never counted against a clause
        self.complete = True  # false when the session was interrupted or stopped early
        self.booked: set[str] = set()  # node IDs with a verdict
        self.scheduled: Optional[set[str]] = None  # pytest-xdist: the node IDs the workers collected
        self.crashes: list[str] = []  # pytest-xdist: node IDs whose worker died
        self.crash_ledger: Optional[str] = None  # pytest-xdist controller: every worker's adapter crashes
        self.interrupted: Optional[str] = None  # the KeyboardInterrupt that stopped the run, and its test (stops.py)
        self.not_run: list[str] = []  # pytest-xdist: scheduled, never booked (the run was ended)
        self.contradicted: list[dict] = []  # suite.contradicted_diagnoses of the run's records
        # generated expectation lines: index -> [cases covered, passed, excused] over the generated tests
        # that ran; judged at the end of the run (expectations.judge_generated)
        self.line_tally: dict[int, list[int]] = {}
        self.lines_stale: list[str] = []
        self.lines_not_exercised: list[str] = []
        self.model_info: Optional[dict] = None  # --model: the model adapter's description
        self.plot_dir: Optional[Path] = None  # --plot-dir, absolute

def parse_dtypes(text: str) -> list[str]:
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

def check_attns(config, adapter) -> None:
    """A model's attention implementations: a non-empty tuple of names; ``--attn`` names among them
    (or the model's ``attn_extra``: the hf: models' forced CUDA kernels)."""
    from posenc.spec.errors import UsageError
    own = adapter.attn_implementations
    if isinstance(own, str) or not isinstance(own, (tuple, list)) or not own or \
            not all(isinstance(a, str) and a and a.isprintable() for a in own) or len(set(own)) < len(own):
        raise UsageError(f"model {adapter.name!r}: attn_implementations must be a non-empty tuple of distinct names, "
                         f"got {own!r}")
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

def isolated(config) -> bool:
    """The adapter runs in a worker process: --posenc-isolation process (the default) in a serial
    run and in each pytest-xdist worker (so a crash or a hang reads the same with -n N; the
    controller only reads the adapter's attributes, in its own process)."""
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    return config.getoption("--posenc-isolation") == "process" and not controller

def state(config) -> State:
    st = config.stash.get(STATE_KEY, None)
    if st is None:
        regs = ", ".join(sorted(registered()))
        raise pytest.UsageError(f"the conformance suite needs --adapter NAME (an implementation's operations; "
                                f"registered: {regs}) or --model NAME (a whole model: hf:<model_type>, a config.json, "
                                "or a model adapter file)")
    return st

def adapter_name(config) -> str:
    try:
        return str(state(config).adapter.name)
    except BaseException:  # noqa: BLE001 - a crashed or hostile adapter
        return config.getoption("--adapter") or "the adapter"
