"""The model-level suite behind ``pytest conformance --model NAME`` (spec family ``model``).

One test per scenario (a MODEL-* clause), attention implementation and dtype:
``test_model[<dtype>-<attn>-<scenario>@<MODEL-...+POS-...>]``.  A test builds the model (once per
dtype, attention implementation and device in the process that holds it), runs the scenario's
driver (:mod:`posenc.families.model`) and judges what it recorded
(:func:`posenc.families.model_checks.judge`).  With ``--posenc-isolation process`` (the default)
the model lives in the adapter's worker process (:mod:`posenc.conformance.isolation`): the driver
runs there and only its record -- plain data and NumPy arrays -- comes back, so a crash or a hang
inside the model fails that test and the run goes on.

A scenario that does not apply to the model (a decode scenario of an encoder) is reported
``n/a`` with the reason; one whose capability the model lacks is *unsupported* with the reason;
neither is ever a pass.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from posenc import families
from posenc.adapters import Unsupported
from posenc.spec.errors import exception_text

#: Built models of this process, by (adapter id, dtype, attention implementation, device, seed).
_BUILT: dict[tuple, object] = {}


class NotApplicable(Unsupported):
    """The scenario does not apply to the model (reported ``n/a``, counted apart from unsupported)."""

    def __init__(self, reason: str):
        super().__init__(f"n/a: {reason}")


def scenario_by_name(name: str):
    for sc in families.scenarios().values():
        if sc.name == name:
            return sc
    raise KeyError(f"unknown scenario {name!r}")


def run_scenario(adapter, name: str, dtype: str, attn: str, device: str, seed: int = 0) -> dict:
    """Build (or reuse) the model and run scenario ``name``; its record (``Run.trace()``).
    Runs where the model lives (the worker, or pytest's process with ``--posenc-isolation none``)."""
    from posenc.families.model import Run
    sc = scenario_by_name(name)
    info = adapter.info()
    key = (id(adapter), dtype, attn, device, seed)
    model = _BUILT.get(key)
    if model is None:
        model = _BUILT[key] = adapter.build(dtype=dtype, device=device, attn_implementation=attn, seed=seed)
    r = Run(model, info, seed=seed)
    sc.run(r)
    return r.trace()


def model_info(adapter) -> dict:
    """The adapter's description (``ModelAdapter.info``), its fields checked: a usage error names
    the one that is wrong."""
    from posenc.families.model import CAPABILITIES, MODEL_KINDS
    from posenc.spec.errors import UsageError
    try:
        info = adapter.info()
    except Unsupported as e:
        raise UsageError(f"model {getattr(adapter, 'name', adapter)!r}: {e.reason}") from None
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        raise UsageError(f"model {getattr(adapter, 'name', adapter)!r}: describing it (info / encodings) raised "
                         f"{type(e).__name__}: {exception_text(e)}") from None
    name = info.get("name")
    if info.get("kind") not in MODEL_KINDS:
        raise UsageError(f"model {name!r}: kind must be one of {', '.join(MODEL_KINDS)}, got {info.get('kind')!r}")
    bad = [c for c in info.get("capabilities", ()) if c not in CAPABILITIES]
    if bad:
        raise UsageError(f"model {name!r}: unknown capabilities {', '.join(map(str, bad))}; known: "
                         f"{', '.join(CAPABILITIES)}")
    v = info.get("vocab_size")
    if isinstance(v, bool) or not isinstance(v, int) or v < 8:
        raise UsageError(f"model {name!r}: vocab_size must be an integer >= 8, got {v!r}")
    if not isinstance(info.get("encodings"), dict):
        raise UsageError(f"model {name!r}: encodings() must return a dict of parameter models")
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
        for sc in families.scenarios().values():
            out.append((f"{attn}-{sc.name}", (attn, sc), (sc.clause, *sc.implies)))
    return out


def check(adapter, info: dict, attn: str, sc, dtype: str, device: str, run) -> Optional[list[str]]:
    """The test body: ``n/a`` / unsupported, else run and judge; raises the failure; returns the
    checks that could not run (reported, the test still passes on what did)."""
    from posenc.families.model_checks import judge
    from .suite import ConformanceFailure
    why = sc.not_applicable(info)
    if why:
        raise NotApplicable(why)
    missing = sc.missing(info)
    if missing:
        from posenc.families.model import CAPABILITIES
        raise Unsupported(f"{sc.clause} needs {', '.join(f'{c} ({CAPABILITIES[c]})' for c in missing)}; "
                          f"model {info['name']} does not declare it")
    if dtype not in adapter.dtypes:
        raise Unsupported(f"model {info['name']!r} does not support dtype {dtype}")
    trace = run(sc.name, dtype, attn, device)
    from posenc.spec.errors import AdapterError, KitError
    try:
        v = judge(sc, trace, info, dtype)
    except AdapterError:
        raise  # a probe outside the contract: the model's failure, named
    except Exception as e:  # noqa: BLE001 - the kit's own judging failed: a kit error, never the model's
        raise KitError(f"the kit failed judging {sc.clause} on {info['name']} ({dtype}, {attn}): {type(e).__name__}: "
                       f"{exception_text(e)} (a kit bug: report it)") from e
    if not v.problems:
        if v.checked == 0:
            raise Unsupported("; ".join(v.unsupported) or "nothing to compare")
        return v.unsupported
    from posenc.families.model_checks import positions_used
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
        lines.append("  positions the encoding used (recovered from the probes):")
        lines += [f"    {x}" for x in used]
    lines += [f"  inferred: {x}" for x in v.inferred]
    if v.matches:
        lines.append("  diagnosis: the run matches known divergence(s):")
        lines += [f"    {m.divergence} (violates {', '.join(m.violates)}): {m.description}" for m in v.matches]
    else:
        lines.append("  diagnosis: no known divergence reproduces the run")
    clauses = (sc.clause, *sc.implies)
    broken = tuple(dict.fromkeys(c for p in v.problems for c in p.clauses))
    raise ConformanceFailure("\n".join(lines), clauses, tuple(v.matches), False, tuple(v.inferred),
                             reason=f"{v.problems[0].text}", diagnosed=True, case_clauses=clauses + broken)
