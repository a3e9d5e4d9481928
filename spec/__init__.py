"""The machine-readable specification (the bottom room: it imports nothing else of the kit).

What everyone may import: the spec's loader (:func:`load_spec`, :class:`Spec`, :data:`SPEC_VERSION`,
:func:`json_schema`), its errors (:class:`SpecError`, :class:`UsageError`, :class:`AdapterError`,
:class:`Unsupported`, ...) and, from the submodules, the parameter models
(:mod:`posenc.spec.models`), the tolerance rule (:mod:`posenc.spec.tolerance`), the shapes of the
operation table (:mod:`posenc.spec.shapes`), the declared domains (:mod:`posenc.spec.ranges`), the
released versions (:mod:`posenc.spec.versions`) and the named models (:mod:`posenc.spec.registry`).

``load_spec()`` reads the kit's ``spec/<family>.yaml`` and the spec files of the families registered
so far; :func:`posenc.registry.spec` discovers every family first (the kit's and the entry points').
"""

from __future__ import annotations

from .errors import AdapterError, GoldenError, PosencError, SpecError, Unsupported, UsageError
from .loader import (SCHEMA_PATH, SPEC_DIR, SPEC_VERSION, DuplicateKeyError, Spec, json_schema, json_schema_text,
                     load_family, load_spec, read_yaml, register_spec_file, version_key)

__all__ = ["SPEC_VERSION", "SPEC_DIR", "SCHEMA_PATH", "Spec", "load_spec", "load_family", "register_spec_file",
           "json_schema", "json_schema_text", "read_yaml", "DuplicateKeyError", "version_key", "SpecError", "UsageError", "AdapterError",
           "GoldenError", "PosencError", "Unsupported"]
