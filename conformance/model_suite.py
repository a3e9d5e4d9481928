"""The model-level suite behind ``pytest conformance --model NAME`` (spec family ``model``).

One test per scenario (a MODEL-* clause), attention implementation and dtype:
``test_model[<dtype>-<attn>-<scenario>@<MODEL-...+POS-...>]``.  A test builds the model (once per
dtype, attention implementation and device in the process that holds it), runs the scenario's
driver (:mod:`posenc.harness.model_run`) and judges what it recorded
(:func:`posenc.harness.model_judge.judge`).  With ``--posenc-isolation process`` (the default)
the model lives in the adapter's worker process (:mod:`posenc.conformance.isolation`): the driver
runs there and only its record -- plain data and NumPy arrays -- comes back, so a crash or a hang
inside the model fails that test and the run goes on.

A scenario that does not apply to the model (a decode scenario of an encoder) is reported
``n/a`` with the reason; one whose capability the model lacks is *unsupported* with the reason;
neither is ever a pass.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Optional

from posenc import registry
from posenc.adapters import Unsupported
from posenc.harness.failure import ConformanceFailure, is_timeout
from posenc.harness.model_judge import judge
from posenc.harness.model_words import positions_used
from posenc.harness.model_oracles import encodings_problem
from posenc.harness.model_run import CAPABILITIES, MODEL_KINDS, Run
from posenc.spec.errors import AdapterError, KitError, UsageError, exception_text


class NotApplicable(Unsupported):
    """The scenario does not apply to the model (reported ``n/a``, counted apart from unsupported)."""

    def __init__(self, reason: str):
        super().__init__(f"n/a: {reason}")


def scenario_by_name(name: str):
    for sc in registry.scenarios().values():
        if sc.name == name:
            return sc
    raise KeyError(f"unknown scenario {name!r}")


def run_scenario(adapter, name: str, dtype: str, attn: str, device: str, seed: int = 0) -> dict:
    """Build the model and run scenario ``name``; its record (``Run.trace()``).  Every scenario gets a
    model built afresh (the same seed, so the same weights): no state a model keeps between calls
    (a rope delta, frequencies grown for a long sequence) carries from one scenario to the next, so a
    verdict does not depend on which scenarios ran before it.  Within a scenario the passes run in
    order on one model object.  Runs where the model lives (the worker, or pytest's process with
    ``--posenc-isolation none``)."""
    sc = scenario_by_name(name)
    info = adapter.info()
    seen = description(info)  # compared with the run's validated description by the judge (_judged)
    model = adapter.build(dtype=dtype, device=device, attn_implementation=attn, seed=seed)
    twin, why = _float64_twin(model, dtype)  # made before the run: the same fresh state
    r = Run(model, info, seed=seed)
    sc.run(r)
    trace = r.trace()
    trace["described"] = seen
    if twin is not None:
        try:
            rt = Run(twin, info, seed=seed)
            sc.run(rt)
            trace["twin_pairs"], trace["twin_changes"] = rt.pairs, rt.changes
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - the twin is optional: its check is left out, said
            if is_timeout(e):
                raise
            why = f"the float64 twin raised {type(e).__name__}: {exception_text(e)}"
    if why:
        trace["twin_note"] = why
    return trace


def description(info: dict) -> str:
    """The model's description (``ModelAdapter.info``) as one comparable string (the same on either side
    of the worker's wire: tuples as lists, parameter models as their class and fields)."""
    def plain(v):
        if hasattr(v, "model_dump"):
            return [type(v).__name__, plain(v.model_dump())]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v
    return json.dumps(plain(info), sort_keys=True, default=repr)


def _float64_twin(model, dtype: str):
    """``(twin, why not)``: the built model's float64 twin (``model.float64_twin()``: the same weights, as
    rounded to ``dtype``, and the same code, computing in float64), whose logit pairs the judge also
    compares, under the float64 bound (:func:`posenc.spec.tolerance.logits_bound`); none at float64 (the
    run is its own twin) or where the model offers none (``why`` is then None: the twin is optional)."""
    make = getattr(model, "float64_twin", None)
    if dtype == "float64" or make is None:
        return None, None
    try:
        twin = make()
    except Unsupported as e:
        return None, f"no float64 twin ({e.reason})"
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a pytest outcome or a BaseException of its own: said, not the run's
        if is_timeout(e):
            raise
        return None, f"float64_twin() raised {type(e).__name__}: {exception_text(e)}"
    if twin is None or twin is model:
        return None, f"float64_twin() returned {'None' if twin is None else 'the model itself'}, not a twin"
    return twin, None


