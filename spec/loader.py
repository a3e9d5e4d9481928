"""Loading the spec: the spec files, their validation and cross-file checks (re-exported by :mod:`posenc.spec`).

``load_spec()`` reads every ``spec/<family>.yaml`` shipped with the package and the spec file of
every family registered so far (:func:`register_spec_file`, called by
:func:`posenc.registry.register_family`), validates them against :mod:`posenc.spec.models` and
returns a :class:`Spec`.  A malformed file raises :class:`~posenc.spec.errors.SpecError` naming
the file and the field.  The spec is the bottom room: it imports nothing of the kit, so it does not
discover families itself -- :func:`posenc.registry.spec` discovers them (the kit's and the entry
points') and then loads the spec with their files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

import yaml
from pydantic import TypeAdapter, ValidationError

from .errors import SpecError
from .models import Clause, Divergence, FamilyFile, Operation

SPEC_VERSION = "0.5.0"
SPEC_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = SPEC_DIR / "schema.json"
#: Spec files of registered families outside the kit (see :func:`register_spec_file`).
_REGISTERED_FILES: list[Path] = []


def register_spec_file(path: Path) -> None:
    """Add a registered family's spec file to what :func:`load_spec` reads by default."""
    path = Path(path).resolve()
    if path not in _REGISTERED_FILES:
        _REGISTERED_FILES.append(path)


def version_key(text: str) -> tuple[int, ...]:
    """``"0.10.0"`` -> ``(0, 10, 0)``: versions compare numerically, not as strings."""
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        raise SpecError(f"{text!r} is not a spec version (MAJOR.MINOR.PATCH)") from None


