"""Parameter and branch coverage of the cases the suite runs (issue rule, checked by
``tests/test_coverage.py`` and printed by ``posenc coverage``).

The rule, over the golden cases and the generated cases of a default run (float32, 6 examples
per operation):

* every numeric field of a parameter model (a declared ``range``) takes two or more values,
  at least one of them neither its default nor one of its ``library_defaults``;
* every enum or bool field (declared ``values``) takes every value;
* every branch point a clause declares (``branches:``, predicates registered with
  :func:`posenc.families.branch`) is reached on both sides by cases of the operations serving
  that clause (the predicate says ``None`` where the branch does not apply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from pydantic import BaseModel

from posenc import registry
from posenc.spec.ranges import is_library_default

from posenc.harness import golden as _golden
from posenc.harness.generation import DEFAULT_EXAMPLES, drawn_examples


@dataclass
class Exercised:
    """One case the suite runs: where it comes from, the case and its materialised inputs."""

    source: str
    case: Any
    inputs: dict


def exercised(dtypes: Iterable[str] = ("float32",), n: int = DEFAULT_EXAMPLES) -> list[Exercised]:
    """The golden cases and the generated examples of a run at ``dtypes`` (default: the default
    run's float32) with ``--posenc-examples n``."""
    out = [Exercised(f"golden {c.id}", c, _golden.case_inputs(c)) for c in registry.all_cases()]
    for op in registry.generators():
        for dt in dtypes:
            for k, (c, seed) in enumerate(drawn_examples(op, dt, n)):
                out.append(Exercised(f"generated {op} {dt} #{k}", c, _golden.case_inputs(c, seed)))
    return out


def _fields(params, prefix: str = ""):
    """(model name, field, value) of a parameter model, nested models included."""
    for name in type(params).model_fields:
        v = getattr(params, name)
        if isinstance(v, BaseModel):
            yield from _fields(v)
        else:
            yield type(params).__name__, name, v


@dataclass
class FieldRow:
    model: str
    field: str
    kind: str  # "values" or "range"
    seen: dict = field(default_factory=dict)  # value -> first sources
    missing: list = field(default_factory=list)  # enum values never seen
    ok: bool = False

    def describe(self) -> str:
        vals = ", ".join(f"{_short(v)} ({'; '.join(s)})" for v, s in list(self.seen.items())[:6])
        extra = f" ... {len(self.seen)} values" if len(self.seen) > 6 else ""
        miss = f"; never: {', '.join(map(str, self.missing))}" if self.missing else ""
        return f"{'ok ' if self.ok else 'GAP'} {self.model}.{self.field}: {vals}{extra}{miss}"


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 24 else r[:21] + "..."


def field_coverage(cases: list[Exercised]) -> list[FieldRow]:
    sp = registry.spec()
    rows: dict[tuple[str, str], FieldRow] = {}
    for model, fields in sp.parameters.items():
        for name, rng in fields.items():
            if rng.nested is None:
                rows[(model, name)] = FieldRow(model, name, "values" if rng.range is None else "range")
    for e in cases:
        for model, name, v in _fields(e.case.params):
            row = rows.get((model, name))
            if row is None or v is None:
                continue
            key = tuple(v) if isinstance(v, (list, tuple)) else v
            src = row.seen.setdefault(key, [])
            if len(src) < 2:
                src.append(e.source)
    for (model, name), row in rows.items():
        rng = sp.parameters[model][name]
        if row.kind == "values":
            # a tuple field declared with values (one per layer): each value must occur in some tuple
            row.missing = [v for v in rng.values if v not in row.seen
                           and not any(isinstance(k, tuple) and v in k for k in row.seen)]
            row.ok = not row.missing
        else:
            row.ok = len(row.seen) >= 2 and any(not is_library_default(rng, v) for v in row.seen)
    return list(rows.values())


@dataclass
class BranchRow:
    clause: str
    name: str
    sides: dict = field(default_factory=lambda: {True: [], False: []})

    @property
    def ok(self) -> bool:
        return bool(self.sides[True]) and bool(self.sides[False])

    def describe(self) -> str:
        t = "; ".join(self.sides[True][:2]) or "NEVER"
        f = "; ".join(self.sides[False][:2]) or "NEVER"
        return f"{'ok ' if self.ok else 'GAP'} {self.clause} [{self.name}]: yes by {t}; no by {f}"


def branch_coverage(cases: list[Exercised]) -> list[BranchRow]:
    rows = []
    for (clause, name), fn in registry.branches().items():
        row = BranchRow(clause, name)
        serving = {o.name for o in registry.spec().operations.values() if clause in o.clauses}
        for e in cases:
            if e.case.op not in serving:
                continue
            side = _side(fn, e)
            if side is not None and len(row.sides[side]) < 3:
                row.sides[side].append(e.source)
        rows.append(row)
    return rows


def _side(fn, e: Exercised) -> Optional[bool]:
    try:
        got = fn(e.case.params, e.inputs)
    except Exception:  # noqa: BLE001 - a predicate that does not apply to this case's parameters
        return None
    return None if got is None else bool(got)


def report(n: int = DEFAULT_EXAMPLES) -> tuple[list[FieldRow], list[BranchRow]]:
    cases = exercised(n=n)
    return field_coverage(cases), branch_coverage(cases)
