"""Named model entries (``spec/registry/models.yaml``): real models' positional-encoding
parameters, each with sources and provenance.  Golden cases build their parameters with
:func:`model_params`, so a case for "GPT-J-6B" provably uses GPT-J-6B's numbers.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import SpecError
from ..loader import read_yaml
from ..models import PARAM_MODELS, Source

REGISTRY_PATH = Path(__file__).resolve().parent / "models.yaml"
#: Names looked up through :func:`model_params` in this process (the tests check every entry is used).
USED: set[str] = set()


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    title: str
    params_model: str
    values: dict[str, Any]
    sources: list[Source] = Field(min_length=1)


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    registry_version: str
    models: list[ModelEntry]


@functools.lru_cache(maxsize=None)
def load(path: Path = REGISTRY_PATH) -> dict[str, ModelEntry]:
    """Load and validate the registry; errors name the file and field."""
    try:
        reg = Registry.model_validate(read_yaml(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{Path(path).name}: {e}") from None
    except ValidationError as e:
        raise SpecError("; ".join(f"{Path(path).name}: {'.'.join(map(str, x['loc']))}: {x['msg']}"
                                  for x in e.errors())) from None
    out: dict[str, ModelEntry] = {}
    for i, m in enumerate(reg.models):
        if m.name in out:
            raise SpecError(f"{Path(path).name}: models.{i}.name: {m.name!r} listed twice")
        model = PARAM_MODELS.get(m.params_model)
        if model is None:
            raise SpecError(f"{Path(path).name}: models.{i}.params_model: unknown {m.params_model!r}")
        try:
            model(**m.values)
        except ValidationError as e:
            raise SpecError(f"{Path(path).name}: models.{i}.values ({m.name}): {e}") from None
        out[m.name] = m
    return out


def model_params(name: str, **overrides) -> BaseModel:
    """The parameter model of entry ``name``, with ``overrides`` for what a case does not test."""
    entries = load()
    if name not in entries:
        raise SpecError(f"unknown model entry {name!r}; known: {', '.join(sorted(entries))}")
    USED.add(name)
    e = entries[name]
    return PARAM_MODELS[e.params_model](**{**e.values, **overrides})