def _format_validation(path: Path, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        lines.append(f"{path.name}: {loc}: {e['msg']}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Spec:
    version: str
    families: dict[str, FamilyFile]

    @cached_property
    def clauses(self) -> dict[str, Clause]:
        return {c.id: c for f in self.families.values() for c in f.clauses}

    @cached_property
    def divergences(self) -> dict[str, Divergence]:
        return {d.id: d for f in self.families.values() for d in f.divergences}

    @cached_property
    def current_divergences(self) -> dict[str, Divergence]:
        """The divergences that are not superseded: the ones the diagnosis runs and expectations cite."""
        return {k: d for k, d in self.divergences.items() if not d.superseded_by}

    @cached_property
    def parameters(self) -> dict[str, dict]:
        """Per parameter model name, ``{field: ParameterRange}`` merged over the family files."""
        out: dict[str, dict] = {}
        for f in self.families.values():
            for model, fields in f.parameters.items():
                out.setdefault(model, {}).update(fields)
        return out

    @cached_property
    def operations(self) -> dict[str, Operation]:
        """Every operation of the adapter contract, by name (``rope.apply``, ...)."""
        return {o.name: o for f in self.families.values() for o in f.operations}

    @cached_property
    def _operation_family(self) -> dict[str, str]:
        return {o.name: f.family for f in self.families.values() for o in f.operations}

    def family_of_operation(self, op: str) -> str:
        """The family whose file declares operation ``op`` (``KeyError`` for an unknown one)."""
        return self._operation_family[op]

    @cached_property
    def _clause_family(self) -> dict[str, str]:
        return {c.id: f.family for f in self.families.values() for c in [*f.clauses, *f.divergences]}

    def family_of_clause(self, clause_id: str) -> str:
        """The family whose file declares clause (or divergence) ``clause_id`` (``KeyError`` for an unknown one)."""
        return self._clause_family[clause_id]

    @cached_property
    def operation_divergences(self) -> dict[str, Divergence]:
        """The current divergences whose mutant is an operation-level function (``level: operation``):
        the ones an adapter's outputs are diagnosed against and a ``MutantAdapter`` runs."""
        return {k: d for k, d in self.current_divergences.items() if d.level == "operation"}

    def clause(self, clause_id: str) -> Clause:
        try:
            return self.clauses[clause_id]
        except KeyError:
            raise SpecError(f"unknown clause ID {clause_id!r}") from None


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping of a YAML document names one key twice (PyYAML alone would keep the last silently)."""

    def __init__(self, key, line: int, first_line: int, key_node):
        super().__init__(None, None, f"duplicate key {key!r}", key_node.start_mark)
        self.key, self.line, self.first_line = key, line, first_line

    def __str__(self) -> str:
        return f"line {self.line}: duplicate key {self.key!r} (first on line {self.first_line})"


_MERGE = "tag:yaml.org,2002:merge"


class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml when built with it: 4x faster
    """PyYAML's safe loader that refuses a key written twice in one mapping, at any depth (a ``<<``
    merge may still be overridden: that is the merge's meaning).  Every YAML the kit reads -- spec
    files, expectation files, the transformers bridge's tables, the named models -- goes through it."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base constructor names it
                    continue
                if first is not None:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1, first, key_node)
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


#: The values a YAML document may hold once its aliases are expanded: far above any file the kit reads (the
#: spec's largest, with its anchors, is a few thousand); a few hundred bytes of nested aliases (an "alias
#: bomb") expand past it, and reading, validating or printing them would take all the memory there is
MAX_YAML_VALUES = 1_000_000


def read_yaml(text: str):
    """``yaml.safe_load`` with libyaml's loader where PyYAML has it, refusing duplicate keys
    (:class:`DuplicateKeyError`, a ``yaml.YAMLError`` naming the line and the key) and a document
    whose aliases expand to more than :data:`MAX_YAML_VALUES` values (a ``yaml.YAMLError``)."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_VALUES:
            raise yaml.YAMLError(f"the document's aliases expand it to more than {MAX_YAML_VALUES} values (nested "
                                 "anchors: an alias bomb): refused")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(root) -> int:
    """The values a composed YAML node holds with every alias expanded (a node reached twice counts twice),
    counted over the node graph once (linear in the document), capped just past :data:`MAX_YAML_VALUES`."""
    size: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        kids = [x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode) else \
            list(node.value) if isinstance(node, yaml.SequenceNode) else []
        if done or not kids:
            size[id(node)] = min(1 + sum(size[id(k)] for k in kids), MAX_YAML_VALUES + 1)
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return size[id(root)]


def load_family(path: Path) -> FamilyFile:
    """Load and validate one YAML file; errors name the file and the field."""
    try:
        raw = read_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise SpecError(f"{path.name}: not UTF-8 text: {e}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path.name}: not valid YAML: {e}") from None
    try:
        fam = FamilyFile.model_validate(raw)
    except ValidationError as e:
        raise SpecError(_format_validation(path, e)) from None
    if fam.spec_version != SPEC_VERSION:
        raise SpecError(
            f"{path.name}: spec_version: {fam.spec_version!r} does not match {SPEC_VERSION!r}"
        )
    for kind, items in (("clauses", fam.clauses), ("divergences", fam.divergences)):
        for i, item in enumerate(items):
            if version_key(item.since) > version_key(SPEC_VERSION):
                raise SpecError(f"{path.name}: {kind}.{i}.since: {item.since!r} is newer than spec {SPEC_VERSION}")
    return fam


def load_spec(directory: Optional[Path] = None) -> Spec:
    """Load every ``*.yaml`` in ``directory`` (default: the packaged spec and the families registered so far).

    Checks across files: family names, clause, divergence and operation IDs are unique, IDs use
    their file's ``id_prefixes``, every divergence violates clauses that exist, every operation
    serves clauses that exist, and no ``since`` is newer than the spec version.
    """
    if directory is None:
        files = sorted(SPEC_DIR.glob("*.yaml")) + list(_REGISTERED_FILES)
        where = SPEC_DIR
    else:
        where = Path(directory)
        files = sorted(where.glob("*.yaml"))
    if not files:
        raise SpecError(f"{where}: no spec YAML files found")
    families: dict[str, FamilyFile] = {}
    files_of: dict[str, str] = {}
    seen: dict[str, str] = {}
    prefix_of: dict[str, str] = {}
    for path in files:
        fam = load_family(path)
        if fam.family in families:
            raise SpecError(f"{path.name}: family: {fam.family!r} is already defined in {files_of[fam.family]}")
        for pre in fam.id_prefixes:
            if pre in prefix_of:
                raise SpecError(f"{path.name}: id_prefixes: {pre!r} is already the prefix of family {prefix_of[pre]!r}")
            prefix_of[pre] = fam.family
        _check_ids(path, fam, seen)
        families[fam.family] = fam
        files_of[fam.family] = path.name
    spec = Spec(SPEC_VERSION, families)
    for fam_name, fam in families.items():
        for j, d in enumerate(fam.divergences):
            for cid in d.violates:
                if cid not in spec.clauses:
                    raise SpecError(f"{files_of[fam_name]}: divergences.{j}.violates: unknown clause {cid!r}")
        for j, o in enumerate(fam.operations):
            for cid in o.clauses:
                if cid not in spec.clauses:
                    raise SpecError(f"{files_of[fam_name]}: operations.{j}.clauses: unknown clause {cid!r}")
            for other in o.builds_on:
                if other not in spec.operations or other == o.name:
                    raise SpecError(f"{files_of[fam_name]}: operations.{j}.builds_on: {other!r} is not another operation")
            if o.form_of is not None:
                primary = next((x for x in fam.operations if x.name == o.form_of), None)
                if primary is None or primary.form_of is not None:
                    raise SpecError(f"{files_of[fam_name]}: operations.{j}.form_of: {o.form_of!r} is not a primary "
                                    f"operation of family {fam_name} (a call form is of its own family's operation)")
                # beyond the primary's clauses, only a clause of the call forms alone (ROPE-CALL-FORM): one no
                # primary operation serves
                primaries = {c for x in fam.operations if x.form_of is None for c in x.clauses}
                extra = sorted(set(o.clauses) - set(primary.clauses))
                if set(extra) & primaries:
                    raise SpecError(f"{files_of[fam_name]}: operations.{j}.clauses: {sorted(set(extra) & primaries)} "
                                    f"are not {o.form_of}'s: a call form serves its operation's clauses (and those of "
                                    "the call forms alone)")
        _check_superseded(files_of[fam_name], fam, spec)
    from .ranges import check_parameters
    check_parameters(spec, files_of)
    return spec


def _check_superseded(fname: str, fam: FamilyFile, spec: Spec) -> None:
    """``superseded_by`` names IDs of the same kind that exist and are not older than the ID."""
    for kind, items, known in (("clauses", fam.clauses, spec.clauses), ("divergences", fam.divergences, spec.divergences)):
        for i, item in enumerate(items):
            for succ in item.superseded_by:
                where = f"{fname}: {kind}.{i}.superseded_by"
                if succ not in known:
                    raise SpecError(f"{where}: {item.id} is superseded by unknown {kind[:-1]} {succ!r}")
                if succ == item.id or version_key(known[succ].since) < version_key(item.since):
                    raise SpecError(f"{where}: {succ} (since {known[succ].since}) cannot supersede {item.id} "
                                    f"(since {item.since})")


def _check_ids(path: Path, fam: FamilyFile, seen: dict[str, str]) -> None:
    """IDs unique across files (``seen``: ID -> file) and carrying one of the family's prefixes."""
    for kind, items in (("clauses", fam.clauses), ("divergences", fam.divergences), ("operations", fam.operations)):
        for i, item in enumerate(items):
            ident = item.name if kind == "operations" else item.id
            where = f"{path.name}: {kind}.{i}.{'name' if kind == 'operations' else 'id'}"
            if ident in seen:
                raise SpecError(f"{where}: {ident!r} is already defined in {seen[ident]}")
            seen[ident] = path.name
            if kind == "operations":
                continue
            prefix = ident.removeprefix("DIV-").split("-")[0]
            if prefix not in fam.id_prefixes:
                raise SpecError(f"{where}: prefix {prefix!r} does not belong to family {fam.family!r} "
                                f"(expected {' or '.join(fam.id_prefixes)})")


def json_schema() -> dict:
    """The JSON Schema of one spec YAML file, exported from :class:`FamilyFile`."""
    return TypeAdapter(FamilyFile).json_schema()


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


__all__ = ["SPEC_VERSION", "SPEC_DIR", "SCHEMA_PATH", "Spec", "load_spec", "load_family", "register_spec_file",
           "json_schema", "json_schema_text", "read_yaml", "StrictLoader", "DuplicateKeyError", "version_key", "SpecError"]
