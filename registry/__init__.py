"""The family registry (public API): families register their parts here, the harness and the suite
look them up here.

A *family* is what the spec calls one: its spec file (clauses, divergences and the operations of
the adapter contract, ``spec/<family>.yaml`` for the kit's own) and the Python modules that
register, for those operations, everything the harness and the suite derive from them:

* ``@reference(op, scales=...)`` -- the float64 reference binding ``fn(params, inputs) ->
  {output: ndarray}`` and its error scales ``scales(params, inputs) -> {output: (dtype_scale,
  angle_scale)}`` (see :mod:`posenc.spec.tolerance`);
* ``@mutant(name, *ops)`` -- a divergence's mutant, ``fn(op, params, inputs, dtype) -> outputs``
  or ``None`` where it has no form for the case (``dtype`` is the activation dtype of the run
  being diagnosed, or ``None`` when the mutant is run outside a diagnosis: a precision mutant
  may depend on it);
* ``add_cases(*cases)`` -- golden cases (:class:`posenc.registry.cases.Case`);
* ``@check(name, invariant=..., ops=...)`` -- an oracle-free check, collected as the pytest test
  ``test_<name>`` over the cases of ``ops`` whose clauses declare ``invariant`` (several
  families may add handlers for their own operations to one check);
* ``@generator(op)`` -- a generated-case strategy ``fn(draw) -> Case`` (``draw`` is Hypothesis's;
  parameters drawn from the spec's declared domains): the suite's ``test_generated`` compares
  each drawn case with the reference computed on the fly;
* ``@inference(*ops)`` and ``@inference_notes(*ops)`` -- what a wrong output *is* when no
  divergence reproduces it: models of bugs outside the catalogue (``fn(ctx) -> [(sentence,
  implied outputs)]``) and facts about where it is wrong (:mod:`posenc.harness.inference`).

Family authors use this API through :mod:`posenc.families` (the same objects).  The kit's families
live in ``posenc.families.<family>`` (reference bindings, error scales, mutants, golden cases;
NumPy only), ``<family>_checks`` (checks; pytest), ``<family>_generated`` (generators;
Hypothesis) and ``<family>_inference`` (inference models), found by the name of each
``spec/*.yaml``.  Any other package registers a family with :func:`register_family`, from a module
named in the entry-point group ``posenc.families`` (or by calling it before the suite collects),
without editing the kit.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Iterable, Optional

from posenc.spec import SPEC_DIR, Spec, load_spec, register_spec_file
from posenc.spec.errors import SpecError
from posenc.spec.models import Operation, register_params_model

from .clause_rules import case_clauses, check_owners, exercised

ENTRY_POINT_GROUP = "posenc.families"
#: The package of the kit's own families (one module set per ``spec/<family>.yaml``), and the suffixes
#: of the modules imported when the suite collects (checks, generators, inference models).
KIT_PACKAGE = "posenc.families"
CHECK_SUFFIXES = ("_checks", "_generated", "_inference")
#: The order the kit's families are listed, run and stored in (a family not named here follows,
#: by name): RoPE and its scaling first, as the spec reads.
KIT_ORDER = ("rope", "rope_scaling", "sinusoidal", "learned", "position_ids", "alibi", "t5", "mrope", "axial", "layer_types", "query_scale",
             "nope", "model")


@dataclass(frozen=True)
class Family:
    """A registered family: its spec file, the modules that register its parts, its goldens."""

    name: str
    spec_file: Path
    modules: tuple[str, ...] = ()
    check_modules: tuple[str, ...] = ()
    golden_dir: Optional[Path] = None  # None: the kit's (:func:`kit_golden_dir`)


@dataclass(frozen=True)
class Reference:
    """The reference binding of one operation."""

    op: str
    fn: Callable
    scales: Callable
    #: ``state(params)``: the state one prepared object keeps across calls (dynamic NTK's
    #: grow policy); then ``fn(params, inputs, state)`` uses it (the goldens call ``fn(params, inputs)``)
    state: Optional[Callable] = None

    @property
    def qualname(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"


@dataclass
class Check:
    """An oracle-free check: one pytest test function, one handler per operation."""

    name: str
    invariant: Optional[str]
    handlers: dict[str, Callable] = field(default_factory=dict)
    select: Optional[Callable] = None  # custom case selection (default: the invariant's cases)
    clauses: Optional[Callable] = None  # custom clause list per case (default: those declaring it)
    doc: str = ""


FAMILIES: dict[str, Family] = {}
REFERENCES: dict[str, Reference] = {}
MUTANTS: dict[str, dict[str, Callable]] = {}
MUTANT_NAMES: dict[str, Callable] = {}
#: Why a mutant has no form for an operation built on one where it has (spec ``builds_on``):
#: operation -> [(mutant names, or () for every such mutant, reason)] (see :func:`no_form`).
NO_FORMS: dict[str, list[tuple[tuple[str, ...], str]]] = {}
#: Model-level mutants (family ``model``): name -> ``fn(facts) -> bool | None`` (see :func:`model_mutant`).
MODEL_MUTANTS: dict[str, Callable] = {}
#: Model scenarios (family ``model``): clause ID -> :class:`posenc.harness.model_run.Scenario`.
SCENARIOS: dict = {}
CASES: list = []
CHECKS: dict[str, Check] = {}
GENERATORS: dict[str, Callable] = {}
BRANCHES: dict[tuple[str, str], Callable] = {}
#: Inference models (:func:`inference`): operation -> ``[fn(ctx) -> [(sentence, implied)]]``, in registration order.
INFERENCES: dict[str, list[Callable]] = {}
#: Facts for the inference's fallback (:func:`inference_notes`): operation -> ``[fn(ctx, name, bad) -> [str]]``.
INFERENCE_NOTES: dict[str, list[Callable]] = {}
_LOADED: dict[str, bool] = {"discovered": False, "modules": False, "checks": False}
_SPEC: dict[str, Spec] = {}


def register_family(name: str, spec_file, modules: Iterable[str] = (), check_modules: Iterable[str] = (),
                    golden_dir=None, params_models: Iterable[type] = ()) -> Family:
    """Register a family: ``spec_file`` (its YAML), the modules that register its references,
    mutants and cases (imported on first use), its check modules (imported when the suite is
    collected), its golden directory (default: the kit's) and its parameter models."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise SpecError(f"family name {name!r}: lower-case letters, digits and _ only")
    spec_file = Path(spec_file).resolve()
    if golden_dir is None and spec_file.parent != SPEC_DIR:
        golden_dir = spec_file.parent / "golden"  # an outside family never writes into the kit's goldens
    fam = Family(name, spec_file, tuple(modules), tuple(check_modules),
                 Path(golden_dir).resolve() if golden_dir else None)
    old = FAMILIES.get(name)
    if old is not None and old != fam:
        raise SpecError(f"family {name!r} is already registered (spec {old.spec_file})")
    FAMILIES[name] = fam
    for model in params_models:
        register_params_model(model)
    if fam.spec_file.parent != SPEC_DIR:
        register_spec_file(fam.spec_file)
    _SPEC.clear()
    for kind in ("modules", "checks"):  # a family registered late still gets loaded
        _LOADED[kind] = _LOADED[kind] and not (fam.modules if kind == "modules" else fam.check_modules)
    return fam


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def discover() -> None:
    """Register the kit's families (one per ``spec/*.yaml``) and the entry points' (once)."""
    if _LOADED["discovered"]:
        return
    _LOADED["discovered"] = True
    try:
        _discover()
    except BaseException:
        _LOADED["discovered"] = False  # a broken plugin is named again next time, never dropped
        raise


def _discover() -> None:
    found = {}
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        m = re.search(r"^family:\s*([a-z][a-z0-9_]*)\s*$", path.read_text(encoding="utf-8"), re.M)
        if m and m.group(1) not in FAMILIES:
            found[m.group(1)] = path
    rank = {n: i for i, n in enumerate(KIT_ORDER)}
    for name in sorted(found, key=lambda n: (rank.get(n, len(rank)), n)):
        path = found[name]
        mods = tuple(n for n in (f"{KIT_PACKAGE}.{name}",) if _module_exists(n))
        checks = tuple(n for n in (f"{KIT_PACKAGE}.{name}{s}" for s in CHECK_SUFFIXES) if _module_exists(n))
        register_family(name, path, mods, checks)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            importlib.import_module(ep.value.partition(":")[0])
        except Exception as e:  # noqa: BLE001 - a broken plugin is named, never a traceback
            raise SpecError(f"family entry point {ep.name!r} ({ep.value}) cannot be imported: "
                            f"{type(e).__name__}: {e}") from e


def kit_golden_dir() -> Path:
    """The kit's golden folder (package data of :data:`KIT_PACKAGE`, found by package, not by path)."""
    return Path(str(resources.files(KIT_PACKAGE).joinpath("golden")))


def spec() -> Spec:
    """The spec of every registered family (cached until a family is registered)."""
    if "spec" not in _SPEC:
        discover()  # the kit's families and the entry points' add their spec files first
        _SPEC["spec"] = load_spec()
    return _SPEC["spec"]


def _import_all(kind: str) -> bool:
    """Import every family's ``modules`` or ``check_modules`` once; False when already done.
    The flag is set first: a module that asks for the registry while loading gets it as is."""
    if _LOADED[kind]:
        return False
    _LOADED[kind] = True
    try:
        for fam in list(FAMILIES.values()):
            for mod in (fam.modules if kind == "modules" else fam.check_modules):
                _import_family_module(fam, mod)
    except BaseException:
        _LOADED[kind] = False
        raise
    return True


def _import_family_module(fam: Family, mod: str) -> None:
    """Import one of a family's modules; an exception (a missing library, a typo) is a one-line
    :class:`SpecError` naming the family and the module, never a traceback from inside the kit."""
    try:
        importlib.import_module(mod)
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - a broken family is named
        raise SpecError(f"family {fam.name!r}: module {mod} cannot be imported: {type(e).__name__}: {e}") from e


def load_modules() -> None:
    """Import every family's modules (references, mutants, cases) and check them against the spec."""
    discover()
    if not _import_all("modules"):
        return
    declared = spec().operations
    for op, ref in REFERENCES.items():
        if op not in declared:
            raise SpecError(f"{ref.qualname}: registers a reference for operation {op!r}, which no spec file declares")
    missing = sorted(set(declared) - set(REFERENCES))
    if missing:
        where = []
        for op in missing:
            name = next((n for n, f in spec().families.items() if any(o.name == op for o in f.operations)), None)
            fam = FAMILIES.get(name)
            where.append(f"{op} (declared in {fam.spec_file.name if fam else name}; no @reference in "
                         f"{', '.join(fam.modules) if fam and fam.modules else 'its modules'})")
        raise SpecError(f"operations without a registered reference: {'; '.join(where)}")
    _check_registrations()


def _check_registrations() -> None:
    """What the registered modules give must fit the spec: every divergence's mutant exists and
    has a form for an operation; every case's operation is declared and serves its clauses."""
    sp = spec()
    check_owners(sp, FAMILIES)
    for d in sp.divergences.values():
        if d.level == "model":
            if d.mutant not in MODEL_MUTANTS:
                raise SpecError(f"{d.id}: model mutant {d.mutant!r} is not registered (@posenc.families.model_mutant)")
            continue
        forms = MUTANTS.get(d.mutant)
        if not forms:
            raise SpecError(f"{d.id}: mutant {d.mutant!r} is not registered (@posenc.families.mutant)")
        unknown = sorted(set(forms) - set(sp.operations))
        if unknown:
            raise SpecError(f"mutant {d.mutant!r}: registered for undeclared operation(s) {', '.join(unknown)}")
    for clause, sc in SCENARIOS.items():
        c = sp.clauses.get(clause)
        if c is None or sp.family_of_clause(clause) != "model":
            raise SpecError(f"scenario {sc.name!r}: clause {clause} is not a clause of the model family (spec/model.yaml)")
    scenario_clauses = [c for c in sp.clauses if sp.family_of_clause(c) == "model"]
    missing = [c for c in scenario_clauses if c not in SCENARIOS and not sp.clauses[c].superseded_by]
    if missing:
        raise SpecError(f"model clauses without a registered scenario (@posenc.families.scenario): {', '.join(missing)}")
    for c in CASES:
        if c.op not in sp.operations:
            raise SpecError(f"case {c.id!r}: operation {c.op!r} is not declared by any spec file")
        extra = sorted(set(c.clauses) - set(sp.operations[c.op].clauses))
        if extra:
            raise SpecError(f"case {c.id!r}: clause(s) {', '.join(extra)} are not served by operation {c.op!r} "
                            f"(its clauses: {', '.join(sp.operations[c.op].clauses)})")


def load_checks() -> None:
    """Import every family's check modules (pytest is needed); every invariant a clause declares
    must have a registered check."""
    load_modules()
    if not _import_all("checks"):
        return
    have = {c.invariant for c in CHECKS.values()}
    for c in spec().clauses.values():
        missing = sorted(set(c.invariants) - have)
        if missing:
            raise SpecError(f"{c.id}: invariant(s) {', '.join(missing)} have no registered check (@posenc.families.check)")
    _check_inferences()


def _check_inferences() -> None:
    """Every inference model and note is registered for a declared operation (a one-line error naming
    the function otherwise: a wrong registration never silently switches inference off)."""
    declared = spec().operations
    for kind, table in (("inference model", INFERENCES), ("inference note", INFERENCE_NOTES)):
        for op, fns in table.items():
            if op not in declared:
                names = ", ".join(f"{f.__module__}.{f.__qualname__}" for f in fns)
                raise SpecError(f"{kind} {names}: registered for operation {op!r}, which no spec file declares "
                                f"(@posenc.families.{'inference_notes' if kind.endswith('note') else 'inference'})")


# ---- registration decorators ----------------------------------------------------------------


def reference(op: str, *, scales: Callable, state: Optional[Callable] = None) -> Callable:
    """Register ``fn(params, inputs) -> outputs`` as the reference of ``op`` (with its error scales;
    ``state``: see :class:`Reference`)."""
    def deco(fn):
        if op in REFERENCES and REFERENCES[op].fn is not fn:
            raise SpecError(f"operation {op!r} already has a reference ({REFERENCES[op].qualname})")
        REFERENCES[op] = Reference(op, fn, scales, state)
        return fn
    return deco


def mutant(name: str, *ops: str) -> Callable:
    """Register ``fn(op, params, inputs, dtype)`` as mutant ``name`` for ``ops`` (spec ``divergences[].mutant``)."""
    def deco(fn):
        if name in MUTANT_NAMES and MUTANT_NAMES[name] is not fn:
            raise SpecError(f"mutant {name!r} is already registered ({MUTANT_NAMES[name].__module__})")
        MUTANT_NAMES[name] = fn
        for op in ops:
            MUTANTS.setdefault(name, {})[op] = (lambda op_: lambda p, x, dtype=None: fn(op_, p, x, dtype))(op)
        return fn
    return deco


def no_form(op: str, reason: str, *mutant_names: str) -> None:
    """Record why the mutants ``mutant_names`` have no form for ``op`` although they have one for
    an operation ``op`` builds on (spec ``builds_on``: a bug there shows here); no names: every such
    mutant (``layers.apply`` leaves the RoPE bugs inside a layer to the ``rope.*`` operations).
    The catalogue test requires a form or a reason for each; a failure of ``op`` that no
    divergence reproduces names them with the reason (:func:`no_form_reasons`)."""
    if not reason.strip():
        raise SpecError(f"no_form({op!r}): a reason is required")
    NO_FORMS.setdefault(op, []).append((tuple(mutant_names), reason))


def no_form_reasons(op: str) -> dict[str, str]:
    """``{divergence ID: reason}`` of the operation-level divergences whose mutants have a form for
    an operation ``op`` builds on (transitively) and none for ``op``, with the reason registered by
    :func:`no_form` (``""`` where none is: the catalogue test fails on it)."""
    load_modules()
    sp = spec()
    ops = sp.operations
    below, todo = set(), list(ops[op].builds_on) if op in ops else []
    while todo:
        x = todo.pop()
        if x not in below:
            below.add(x)
            todo += ops[x].builds_on if x in ops else []
    out: dict[str, str] = {}
    for d in sp.divergences.values():
        forms = MUTANTS.get(d.mutant, {})
        if d.level != "operation" or op in forms or not below & set(forms):
            continue
        out[d.id] = next((r for names, r in NO_FORMS.get(op, ()) if not names or d.mutant in names), "")
    return out


def model_mutant(name: str) -> Callable:
    """Register ``fn(facts) -> bool | None`` as model-level mutant ``name`` (a ``level: model``
    divergence's ``mutant``; an operation-level divergence whose bug also has a model-level form may
    register one under its mutant's name).  ``facts`` is a scenario run's
    :class:`posenc.harness.model_run.Facts` (the positions recovered from the probes per forward
    pass, the attention mass across documents and on pads, the first step whose logits differ);
    the function says whether they are what the bug produces, ``None`` where the bug has no form in
    that scenario."""
    def deco(fn):
        if name in MODEL_MUTANTS and MODEL_MUTANTS[name] is not fn:
            raise SpecError(f"model mutant {name!r} is already registered ({MODEL_MUTANTS[name].__module__})")
        MODEL_MUTANTS[name] = fn
        return fn
    return deco


def scenario(sc) -> None:
    """Register a model scenario (:class:`posenc.harness.model_run.Scenario`) under its clause."""
    old = SCENARIOS.get(sc.clause)
    if old is not None and old != sc:
        raise SpecError(f"clause {sc.clause} already has a scenario ({old.name})")
    if any(o.name == sc.name and o.clause != sc.clause for o in SCENARIOS.values()):
        raise SpecError(f"scenario name {sc.name!r} is used twice")
    SCENARIOS[sc.clause] = sc


def scenarios() -> dict:
    """Clause ID -> scenario, in the spec's order of the model family's clauses."""
    load_modules()
    order = {c: i for i, c in enumerate(spec().clauses)}
    return dict(sorted(SCENARIOS.items(), key=lambda kv: order.get(kv[0], len(order))))


def model_mutants() -> dict[str, Callable]:
    load_modules()
    return MODEL_MUTANTS


def add_cases(*cases) -> None:
    """Register golden cases (IDs unique across families).  Each case's clauses are completed by its
    operation's clause rule (:func:`~posenc.registry.clause_rules.case_clauses`): the clauses its
    parameters exercise that its operation serves."""
    have = {c.id: c for c in CASES}
    for c in cases:
        extra = [x for x in exercised(c.params, c.op) if x in operation(c.op).clauses]
        c = replace(c, clauses=tuple(dict.fromkeys([*c.clauses, *extra])))
        if c.id in have:
            raise SpecError(f"duplicate case id {c.id!r} (operation {c.op}; already registered for {have[c.id].op})")
        have[c.id] = c
        CASES.append(c)


def check(name: str, *, ops: Iterable[str], invariant: Optional[str] = None,
          select: Optional[Callable] = None, clauses: Optional[Callable] = None) -> Callable:
    """Register ``handler(request, adapter, device, dtype, case)`` as check ``name`` for ``ops``.

    The test ``test_<name>`` runs on the cases of those operations whose clauses declare
    ``invariant`` (its ID lists those clauses), or on ``select(case)`` with ``clauses(case)``.
    """
    def deco(fn):
        c = CHECKS.setdefault(name, Check(name, invariant, select=select, clauses=clauses, doc=fn.__doc__ or ""))
        if c.invariant != invariant or (select or clauses) and (c.select, c.clauses) != (select, clauses):
            raise SpecError(f"check {name!r} is registered twice with another selection")
        for op in ops:
            if op in c.handlers:
                raise SpecError(f"check {name!r} already has a handler for {op!r}")
            c.handlers[op] = fn
        return fn
    return deco


def generator(op: str) -> Callable:
    """Register ``fn(draw) -> Case`` as the generated-case strategy of ``op`` (one per operation).

    ``draw`` is a Hypothesis ``draw``; the case's float inputs should be ``Gen`` (materialised
    from the example's seed, so a shrunk case prints short) and its positions explicit arrays.
    """
    def deco(fn):
        if op in GENERATORS and GENERATORS[op] is not fn:
            raise SpecError(f"operation {op!r} already has a generator ({GENERATORS[op].__module__})")
        GENERATORS[op] = fn
        return fn
    return deco


def branch(clause: str, name: str) -> Callable:
    """Register ``fn(params, inputs) -> bool | None`` as branch point ``name`` of ``clause``: which
    side of a formula's branch (a clamp active, a threshold crossed, a policy) a case takes, or
    ``None`` where the branch does not apply.  The coverage rule requires both sides exercised
    by goldens or generated cases; the clause's ``branches:`` in its spec file declares the name."""
    def deco(fn):
        key = (clause, name)
        if key in BRANCHES and BRANCHES[key] is not fn:
            raise SpecError(f"branch {name!r} of {clause} is registered twice")
        BRANCHES[key] = fn
        return fn
    return deco


def branches() -> dict[tuple[str, str], Callable]:
    """(clause, branch name) -> predicate; every registered branch must be declared by its clause
    and every declared branch registered."""
    load_checks()
    sp = spec()
    for clause, name in BRANCHES:
        c = sp.clauses.get(clause)
        if c is None or name not in {b.name for b in c.branches}:
            raise SpecError(f"branch {name!r} is registered for {clause}, whose spec entry does not declare it "
                            f"(clauses.branches)")
    for c in sp.clauses.values():
        for b in c.branches:
            if (c.id, b.name) not in BRANCHES:
                raise SpecError(f"{c.id}: branch {b.name!r} has no registered predicate (@posenc.families.branch)")
    return BRANCHES


def inference(*ops: str) -> Callable:
    """Register ``fn(ctx) -> list[(sentence, implied)]`` as an inference model of ``ops``: when no
    divergence reproduces a failing output of one of them, each candidate's ``implied()`` outputs are
    compared with it under the tolerance rule and the first that reproduces it is said
    (``ctx``: :class:`posenc.harness.inference.Context`)."""
    return _register_per_op(INFERENCES, "inference model", ops)


def inference_notes(*ops: str) -> Callable:
    """Register ``fn(ctx, name, bad) -> list[str]``: facts about where output ``name`` of ``ops`` is
    wrong (``bad``: its element-wise mask) that the inference's fallback adds when no model fits."""
    return _register_per_op(INFERENCE_NOTES, "inference note", ops)


def _register_per_op(table: dict, what: str, ops: tuple) -> Callable:
    if not ops:
        raise SpecError(f"an {what} must name the operations it explains")

    def deco(fn):
        for op in ops:
            have = table.setdefault(op, [])
            if fn not in have:
                have.append(fn)
        return fn
    return deco


def inferences(op: str) -> tuple[list[Callable], list[Callable]]:
    """The inference models and fallback notes registered for ``op`` (the check modules are loaded, and
    every registration checked against the spec, first)."""
    load_checks()
    return list(INFERENCES.get(op, ())), list(INFERENCE_NOTES.get(op, ()))


def generators() -> dict[str, Callable]:
    """Operation -> its registered generator (the check modules are loaded first)."""
    load_checks()
    unknown = sorted(set(GENERATORS) - set(spec().operations))
    if unknown:
        raise SpecError(f"generators registered for undeclared operation(s) {', '.join(unknown)}")
    return GENERATORS


# ---- queries -----------------------------------------------------------------------------------


def operation(op: str) -> Operation:
    """The spec's declaration of ``op``; ``KeyError`` naming the known operations."""
    ops = spec().operations
    if op not in ops:
        raise KeyError(f"unknown operation {op!r}; known: {sorted(ops)}")
    return ops[op]


def operations_by_method() -> dict[str, list[Operation]]:
    """Adapter method name -> the operations declared with it (cached with the spec)."""
    if "by_method" not in _SPEC or _SPEC.get("by_method_of") is not spec():
        table: dict[str, list[Operation]] = {}
        for o in spec().operations.values():
            table.setdefault(o.method, []).append(o)
        _SPEC.update(by_method=table, by_method_of=spec())
    return _SPEC["by_method"]


def reference_of(op: str) -> Reference:
    load_modules()
    if op not in REFERENCES:
        raise KeyError(f"unknown operation {op!r}; known: {sorted(REFERENCES)}")
    return REFERENCES[op]


def run_reference(op: str, params, inputs: dict) -> dict:
    """The float64 reference outputs of ``op`` on ``params`` and NumPy ``inputs`` (``KeyError`` naming
    the known operations)."""
    return reference_of(op).fn(params, inputs)


def run_mutant(name: str, op: str, params, inputs: dict, dtype=None) -> Optional[dict]:
    """Mutant ``name``'s outputs for ``op`` (``dtype``: the activation dtype of a diagnosed run, for a
    precision mutant); ``None`` when the mutant has no form for that operation."""
    fn = mutants().get(name, {}).get(op)
    return None if fn is None else fn(params, inputs, dtype)


def all_cases() -> list:
    """Every registered case, family by family (in registration order), each family's in its order."""
    load_modules()
    rank = {name: i for i, name in enumerate(FAMILIES)}
    fam = spec().family_of_operation
    return sorted(CASES, key=lambda c: rank.get(fam(c.op), len(rank)))


def cases_by_id() -> dict:
    """Every registered case by its ID."""
    return {c.id: c for c in all_cases()}


def mutants() -> dict[str, dict[str, Callable]]:
    load_modules()
    return MUTANTS


def checks() -> dict[str, Check]:
    load_checks()
    return CHECKS


def family_of(op: str) -> Family:
    """The registered family whose spec file declares ``op``."""
    return FAMILIES[spec().family_of_operation(op)]


__all__ = ["Family", "Reference", "Check", "register_family", "discover", "reference", "mutant", "add_cases", "case_clauses", "exercised",
           "no_form", "no_form_reasons", "inference", "inference_notes", "inferences", "kit_golden_dir", "KIT_PACKAGE", "run_reference", "run_mutant", "cases_by_id",
           "check", "generator", "generators", "branch", "model_mutant", "scenario", "scenarios", "model_mutants", "branches", "operation", "operations_by_method", "reference_of", "all_cases", "mutants", "checks", "family_of", "spec",
           "load_modules", "load_checks", "ENTRY_POINT_GROUP"]