def model_info(adapter) -> dict:
    """The adapter's description (``ModelAdapter.info``), its fields checked: a usage error names
    the one that is wrong."""
    try:
        info = adapter.info()
    except Unsupported as e:
        raise UsageError(f"model {getattr(adapter, 'name', adapter)!r}: {e.reason}") from None
    except UsageError:  # the worker's own (a hang while describing it): said as it is
        raise
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        raise UsageError(f"model {getattr(adapter, 'name', adapter)!r}: describing it (info / encodings) raised "
                         f"{type(e).__name__}: {exception_text(e)}") from None
    from posenc.adapters.model import PROBE_KINDS
    name = info.get("name")

    def bad(what: str):
        raise UsageError(f"model {name!r}: {what}")
    if info.get("kind") not in MODEL_KINDS:
        bad(f"kind must be one of {', '.join(MODEL_KINDS)}, got {info.get('kind')!r}")
    for field, known in (("capabilities", CAPABILITIES), ("probes", PROBE_KINDS)):
        value = info.get(field)
        if isinstance(value, str) or not isinstance(value, (tuple, list)):
            bad(f"{field} must be a tuple of names, got {value!r}")
        unknown = [c for c in value if c not in known]
        if unknown:
            bad(f"unknown {field} {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    v = info.get("vocab_size")
    if isinstance(v, bool) or not isinstance(v, int) or not 8 <= v <= 10 ** 7:
        bad(f"vocab_size must be an integer in [8, 10**7], got {v!r}")
    pad = info.get("pad_token_id")
    if pad is not None and (isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < v):
        bad(f"pad_token_id must be None or an integer in [0, vocab_size), got {pad!r}")
    reserved = info.get("reserved_token_ids") or ()
    if any(isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < v for t in reserved) or \
            len(set(reserved) | {pad}) > v - 8:
        bad(f"reserved_token_ids must be token ids in [0, vocab_size) leaving at least 8 to draw, got {reserved!r}")
    top = info.get("max_positions")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 64):
        bad(f"max_positions must be None or an integer of at least 64 (the scenarios' positions), got {top!r}")
    n = info.get("num_layers")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        bad(f"num_layers must be None or a positive integer, got {n!r}")
    problem = encodings_problem(info.get("encodings"), info["probes"])
    if problem:
        bad(problem)
    return info


def _first_per_kind(problems: list, n: int) -> list:
    """Up to ``n`` problems, the first of each kind (oracle, logits, attention, probe) first."""
    first = list({p.kind: p for p in reversed(problems)}.values())[::-1]
    rest = [p for p in problems if p not in first]
    return (first + rest)[:n]


def test_ids(info: dict, attns) -> list[tuple[str, object, tuple[str, ...]]]:
    """``(case id, (attn, scenario), clauses)`` of every scenario and attention implementation."""
    out = []
    for attn in attns:
        for sc in registry.scenarios().values():
            out.append((f"{attn}-{sc.name}", (attn, sc), (sc.clause, *sc.implies)))
    return out


def check(adapter, info: dict, attn: str, sc, dtype: str, device: str, run) -> Optional[list[str]]:
    """The test body: ``n/a`` / unsupported, else run and judge; raises the failure; returns the
    checks that could not run (reported, the test still passes on what did)."""
    why = sc.not_applicable(info)
    if why:
        raise NotApplicable(why)
    missing = sc.missing(info)
    if missing:
        need = ", ".join(" or ".join(f"{c} ({CAPABILITIES[c]})" for c in m.split("|")) for m in missing)
        raise Unsupported(f"{sc.clause} needs {need}; model {info['name']} does not declare it" +
                          (f": {sc.unchecked}" if sc.unchecked else ""))
    if dtype not in adapter.dtypes:
        raise Unsupported(f"model {info['name']!r} does not support dtype {dtype}")
    v = _judged(info, attn, sc, dtype, device, run)
    if not v.problems:
        if v.checked == 0:
            raise Unsupported("; ".join(v.unsupported) or "nothing to compare")
        return v.unsupported
    raise _failure(info, attn, sc, dtype, v)


