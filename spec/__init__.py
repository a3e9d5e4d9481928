"""The machine-readable specification: clauses, divergences and parameter models.

``load_spec()`` reads every ``spec/<family>.yaml`` shipped with the package, validates it
against :mod:`posenc.spec.models` and returns a :class:`Spec`.  A malformed file raises
:class:`~posenc.spec.errors.SpecError` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml
from pydantic import TypeAdapter, ValidationError

from .errors import SpecError
from .models import Clause, Divergence, FamilyFile

SPEC_VERSION = "0.3.0"
#: Which ID prefixes each family's file may define.
FAMILY_PREFIXES: dict[str, tuple[str, ...]] = {
    "rope": ("ROPE",), "sinusoidal": ("SIN",), "learned": ("LEARNED",), "position_ids": ("POS",),
    "rope_scaling": ("SCALE",), "alibi": ("ALIBI",), "t5": ("T5",), "mrope": ("MROPE",), "nope": ("NOPE",),
}
SPEC_DIR = Path(__file__).resolve().parent
SCHEMA_PATH = SPEC_DIR / "schema.json"


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

    @property
    def clauses(self) -> dict[str, Clause]:
        return {c.id: c for f in self.families.values() for c in f.clauses}

    @property
    def divergences(self) -> dict[str, Divergence]:
        return {d.id: d for f in self.families.values() for d in f.divergences}

    def clause(self, clause_id: str) -> Clause:
        try:
            return self.clauses[clause_id]
        except KeyError:
            raise SpecError(f"unknown clause ID {clause_id!r}") from None


def load_family(path: Path) -> FamilyFile:
    """Load and validate one YAML file; errors name the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
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
            if _version(item.since) > _version(SPEC_VERSION):
                raise SpecError(f"{path.name}: {kind}.{i}.since: {item.since!r} is newer than spec {SPEC_VERSION}")
    return fam


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def load_spec(directory: Optional[Path] = None) -> Spec:
    """Load every ``*.yaml`` in ``directory`` (default: the packaged spec).

    Checks across files: clause and divergence IDs are unique, every divergence violates
    clauses that exist, and every clause's ``since`` is not newer than the spec version.
    """
    directory = Path(directory) if directory else SPEC_DIR
    families: dict[str, FamilyFile] = {}
    files_of: dict[str, str] = {}
    seen: dict[str, str] = {}
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise SpecError(f"{directory}: no spec YAML files found")
    for path in files:
        fam = load_family(path)
        if fam.family in families:
            raise SpecError(f"{path.name}: family: {fam.family!r} is already defined in {files_of[fam.family]}")
        for kind, items in (("clauses", fam.clauses), ("divergences", fam.divergences)):
            for i, item in enumerate(items):
                where = f"{path.name}: {kind}.{i}.id"
                if item.id in seen:
                    raise SpecError(f"{where}: {item.id!r} is already defined in {seen[item.id]}")
                prefix = item.id.removeprefix("DIV-").split("-")[0]
                if prefix not in FAMILY_PREFIXES[fam.family]:
                    raise SpecError(f"{where}: prefix {prefix!r} does not belong to family {fam.family!r} "
                                    f"(expected {' or '.join(FAMILY_PREFIXES[fam.family])})")
                seen[item.id] = path.name
        families[fam.family] = fam
        files_of[fam.family] = path.name
    spec = Spec(SPEC_VERSION, families)
    for fam_name, fam in families.items():
        for j, d in enumerate(fam.divergences):
            for cid in d.violates:
                if cid not in spec.clauses:
                    raise SpecError(
                        f"{files_of[fam_name]}: divergences.{j}.violates: unknown clause {cid!r}"
                    )
    return spec


def json_schema() -> dict:
    """The JSON Schema of one spec YAML file, exported from :class:`FamilyFile`."""
    return TypeAdapter(FamilyFile).json_schema()


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


__all__ = ["SPEC_VERSION", "Spec", "load_spec", "load_family", "json_schema", "SpecError"]
