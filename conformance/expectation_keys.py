"""What an expectation line is keyed and conditioned on (:mod:`posenc.conformance.expectations`): a collected
test's ``(case, check, dtype)``, the call form a test or a generated example ran through (``forms:``), and the
parameter names a generated line's ``where`` may give."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel

from posenc import registry

#: The ``forms:`` value of an operation's own call (not a call form).
PRIMARY = "primary"


def form_names() -> set[str]:
    """Every value a line's ``forms:`` may hold: the spec's call form names (``offset``, ``token_major``, ...)
    and :data:`PRIMARY`."""
    return {o.form for o in registry.spec().operations.values() if o.form} | {PRIMARY}


def seen_as(op: str) -> tuple[str, str]:
    """``(primary operation, form name)`` of an operation a test or example ran through: a call form's primary
    and its form name, or ``op`` itself and :data:`PRIMARY`."""
    decl = registry.spec().operations.get(op)
    if decl is None or decl.form_of is None:
        return op, PRIMARY
    return decl.form_of, decl.form


def form_key(case: str, form: str) -> str:
    """The case key of ``case``'s test through call form ``form`` (``<case>~<form>``, as its test ID says); the
    case itself for :data:`PRIMARY`."""
    return case if form == PRIMARY else f"{case}~{form}"


def key_of(item) -> tuple[Optional[str], str, Optional[str]]:
    """``(case_id, check, dtype)`` of a collected pytest item.

    ``check`` is the test function's name without ``test_``; ``case_id`` the ``case``
    parameter's ``.id`` (``<id>~<form>`` for a call form's test, whose check is the primary's: ``golden``; or the parameter itself when it is a string; else the parametrization
    ID without the dtype and the ``@CLAUSES`` suffix; None for an unparametrized test);
    ``dtype`` the ``dtype`` parameter or None.
    """
    name = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    dtype = params.get("dtype")
    case = params.get("case")
    case_id = case if isinstance(case, str) else getattr(case, "id", None)
    form = params.get("form")
    if case_id is not None and isinstance(form, str):  # a call form's test (test_call_form): the case ~ its form,
        case_id = form_key(case_id, seen_as(form)[1])  # as its test ID says, and the primary's check (golden)
        name = "test_golden"
    if case_id is None and callspec is not None:
        parts = callspec.id.split("-")
        if dtype in parts:  # the dtype parameter's own ID component
            parts.remove(dtype)
        case_id = "-".join(parts).split("@", 1)[0] or None
    return case_id, name.removeprefix("test_"), dtype


def _param_names(op: Optional[str]) -> tuple[Optional[set[str]], set[str]]:
    """``(names, compound)``: the parameter names a ``where`` key may give for ``op`` -- every field of
    the parameter models of its cases, nested ones plain and dotted; None when the registry has no
    case of ``op`` -- and those of them whose fields hold a list, a tuple, a mapping or a nested
    parameter model (``mrope_section``, ``short_factor``, ``rope``): never a ``where`` value."""
    from typing import get_args, get_origin

    from posenc import registry
    types = {type(c.params) for c in registry.all_cases() if c.op == op and hasattr(type(c.params), "model_fields")}
    if not types:
        return None, set()
    names: set[str] = set()
    compound: set[str] = set()

    def walk(cls, prefix: str) -> None:
        for n, f in cls.model_fields.items():
            path = f"{prefix}.{n}" if prefix else n
            names.update((n, path))
            kinds = [t for t in (f.annotation, *get_args(f.annotation)) if t is not type(None)]
            nested = [t for t in kinds if isinstance(t, type) and issubclass(t, BaseModel)]
            if nested or any(get_origin(t) in (list, tuple, dict) or t in (list, tuple, dict) for t in kinds):
                compound.update((n, path))
            for t in nested:
                if prefix.count(".") <= 2:
                    walk(t, path)
    for t in types:
        walk(t, "")
    return names, compound
