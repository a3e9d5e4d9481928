"""Reading transformers' own modeling code for the survey: a model type's modeling module, its rotary
modules and their frequencies, its apply functions, and the pairing they compute, probed
(:func:`probe_pairing`: the model's own apply function run on random q with its own rotary module's
cos/sin, compared with the reference's three pairings on those cos/sin).  Needs the ``[hf]`` extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import typing
import warnings
from typing import Any, Optional

import numpy as np

from posenc.hf.tables import _nested


def _quiet():
    """transformers, imported with its own warnings and logging silenced (the survey builds 822
    default configs, many of which warn about their own defaults)."""
    warnings.filterwarnings("ignore", module=r"(transformers|torch|torchao)(\.|$)")
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


def _jsonable(v):
    return json.loads(json.dumps(v, default=str))


def _resolve_modeling(model_type: str) -> tuple[Any, str, Optional[str]]:
    """``(module or None, name or reason, via)``: the model type's modeling module.  A model type
    without a modeling module of its own runs another's: its base model class in transformers'
    ``MODEL_MAPPING_NAMES`` (EXAONE, InternLM 3 and IQuest-Coder are ``LlamaModel``, Sarvam-MLA
    ``DeepseekV3Model``), whose module is then the one used, ``via`` saying so
    (``"exaone -> LlamaModel (MODEL_MAPPING_NAMES)"``; None where it has its own)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name
    mod = model_type_to_module_name(model_type)
    try:
        return importlib.import_module(f"transformers.models.{mod}.modeling_{mod}"), mod, None
    except ModuleNotFoundError as e:
        if e.name != f"transformers.models.{mod}.modeling_{mod}":
            return None, f"{mod} ({type(e).__name__})", None
        missing = e
    except Exception as e:  # noqa: BLE001 - a model type whose modeling module fails is a listed row
        return None, f"{mod} ({type(e).__name__})", None
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    cls_name = MODEL_MAPPING_NAMES.get(model_type)
    import transformers
    cls = getattr(transformers, cls_name, None) if isinstance(cls_name, str) else None
    if cls is None:
        return None, f"{mod} ({type(missing).__name__})", None
    return (importlib.import_module(cls.__module__), cls.__module__.removeprefix("transformers.models.").split(".")[0],
            f"{model_type} -> {cls_name} (MODEL_MAPPING_NAMES)")


def _modeling(model_type: str):
    """``(module, name)`` of :func:`_resolve_modeling`, or ``(None, reason)``."""
    return _resolve_modeling(model_type)[:2]


def modeling_via(model_type: str) -> Optional[str]:
    """The base model class a model type without a modeling module of its own runs (:func:`_resolve_modeling`)."""
    return _resolve_modeling(model_type)[2]


def _config_hint(cls):
    try:
        return typing.get_type_hints(cls.__init__).get("config")
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to trying the class
        return None


def _rotary_classes(module) -> dict[str, type]:
    """``{name: class}`` of the ``*RotaryEmbedding`` classes the modeling module defines itself."""
    return {n: c for n, c in vars(module).items()
            if n.endswith("RotaryEmbedding") and inspect.isclass(c) and c.__module__ == module.__name__}


def rotary_modules(module, sub_config, errors: Optional[list] = None) -> list[tuple[str, Any]]:
    """``[(class name, instance)]`` of the module's ``*RotaryEmbedding`` classes built from
    ``sub_config``: those annotated with the sub-config's class, else every one that builds."""
    classes = _rotary_classes(module)
    typed = [n for n, c in classes.items() if _config_hint(c) is type(sub_config)]
    built = []
    for name in typed or sorted(classes):
        try:
            built.append((name, classes[name](sub_config)))
        except Exception as e:  # noqa: BLE001 - a class for another sub-config
            if typed and errors is not None:  # the class written for this sub-config refuses it: why
                errors.append(f"{name}: {type(e).__name__}: {e}"[:160])
            continue
    return [(n, r) for n, r in built if any(b.endswith("inv_freq") for b, _ in r.named_buffers())]


def rotary_frequencies(rotary) -> dict[Optional[str], tuple[np.ndarray, float]]:
    """``{layer_type or None: (inv_freq float64, attention_scaling)}`` of a built rotary module."""
    out = {}
    for name, buf in rotary.named_buffers():
        if not name.endswith("inv_freq") or "original" in name or "." in name:
            continue
        lt = name[: -len("inv_freq")].rstrip("_") or None
        scaling = getattr(rotary, f"{lt}_attention_scaling" if lt else "attention_scaling", 1.0)
        out[lt] = (buf.detach().double().numpy().copy(), float(scaling))
    return out


def _cos_sin(rotary, layer_type, seq: int):
    import torch
    x = torch.zeros(1, seq, 8, dtype=torch.float32)
    pos = torch.arange(seq)[None]
    kwargs = {"layer_type": layer_type} if layer_type else {}
    return rotary(x, pos, **kwargs)


