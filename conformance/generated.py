"""Generated cases: every operation checked on inputs no adapter can have memorised.

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
  (:func:`replay`) and with the pytest command that reruns the test;
* an example the adapter reports unsupported is counted, never a pass, and another is drawn in
  its place; after :data:`GIVE_UP_AFTER` unsupported draws with one reason (or
  :data:`GIVE_UP_AFTER_VARIED` with several) and none checked the test stops drawing and is
  unsupported, with the reasons;
* a failure is excused only when its diagnosis names the divergence an expectation line records
  for one of its clauses at its dtype (``excuse_generated`` of the expectation file); excused
  examples are not shrunk and the test reports the expected divergence.
"""

from __future__ import annotations

import contextlib
import functools
import math
import unittest
from collections import Counter
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis.errors import Unsatisfiable
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from posenc import families
from posenc.adapters import Adapter, Unsupported
from posenc.spec.errors import exception_text
from posenc.spec.models import PARAM_MODELS
from posenc.spec.ranges import domain

from . import golden as _golden
from .cases import Case, Gen
from .runner import compare_outputs, diagnose, run_case
from .suite import is_timeout

DEFAULT_EXAMPLES = 6
#: The largest position a RoPE-style generated case draws (the goldens go to 131071).
MAX_POSITION = 2 ** 17
SEEDS = st.integers(0, 2 ** 32 - 1)
#: Unsupported draws, with none checked, after which a generated test stops drawing: 40 when they
#: all give one reason (the adapter lacks the operation, or one whole mode of it), else 200 (the
#: reasons depend on the drawn parameters: some draw may be supported; Hypothesis itself would
#: stop after about 460).
GIVE_UP_AFTER = 40
GIVE_UP_AFTER_VARIED = 200


class _NothingSupported(unittest.SkipTest):
    """Stops the Hypothesis engine at once (a skip exception is re-raised, never shrunk)."""


class _Stopped(unittest.SkipTest):
    """An example ran into --posenc-timeout: the engine stops at once (a hung adapter is not
    called again to shrink the case)."""


# ---- drawing helpers for the family generators ------------------------------------------------