def _judged(info: dict, attn: str, sc, dtype: str, device: str, run):
    """The scenario run on the model and judged: what the model raised, or a probe outside the contract,
    fails the test (named); a failure of the kit's own judging is a kit error."""
    clauses = (sc.clause, *sc.implies)
    try:
        trace = run(sc.name, dtype, attn, device)
    except (Unsupported, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: BLE001 - what the model raised (SystemExit, a pytest outcome too) fails the test
        if is_timeout(e):  # the plugin names the hang: the model, the test (its scenario), the crash it counts as
            raise
        raise ConformanceFailure(f"{', '.join(clauses)}: {info['name']} fails scenario {sc.name} ({dtype}, {attn} "
                                 f"attention)\n  {type(e).__name__}: {exception_text(e)}", clauses, raised=True,
                                 reason=f"{type(e).__name__}: {exception_text(e)}") from None
    try:
        if trace.get("described", description(info)) != description(info):
            raise AdapterError("the model described itself (info(): encodings, capabilities, max_positions, ...) "
                               "otherwise when the scenario ran than when the run started: a description must not "
                               "change")
        return judge(sc, trace, info, dtype)
    except AdapterError as e:  # a probe outside the contract: the model's failure, named
        raise ConformanceFailure(f"{', '.join(clauses)}: {info['name']} fails scenario {sc.name} ({dtype}, {attn} "
                                 f"attention)\n  {e}", clauses, raised=True, reason=str(e)) from None
    except Exception as e:  # noqa: BLE001 - the kit's own judging failed: a kit error, never the model's
        raise KitError(f"the kit failed judging {sc.clause} on {info['name']} ({dtype}, {attn}): {type(e).__name__}: "
                       f"{exception_text(e)} (a kit bug: report it)") from e


def _failure(info: dict, attn: str, sc, dtype: str, v) -> ConformanceFailure:
    """The failure of a judged run with problems: the first problems of each kind, the positions the
    encoding used, what was inferred, the diagnosis; counted under the scenario and the clauses it broke."""
    clauses = (sc.clause, *sc.implies)
    lines = [f"{sc.clause}: {info['name']} fails scenario {sc.name} ({dtype}, {attn} attention)"]
    shown = _first_per_kind(v.problems, 4)
    for p in shown:
        lines.append(f"  [{p.kind}] {p.text}" + (f" ({', '.join(p.clauses)})" if p.clauses else ""))
        lines += [f"      {d}" for d in p.detail[:2]]
    if len(v.problems) > len(shown):
        kinds = Counter(p.kind for p in v.problems)
        lines.append(f"  ... {len(v.problems) - len(shown)} more ({', '.join(f'{n} {k}' for k, n in kinds.items())} "
                     "problems in all)")
    used = positions_used(v.facts)
    if used:
        lines.append("  positions the encoding used (recovered from the probes; none: nothing encoded, ?: no integer "
                     "position):")
        lines += [f"    {x}" for x in used]
    lines += [f"  inferred: {x}" for x in v.inferred]
    if v.matches:
        lines.append("  diagnosis: the run matches known divergence(s):")
        lines += [f"    {m.divergence} (violates {', '.join(m.violates)}): {m.description}" for m in v.matches]
    else:
        lines.append("  diagnosis: no known divergence reproduces the run")
    broken = tuple(dict.fromkeys(c for p in v.problems for c in p.clauses))
    e = ConformanceFailure("\n".join(lines), clauses, tuple(v.matches), False, tuple(v.inferred),
                           reason=f"{v.problems[0].text}", diagnosed=True, case_clauses=clauses + broken)
    # the scenario always (the summary's row of it), and of what the matches violate only the clauses
    # this run checked or broke: never another scenario's row
    own = set(clauses) | set(broken)
    e.violated = tuple(dict.fromkeys((sc.clause, *(c for c in e.violated if c in own))))
    return e
