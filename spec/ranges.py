"""Declared parameter domains (``parameters:`` of the family files): validation against the
parameter models, and the queries generated cases and the coverage rule use.

Every field of a declared parameter model must be declared exactly once across the spec; a
declared ``default`` must equal the model field's default; ``values`` of an enum (``Literal``)
field must be exactly its allowed values; a bool field's values are ``[false, true]``.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic_core import PydanticUndefined

from .errors import SpecError


def _literal_values(annotation) -> tuple | None:
    """The allowed values of a ``Literal`` / ``Optional[Literal]`` annotation, else None."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for arg in typing.get_args(annotation):
            got = _literal_values(arg)
            if got is not None:
                return got
    return None


def _is_bool(annotation) -> bool:
    return annotation is bool or (typing.get_origin(annotation) is typing.Union and bool in typing.get_args(annotation))


def check_parameters(spec, files_of: dict[str, str]) -> None:
    """Raise :class:`SpecError` naming the file and field for a declaration that does not fit."""
    from .models import PARAM_MODELS
    declared_in: dict[tuple[str, str], str] = {}
    for fam_name, fam in spec.families.items():
        fname = files_of.get(fam_name, fam_name)
        for model_name, fields in fam.parameters.items():
            model = PARAM_MODELS.get(model_name)
            where = f"{fname}: parameters.{model_name}"
            if model is None:
                raise SpecError(f"{where}: unknown parameter model (known: {', '.join(sorted(PARAM_MODELS))})")
            for field, rng in fields.items():
                if field not in model.model_fields:
                    raise SpecError(f"{where}.{field}: {model_name} has no field {field!r} "
                                    f"(fields: {', '.join(model.model_fields)})")
                key = (model_name, field)
                if key in declared_in:
                    raise SpecError(f"{where}.{field}: already declared in {declared_in[key]}")
                declared_in[key] = fname
                _check_field(f"{where}.{field}", model.model_fields[field], rng)
    for model_name in {m for m, _ in declared_in}:
        missing = [f for f in PARAM_MODELS[model_name].model_fields if (model_name, f) not in declared_in]
        if missing:
            raise SpecError(f"parameters.{model_name}: fields without a declared domain: {', '.join(missing)} "
                            f"(declare them in the family file that owns them)")


def _check_field(where: str, info, rng) -> None:
    default = None if info.default is PydanticUndefined else info.default
    if rng.default != default and not (isinstance(default, tuple) and list(default) == rng.default):
        raise SpecError(f"{where}.default: {rng.default!r} differs from the parameter model's default {default!r}")
    lits = _literal_values(info.annotation)
    if lits is not None and (rng.values is None or set(rng.values) != set(lits)):
        raise SpecError(f"{where}.values: must list exactly the allowed values {list(lits)}, got {rng.values}")
    if _is_bool(info.annotation) and (rng.values is None or set(rng.values) != {False, True}):
        raise SpecError(f"{where}.values: a bool field's values are [false, true], got {rng.values}")
    lo_hi = rng.range
    if lo_hi is not None and info.metadata:
        for m in info.metadata:
            gt, ge = getattr(m, "gt", None), getattr(m, "ge", None)
            if (gt is not None and lo_hi[0] <= gt) or (ge is not None and lo_hi[0] < ge):
                raise SpecError(f"{where}.range: lower bound {lo_hi[0]} is outside the model's constraint "
                                f"({'> ' + str(gt) if gt is not None else '>= ' + str(ge)})")


def domain(spec, model_name: str, field: str):
    """The declared :class:`~posenc.spec.document.ParameterRange` of ``model_name.field``."""
    try:
        return spec.parameters[model_name][field]
    except KeyError:
        raise SpecError(f"no declared domain for {model_name}.{field}") from None


def is_library_default(rng, value: Any) -> bool:
    """Whether ``value`` is the field's default or one of its listed library defaults."""
    cands = [rng.default, *rng.library_defaults.values()]
    return any(value == c or (isinstance(value, tuple) and list(value) == c) for c in cands if c is not None)
