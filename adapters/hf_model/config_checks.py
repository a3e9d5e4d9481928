"""A user's ``config.json`` checked before a tiny model is built of it: every field's type as transformers'
own config class declares it (:func:`check_fields`: its strict dataclass validation, on the config as
written, before the sizes are shrunk), and every other field -- one the class does not declare, which it
keeps as an attribute that transformers' code may read (Llama's ``sliding_window``) -- against the type
the config classes that declare it give it (:func:`check_other_fields`; ``null`` is always allowed), and the memory the model would take (:func:`check_memory`: the
model built on torch's ``meta`` device, which allocates nothing, its parameters and buffers counted at
float64).  Both raise ``ValueError`` with a one-line message naming the field.
"""

from __future__ import annotations

import itertools
import re
import typing
from functools import lru_cache

from .architectures import LAYER_KEYS

#: the most a tiny model of a config may take, in bytes at float64 (its weights and buffers); the kit's
#: own tiny models take a few MB, a learned position table of a million positions 0.5 GB
MAX_MODEL_BYTES = 2 * 2**30


def _config_class(model_type: str):
    from transformers import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def _hints(cls) -> dict:
    """The annotated fields of a config class and their types (class variables left out)."""
    import torch  # the annotations name torch.dtype
    hints = typing.get_type_hints(cls, localns={"torch": torch})
    return {k: v for k, v in hints.items() if typing.get_origin(v) is not typing.ClassVar and v is not typing.ClassVar}


@lru_cache(maxsize=1)
def _declared_types() -> dict[str, tuple]:
    """Every field any of transformers' config classes declares, with the types they give it (read once:
    a few seconds)."""
    from transformers import CONFIG_MAPPING
    out: dict[str, dict] = {}
    for mt in list(CONFIG_MAPPING.keys()):
        try:
            hints = _hints(CONFIG_MAPPING[mt])
        except Exception:  # noqa: BLE001 -- a class transformers cannot load here declares nothing to us
            continue
        for k, v in hints.items():
            out.setdefault(k, {})[repr(v)] = v
    return {k: tuple(v.values()) for k, v in out.items()}


def _fits(key: str, value, hint) -> bool:
    from huggingface_hub.dataclasses import type_validator
    try:
        type_validator(key, value, hint)
    except (TypeError, ValueError):
        return False
    return True


def check_other_fields(model_type: str, config: dict) -> None:
    """``ValueError`` naming the first field of ``config`` that the config class of ``model_type`` does not
    declare and whose value (not ``null``) fits none of the types transformers' other config classes give it."""
    cls = _config_class(model_type)
    own = _hints(cls)
    for key, value in _kwargs(config).items():
        if key in own or value is None or key in cls.attribute_map:
            continue
        types = _declared_types().get(key)
        if types and not any(_fits(key, value, t) for t in types):
            names = " or ".join(sorted({str(t).replace("typing.", "").replace("<class '", "").replace("'>", "")
                                        for t in types}))
            raise ValueError(f"{key}: {value!r} is not of the type transformers' config classes give it ({names}); "
                             f"{cls.__name__} keeps it unchecked and the model would fail on it")


def _kwargs(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "model_type" and not k.startswith("_posenc")}


#: Layers a config may declare: transformers' config classes build per-layer lists (layer types, windows)
#: of that length before anything is shrunk, so a count of 10**9 hangs there; the deepest published model
#: has a few hundred
MAX_LAYERS = 10_000


def check_fields(model_type: str, config: dict) -> None:
    """``ValueError`` naming the first field of ``config`` whose value transformers' config class of
    ``model_type`` rejects (a list where it takes an integer, a string where it takes a number, ...)."""
    for scope, d in (("", config), ("text_config.", config.get("text_config"))):
        for k in (*LAYER_KEYS, "num_decoder_layers"):
            n = d.get(k) if isinstance(d, dict) else None
            if isinstance(n, int) and not isinstance(n, bool) and n > MAX_LAYERS:  # before transformers lists them
                raise ValueError(f"{scope}{k}: {n} layers, more than any model has (over {MAX_LAYERS}): refused")
    cls = _config_class(model_type)
    try:
        cls(**_kwargs(config))
    except Exception as e:  # noqa: BLE001 -- transformers' own validation: its message, on one line
        text = str(e)
        m = re.match(r"Validation error for field '([^']+)':\s*\w+: (.*)", text, re.S)
        if m:
            field, why = m.group(1), " ".join(m.group(2).split())
            why = why.split(" Errors: ")[0]
            raise ValueError(f"{field}: transformers' {cls.__name__} rejects it: {why}") from None
        raise ValueError(f"transformers' {cls.__name__} rejects the config: {' '.join(text.split())[:300]}") from None
    check_other_fields(model_type, config)


def _sized_fields(config: dict, shape: tuple) -> list[str]:
    """The config's integer fields (top level and sub-configs) a dimension of ``shape`` comes from
    (equal, or up to 2 more: OPT's and BART's offset), those of at least 1024."""
    items = itertools.chain(config.items(), *(((f"{k}.{kk}", vv) for kk, vv in v.items())
                                              for k, v in config.items() if isinstance(v, dict)))
    return [k for k, v in items if isinstance(v, int) and not isinstance(v, bool) and v >= 1024
            and any(0 <= d - v <= 2 for d in shape)]


def model_bytes(model_type: str, auto: str, config: dict) -> tuple[int, str, tuple]:
    """``(bytes, name, shape)``: what the model of ``config`` holds at float64 (parameters and buffers),
    and its largest tensor; built on the ``meta`` device (nothing allocated)."""
    import torch
    import transformers
    cfg = _config_class(model_type)(**_kwargs(config))
    with torch.device("meta"):
        model = getattr(transformers, auto).from_config(cfg, dtype=torch.float64)
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    name, big = max(tensors, key=lambda t: t[1].numel())
    return sum(t.numel() * t.element_size() for _, t in tensors), name, tuple(big.shape)


def check_memory(model_type: str, auto: str, config: dict, limit: int = MAX_MODEL_BYTES) -> None:
    """``ValueError`` where the tiny model of ``config`` would take more than ``limit`` bytes at
    float64, naming the estimate, its largest tensor and the fields its size comes from."""
    n, name, shape = model_bytes(model_type, auto, config)
    if n <= limit:
        return
    fields = _sized_fields(config, shape)
    src = f"from {', '.join(f'{k} {_get(config, k)}' for k in fields)}" if fields else "from the config's sizes"
    raise ValueError(f"{', '.join(fields) or 'the sizes'}: the model would take {n / 2**30:,.1f} GiB at float64 "
                     f"(its largest tensor {name} {list(shape)}, {src}), over the {limit / 2**30:g} GiB the "
                     f"model-level suite builds: refused (a shorter context or smaller table checks the same rules)")


def _get(config: dict, dotted: str):
    for part in dotted.split("."):
        config = config[part]
    return config
