"""Deprecated: the config import moved to the transformers bridge, :mod:`posenc.hf` (its public API) and
its modules (:mod:`posenc.hf.tables`, ``rope``, ``layers``, ``mrope``, ``axial``, ``components``).  Kept
for one release (spec 0.4.x) with every name it had; importing it warns.  (The spec imports nothing else
of the kit: this re-export is the one exception, declared in .importlinter, and goes with the release.)"""

from __future__ import annotations

import warnings

from posenc.hf import axial as _axial
from posenc.hf import components as _components
from posenc.hf import layers as _layers
from posenc.hf import mrope as _mrope
from posenc.hf import rope as _rope
from posenc.hf import tables as _tables

warnings.warn("posenc.spec.hf_config is deprecated: import the config import from posenc.hf "
              "(params_from_hf_config, rope_import, ...)", DeprecationWarning, stacklevel=2)

for _m in (_tables, _layers, _rope, _mrope, _axial, _components):
    globals().update({k: v for k, v in vars(_m).items() if not k.startswith("__")})
del _m
