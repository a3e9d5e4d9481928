"""The rule that names the clauses a case's parameters exercise, one per operation namespace (``rope``
for every ``rope.*`` operation).  A family registers it once with ``@case_clauses``; ``add_cases``
applies it to every golden case of those operations, and the family's generators call
:func:`exercised` for their drawn cases, so a case lists every clause its parameters exercise (the
kit's check over all goldens: tests/test_catalogue.py)."""

from __future__ import annotations

from typing import Callable

from posenc.spec.errors import SpecError

#: operation namespace -> ``rule(params, op) -> [clause IDs]``
RULES: dict[str, Callable] = {}


def case_clauses(*namespaces: str) -> Callable:
    """Register ``rule(params, op) -> list of clause IDs`` as the clause rule of the operations
    ``<namespace>.*`` (``@case_clauses("rope")``).  A namespace has one rule: a second, different one
    is a :class:`~posenc.spec.errors.SpecError` naming both modules."""
    def deco(rule: Callable) -> Callable:
        for ns in namespaces:
            old = RULES.get(ns)
            if old is not None and old is not rule:
                raise SpecError(f"two clause rules for operations {ns}.*: {old.__module__}.{old.__qualname__} and "
                                f"{rule.__module__}.{rule.__qualname__} (one per namespace, registered by the family "
                                "that declares its operations)")
            RULES[ns] = rule
        return rule
    return deco


def exercised(params, op: str) -> list[str]:
    """The clauses the rule of ``op``'s namespace names for a case of ``op`` with ``params`` (none where
    the namespace has no rule); the caller keeps those ``op`` serves."""
    rule = RULES.get(op.split(".", 1)[0])
    return list(rule(params, op)) if rule is not None else []


def check_owners(sp, families: dict) -> None:
    """Every rule is registered by the family that declares its namespace's operations (in spec ``sp``;
    ``families``: name -> :class:`~posenc.registry.Family`): from one of its modules or a helper module
    named after one (``posenc.families.rope_clauses`` for ``posenc.families.rope``).  Raises
    :class:`~posenc.spec.errors.SpecError` naming the rule, the namespace and its owner: a plugin cannot
    change another family's cases."""
    for ns, rule in RULES.items():
        owners = sorted({sp.family_of_operation(o) for o in sp.operations if o.split(".", 1)[0] == ns})
        mods = [m for f in owners if f in families for m in (*families[f].modules, *families[f].check_modules)]
        if not any(rule.__module__ == m or rule.__module__.startswith(m + "_") for m in mods):
            raise SpecError(f"the clause rule {rule.__module__}.{rule.__qualname__} is registered for operations "
                            f"{ns}.*, which {', '.join(owners) or 'no family'} declares: only that family's "
                            f"modules ({', '.join(mods) or 'none'}) may register it")
