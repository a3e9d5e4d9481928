"""The transformers bridge: a Hugging Face ``config.json`` imported into the spec's parameter models,
and the survey of transformers' model types that keeps its tables (docs/architecture.md).

The public API (what ``posenc config import``, ``posenc card``, the ``hf:`` model adapter and a user
import): :func:`params_from_hf_config` (every positional component of a config), the RoPE import
(:func:`rope_import`, :func:`rope_params_from_hf_config`), :func:`mrope_params_from_hf_config`,
:func:`axial_params_from_hf_config` / :func:`axial_provenance`, :func:`component_imports`, and the
tables (:func:`hf_model_types`, :func:`table_row`).  RoPE models give
:class:`~posenc.spec.models.RopeParams`, one set per layer type where the config nests them;
learned-embedding, ALiBi, T5 and sinusoid models go through their own rule table.  An unknown
``model_type``, an unknown ``rope_type``, an unknown key inside the rope parameters, or a missing
theta where the model type defines no default (never a silent 10000) is a
:class:`~posenc.spec.errors.SpecError` naming the field.

:mod:`posenc.hf.survey` (``posenc config survey``) reads transformers itself (torch and transformers:
the ``[hf]`` extra) to rewrite the model-type table and the coverage page.
"""

from __future__ import annotations

from posenc.hf.axial import axial_params_from_hf_config, axial_provenance, is_axial, is_centred, table_row
from posenc.hf.components import FAMILY_RULES, component_imports, is_rope_import, params_from_hf_config
from posenc.hf.mrope import MROPE_RULES, mrope_params_from_hf_config
from posenc.hf.rope import RopeImport, rope_import, rope_params_from_hf_config
from posenc.hf.tables import (HF_EXCEPTIONS_PATH, HF_TABLE_PATH, MODEL_RULES, ROPE_KEYS, ModelRule, hf_model_types,
                              hf_table_version, read_config)

__all__ = ["params_from_hf_config", "component_imports", "is_rope_import", "rope_import", "RopeImport",
           "rope_params_from_hf_config", "mrope_params_from_hf_config", "axial_params_from_hf_config",
           "axial_provenance", "is_axial", "is_centred", "table_row", "hf_model_types", "hf_table_version",
           "read_config", "MODEL_RULES", "MROPE_RULES", "FAMILY_RULES", "ModelRule", "ROPE_KEYS", "HF_TABLE_PATH",
           "HF_EXCEPTIONS_PATH"]