#: the modeling modules' apply functions probed: name -> the leading parameters it may have
APPLY_FUNCTIONS = {"apply_rotary_pos_emb_interleave": (("q", "k", "cos", "sin"),),
                   "apply_rotary_pos_emb": (("q", "k", "cos", "sin"), ("x", "cos", "sin")),
                   # Llama 4, DeepSeek-V2: q times a complex freqs_cis [B, T, D/2]
                   "apply_rotary_emb": (("xq", "xk", "freqs_cis"),)}


def apply_functions(module) -> dict:
    """``{name: (function, kind)}`` of the module's own apply functions (:data:`APPLY_FUNCTIONS`);
    kind ``qk`` (q, k, cos, sin), ``x`` (x, cos, sin) or ``complex`` (xq, xk, freqs_cis)."""
    out = {}
    for name, leads in APPLY_FUNCTIONS.items():
        fn = getattr(module, name, None)
        if fn is None or getattr(fn, "__module__", None) != module.__name__:
            continue
        params = tuple(inspect.signature(fn).parameters)
        for lead in leads:
            if params[:len(lead)] == lead:
                out[name] = (fn, "complex" if lead[0] == "xq" else {4: "qk", 3: "x"}[len(lead)])
    return out


def _apply(fn, kind: str, rotary, layer_type, q, seq: int) -> list[np.ndarray]:
    """The outputs of one apply function on ``q [1, 1, T, r]`` with the rotary module's own
    cos/sin (or freqs_cis), each as ``[1, 1, T, r]`` float64: both layouts for a complex one
    (DeepSeek-V2 takes q [B, H, T, D], Llama 4 [B, T, H, D])."""
    import torch
    with torch.no_grad():
        if kind == "complex":
            freqs = _cos_sin(rotary, layer_type, seq)
            if not torch.is_complex(freqs):
                raise TypeError("the rotary module does not return a complex freqs_cis")
            outs = [fn(q, q.clone(), freqs)[0], fn(q.transpose(1, 2), q.transpose(1, 2), freqs)[0].transpose(1, 2)]
        else:
            cos, sin = _cos_sin(rotary, layer_type, seq)
            out = fn(q, q.clone(), cos, sin) if kind == "qk" else fn(q, cos, sin)
            outs = [out[0] if kind == "qk" else out]
    return [o.double().numpy() for o in outs if tuple(o.shape) == tuple(q.shape)]


def _matches(outs: list, want: np.ndarray) -> bool:
    tol = 1e-5 * max(1.0, float(np.abs(want).max()))
    return any(np.allclose(o, want, rtol=0, atol=tol) for o in outs)


def probe_pairing(module, rotary, layer_type=None, function: str = "apply_rotary_pos_emb",
                  seq: int = 12) -> tuple[Optional[str], str]:
    """The pairing and rotation of one of the model's apply functions (:data:`APPLY_FUNCTIONS`)
    with this rotary module's cos/sin: ``(pairing or None, evidence)``, the pairing suffixed
    ``/negative`` where the pairs turn by -phi (ROPE-ROTATION-NEGATIVE: NanoChat).  q is random
    (seeded) and the output is compared with the reference's three pairings (ROPE-PAIR-HALF /
    -INTERLEAVED / -DEINTERLEAVE) in both directions on the module's own frequencies (float32
    tolerance); anything else matches none."""
    import torch

    from posenc.reference.rope import apply_with_cos_sin
    short = module.__name__.removeprefix("transformers.models.")
    found = apply_functions(module)
    if function not in found:
        return None, f"no {function}(q, k, cos, sin) or (x, cos, sin) in {short}"
    fn, kind = found[function]
    where = f"{short}.{function}"
    w, a = rotary_frequencies(rotary)[layer_type]
    r = 2 * len(w)
    q = torch.randn(1, 1, seq, r, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    try:
        outs = _apply(fn, kind, rotary, layer_type, q, seq)
    except Exception as e:  # noqa: BLE001 - recorded as the row's evidence
        return None, f"{where}: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    phi = np.arange(seq, dtype=np.float64)[None, :, None] * w
    matches = [(pairing, rotation) for rotation in ("positive", "negative")
               for pairing in ("half", "interleaved", "deinterleave")
               if _matches(outs, apply_with_cos_sin(q.double().numpy(), a * np.cos(phi), a * np.sin(phi), r, pairing,
                                                    rotation))]
    if len(matches) != 1:
        named = [p if rot == "positive" else f"{p} by -phi" for p, rot in matches]
        return None, f"{where}: matches {named or 'no pairing'} of the reference"
    pairing, rotation = matches[0]
    if rotation == "negative":
        return f"{pairing}/negative", f"{where} probed (ROPE-PAIR-{pairing.upper()}, ROPE-ROTATION-NEGATIVE)"
    return pairing, f"{where} probed (ROPE-PAIR-{pairing.upper()})"


def class_value(obj, key):
    """A config attribute (a class-level default that ``to_dict`` leaves out included)."""
    try:
        return getattr(obj, key, None)
    except Exception:  # noqa: BLE001 - transformers' per-layer attributes refuse a global read
        return None


def is_axial_rope(rope: dict) -> bool:
    """A config's rope parameters (one set, or one per layer type) hold an axial set."""
    sets = rope.values() if _nested(rope) else [rope]
    return any(isinstance(s, dict) and s.get("rope_type") == "axial" for s in sets)