def field(draw, model: str, name: str, *, lo: Optional[float] = None, hi: Optional[float] = None):
    """One value of ``model.name`` from its declared domain (optionally narrowed to [lo, hi]).

    Enum / bool fields: one of ``values``; numeric fields: uniform or log-uniform in ``range``
    (integers when the model field is an int, a multiple of ``multiple_of`` when declared).
    """
    rng = domain(families.spec(), model, name)
    if rng.values is not None and rng.range is None:
        return draw(st.sampled_from(rng.values))
    a, b = rng.range
    a, b = max(a, lo) if lo is not None else a, min(b, hi) if hi is not None else b
    ann = str(PARAM_MODELS[model].model_fields[name].annotation)
    integer = "int" in ann and "float" not in ann
    if rng.scale == "log" and a > 0:
        v = math.exp(draw(st.floats(math.log(a), math.log(b))))
    else:
        v = draw(st.floats(a, b))
    if not integer:
        return float(v)
    m = rng.multiple_of or 1
    v = int(round(min(max(v, a), b) / m)) * m
    lo_i = int(math.ceil(a / m)) * m
    return int(min(max(v, lo_i), int(b // m) * m))


#: The sizes a generated width or table length takes (filtered by the field's declared domain):
#: few, so that compiled and shape-specialising adapters (jax, jit, tf.function) reuse their
#: compilations across examples, yet odd, even, tiny, power-of-two and not.
SIZES = (1, 2, 3, 4, 6, 8, 10, 16, 24, 64, 96, 128, 256, 1024)


def size(draw, model: str, name: str, *, lo: Optional[float] = None, hi: Optional[float] = None) -> int:
    """A size for ``model.name`` from :data:`SIZES`, within its declared range (and [lo, hi])."""
    rng = domain(families.spec(), model, name)
    a, b = rng.range
    a, b = max(a, lo) if lo is not None else a, min(b, hi) if hi is not None else b
    m = rng.multiple_of or 1
    ok = [v for v in SIZES if a <= v <= b and v % m == 0]
    return draw(st.sampled_from(ok)) if ok else field(draw, model, name, lo=lo, hi=hi)


def shape(draw, *dims: tuple[int, ...]) -> tuple[int, ...]:
    """One size per dimension, each from its small tuple of choices (bounded distinct shapes)."""
    return tuple(draw(st.sampled_from(d)) for d in dims)


def positions(draw, batch: int, length: int, high: int, *, monotonic: bool = False) -> np.ndarray:
    """int64 ``[batch, length]`` positions in ``[0, high)``: from 0, after a cache, scattered, near
    a power of two, above 65504 (when ``high`` allows), or at the end of the range.  Each row is
    drawn on its own (rows never share positions by construction)."""
    kinds = ["arange", "cache", "near_pow2", "end"] + ([] if monotonic else ["scattered"])
    if high > 65504 + length:
        kinds.append("above_f16")
    rows = []
    for _ in range(batch):
        kind = draw(st.sampled_from(kinds))
        span = max(high - length, 0)
        if kind == "arange":
            start = 0
        elif kind == "cache":
            start = draw(st.integers(1, max(span, 1))) if span else 0
        elif kind == "near_pow2":
            k = draw(st.integers(1, max(1, int(math.log2(max(high, 2))))))
            start = min(max(2 ** k - draw(st.integers(0, length)), 0), span)
        elif kind == "above_f16":
            start = draw(st.integers(65505, high - length))
        elif kind == "end":
            start = span
        else:
            rows.append([draw(st.integers(0, high - 1)) for _ in range(length)])
            continue
        rows.append(list(range(start, start + length)))
    return np.asarray(rows, dtype=np.int64)


def mask(draw, batch: int, length: int) -> np.ndarray:
    """int64 0/1 ``[batch, length]`` attention mask, each row full, left-padded, right-padded or
    with holes, with at least one real token."""
    rows = []
    for _ in range(batch):
        kind = draw(st.sampled_from(["full", "left", "right", "holes"]))
        n = draw(st.integers(0, length - 1))
        if kind == "full" or length == 1:
            row = [1] * length
        elif kind == "left":
            row = [0] * n + [1] * (length - n)
        elif kind == "right":
            row = [1] * (length - n) + [0] * n
        else:
            row = [draw(st.integers(0, 1)) for _ in range(length)]
            row[draw(st.integers(0, length - 1))] = 1
        rows.append(row)
    return np.asarray(rows, dtype=np.int64)


def values(shape_: tuple[int, ...], scale: float = 1.0, offset: float = 0.0) -> Gen:
    """A float input materialised from the example's seed (exact in bf16/f16 for power-of-two scale)."""
    return Gen(tuple(int(s) for s in shape_), scale=scale, offset=offset)


def ids(shape_: tuple[int, ...], high: int) -> Gen:
    return Gen(tuple(int(s) for s in shape_), kind="ids", high=int(high))


def case(op: str, params, inputs: dict[str, Any], clauses, note: str = "") -> Case:
    """A generated case of ``op``; ``clauses`` is filtered to those the operation serves."""
    served = families.operation(op).clauses
    cl = tuple(dict.fromkeys(c for c in clauses if c in served))
    return Case(f"gen-{op}", op, cl or (served[0],), params, inputs, note)


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


def check_example(adapter: Adapter, c: Case, seed: int, dtype: str, device: str, excuse=None) -> str:
    """Run one generated example; returns ``passed``, ``unsupported:<reason>`` or ``excused:<ID>``;
    raises :class:`GeneratedFailure` on any other outcome."""
    g = example_golden(c, seed, dtype)
    try:
        out = run_case(adapter, g, dtype, device)
    except Unsupported as e:
        return f"unsupported:{e.reason}"
    except pytest.fail.Exception as e:
        if is_timeout(e):  # stop, never shrink
            raise _Stopped(str(e.msg)) from None
        raise GeneratedFailure(c, seed, f"the adapter raised pytest's {type(e).__name__} ({exception_text(e)})", raised=True) from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - every other exception is a failure, reported precisely
        raise GeneratedFailure(c, seed, f"{type(e).__name__}: {exception_text(e)}", raised=True) from None
    bad = [r for r in compare_outputs(g, out, dtype) if not r.ok]
    if not bad:
        return "passed"
    matches = diagnose(families.spec(), g, out, dtype)
    hit = {v for m in matches for v in m.violates}
    entry = excuse(set(c.clauses) | hit, dtype, tuple(m.divergence for m in matches)) if excuse else None
    if entry is not None:
        return f"excused:{entry.divergence}"
    inferred = _infer(g, out, dtype) if not matches else ()
    failure = GeneratedFailure(c, seed, "\n  ".join(r.message for r in bad), matches, inferred=inferred)
    failure.plot_data = (g, out)  # --plot-dir: the shrunk example's golden and outputs
    raise failure


def _infer(g, out, dtype) -> tuple[str, ...]:
    try:
        from . import inference
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
    gen = families.generators()[op]

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

    run = settings(max_examples=n, database=None, deadline=None,
                   suppress_health_check=list(HealthCheck), print_blob=False,
                   phases=(Phase.explicit, Phase.generate, Phase.shrink))(given(strategy)(one))
    with _no_local_constants():
        hypothesis_seed(_golden._fnv1a64(f"{op}|{dtype}|{chosen or 0}"))(run)()


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis (6.170, pinned) biases draws towards literals found in the *local* modules
    loaded in the process (``providers._get_local_constants``): the drawn cases would depend on
    which of the kit's, the adapter's or the tests' modules happen to be imported (importing
    ``posenc.spec.hf_config`` changed 1 of 300 ``rope.cos_sin_calls`` cases).  The suite's draws
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


def run_generated(config, adapter: Adapter, device: str, dtype: str, op: str, excuse=None) -> Outcomes:
    """Check ``--posenc-examples`` drawn cases of ``op``; fail with the shrunk case."""
    from .plugin import generated_examples
    getattr(adapter, families.operation(op).method)  # an adapter without the method: Unsupported, at once
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
    except (Unsatisfiable, _NothingSupported):
        pass  # every drawn example was unsupported: reported as unsupported with the reasons
    except _Stopped as e:
        from .plugin import TimedOut
        raise TimedOut(str(e)) from None
    if failure is not None:  # outside the except block: the report is not a chained traceback
        raise_failure(config, adapter, dtype, device, failure)
    return outcomes


def raise_failure(config, adapter: Adapter, dtype: str, device: str, e: GeneratedFailure) -> None:
    from .suite import fail
    detail = (f"generated case (shrunk; seed {e.seed}): {e.case.op} with {params_repr(e.case.params)}\n"
              f"  {e.detail}")
    if e.inferred:
        detail += "\n  diagnosis: no known divergence reproduces this output" + "".join(
            f"\n  inferred: {s}" for s in e.inferred)
    elif not e.matches and not e.raised:
        detail += "\n  diagnosis: no known divergence reproduces this output"
    snippet = replay_snippet(e.case, e.seed, adapter_option(config, adapter), dtype, device)
    detail += "\n  replay the shrunk case in Python:\n" + "\n".join(f"    {ln}" for ln in snippet.splitlines())
    from .failure_plots import PlotData
    values = getattr(e, "plot_data", None)
    fail(e.case.clauses, adapter, e.case, dtype, detail, e.matches, raised=e.raised, inferred=e.inferred,
         reason=f"generated case: {e.detail}", diagnosed=True,
         plot_data=PlotData(values[0], values[1], dtype) if values else None)


def adapter_option(config, adapter: Adapter) -> str:
    opt = config.getoption("--adapter", None)
    return opt or adapter.name


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
        "from posenc.conformance.cases import Case, Gen",
        "from posenc.conformance.generated import replay",
        f"from posenc.spec.models import {', '.join(sorted(models))}",
        f"case = Case({c.id!r}, {c.op!r}, {c.clauses!r}, {params_repr(c.params)},",
        f"            {{{inputs}}})",
        f"print(replay(case, seed={seed}, adapter={adapter!r}, dtype={dtype!r}, device={device!r}))",
    ])


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


def generated_params():
    """``pytest.param`` per operation with a generator, id ``<op>@<CLAUSE+...>``."""
    out = []
    for op in families.generators():
        cl = tuple(families.operation(op).clauses)
        out.append(pytest.param(op, id=f"{op}", marks=pytest.mark.clauses(*cl)))
    return out
