"""The family author's façade, and the package of the kit's own families.

``from posenc import families`` gives what a family registers itself with -- the registry's public
API (:mod:`posenc.registry`: :func:`register_family`, ``@reference``, ``@mutant``, ``add_cases``,
``@check``, ``@generator``, ``@branch``, ``@inference``, ``@inference_notes``, ``@model_mutant``,
``scenario``, and the queries) -- and the case types its golden cases are written with (:class:`Case`,
:class:`Gen`, :func:`pos`, :func:`arange_x`).  A family's checks and generators import
:mod:`posenc.harness.checks` and :mod:`posenc.harness.generators`; nothing else of the kit above
the spec and the reference (docs/architecture.md, "Public API").

The kit's families are the modules of this package, one set per ``spec/<family>.yaml``:
``<family>`` (reference bindings, error scales, mutants, golden cases), ``<family>_checks``,
``<family>_generated`` and ``<family>_inference``; their goldens are this package's ``golden/``.
The registry finds them by name; no module of the harness or the suite imports them.
"""

from __future__ import annotations

from posenc.registry import *  # noqa: F401,F403 - the registry's public API, re-exported
from posenc.registry import (  # noqa: F401
                             BRANCHES,
                             CASES,
                             CHECKS,
                             FAMILIES,
                             GENERATORS,
                             INFERENCE_NOTES,
                             INFERENCES,
                             KIT_ORDER,
                             MODEL_MUTANTS,
                             MUTANT_NAMES,
                             MUTANTS,
                             NO_FORMS,
                             REFERENCES,
                             SCENARIOS,
)
from posenc.registry import __all__ as _registry_all
from posenc.registry.cases import Case, Gen, arange_x, pos
from posenc.registry.forms import call_form, form_clauses, form_of, forms_of, storage_read_as_contiguous
from posenc.registry.outputs import ReferenceOutputs

__all__ = [*_registry_all, "Case", "Gen", "pos", "arange_x", "ReferenceOutputs", "call_form", "form_clauses", "form_of", "forms_of",
           "storage_read_as_contiguous"]
