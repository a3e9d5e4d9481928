"""The per-layer-type RoPE family (LAYERS-*): the reference and error scales of layers.apply,
the mutants of its divergences and its golden cases; the math is
:mod:`posenc.reference.layer_types` over :mod:`posenc.reference.rope`."""

from __future__ import annotations

from typing import Optional

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.reference import layer_types, rope
from posenc.spec.models import LayerRopeParams, RopeParams

from . import add_cases, case_clauses, mutant, no_form, reference
from ._common import scalar
from .rope import freq_provider, rope_scales


@case_clauses("layers")
def layers_clauses(p, op: str) -> list[str]:
    """The clauses a per-layer-type case exercises beyond its own: the layer types' sets."""
    return ["LAYERS-SETS"]



def _with(st: Optional[RopeParams], x) -> dict:
    """q and k rotated with the set ``st`` (unchanged for None)."""
    if st is None:
        return {n: np.asarray(x[n], np.float64).copy() for n in ("q", "k")}
    q, k = rope.apply(x["q"], x["k"], x["position_ids"], st)
    return {"q": q, "k": k}


def _type(p, x) -> str:
    """The type of the case's layer ``layer_idx``."""
    return p.layer_type(scalar(x, "layer_idx"))


def _other_type(p, x) -> str:
    """The other of the two layer types."""
    return "sliding_attention" if _type(p, x) == "full_attention" else "full_attention"


def _apply(p: LayerRopeParams, x):
    q, k = layer_types.apply(x["q"], x["k"], x["position_ids"], scalar(x, "layer_idx"), p)
    return {"q": q, "k": k}


def _scales(p: LayerRopeParams, x):
    st = p.set_for(scalar(x, "layer_idx"))
    if st is None:
        # a copy, bounded as the other type's rotation would be: the copy is well within it, and
        # a layer rotated anyway (DIV-LAYERS-NO-ROPE-ROTATED) is matched by its mutant at the
        # rotation's own precision
        other = p.set_of(_other_type(p, x))
        return rope_scales("rope.apply", other, x, freq_provider(other))
    return rope_scales("rope.apply", st, x, freq_provider(st))


reference("layers.apply", scales=_scales)(_apply)


# ---- mutants (DIV-LAYERS-*) ------------------------------------------------------------------
def _one_set_everywhere(p, x, layer_type: str):
    """Every layer with RoPE rotated with the set of ``layer_type`` (None where not applicable)."""
    st = p.set_of(layer_type)
    if st is None or p.set_for(scalar(x, "layer_idx")) is None:
        return None
    return _with(st, x)


@mutant("layers_full_set_everywhere", "layers.apply")
def layers_full_set_everywhere(op, p, x, dtype=None):
    """Every layer with RoPE rotated with the full-attention set (theta and scaling)."""
    return _one_set_everywhere(p, x, "full_attention")


@mutant("layers_sliding_set_everywhere", "layers.apply")
def layers_sliding_set_everywhere(op, p, x, dtype=None):
    """Every layer with RoPE rotated with the sliding set (its theta, unscaled)."""
    return _one_set_everywhere(p, x, "sliding_attention")


@mutant("layers_scaling_everywhere", "layers.apply")
def layers_scaling_everywhere(op, p, x, dtype=None):
    """Each type's own theta, the full-attention set's linear factor on the sliding layers too."""
    st = p.set_for(scalar(x, "layer_idx"))
    if st is None or p.full_factor == 1.0:
        return None
    if _type(p, x) == "sliding_attention":
        st = st.model_copy(update={"rope_type": "linear", "factor": p.full_factor})
    return _with(st, x)


@mutant("layers_pattern_shifted", "layers.apply")
def layers_pattern_shifted(op, p, x, dtype=None):
    """Layer i given the type of layer i + 1 (the last layer that of layer 0)."""
    i = scalar(x, "layer_idx")
    return _with(p.set_for((i + 1) % len(p.layer_types)), x)


@mutant("layers_no_rope_rotated", "layers.apply")
def layers_no_rope_rotated(op, p, x, dtype=None):
    """A layer of a type without RoPE rotated with the other type's set."""
    if p.set_for(scalar(x, "layer_idx")) is not None:
        return None
    return _with(p.set_of(_other_type(p, x)), x)


no_form("layers.apply", "layers.apply checks which parameter set each layer rotates with (LAYERS-*); a RoPE bug inside "
        "the rotation is named on the rope.* operations, which the same rotation code serves")


# ---- golden cases ----------------------------------------------------------------------------
# Gemma 3 (4B and up, published configs; Gemma3TextConfig's pattern: five sliding layers, then one
# full-attention layer): head_dim 256, full attention theta 1e6 with linear factor 8, sliding theta
# 1e4.  Cohere 2 / Command R7B (Cohere2Config: hidden 4096 / 32 heads = 128, sliding_window_pattern
# 4, theta 50000 on the sliding layers, interleaved pairing, full-attention layers NoPE).  DeepSeek-V4
# style (sliding theta 1e4, the other layers theta 160000).  The figure is LAYERS-SETS' statement.
_S, _F = "sliding_attention", "full_attention"
_GEMMA3 = LayerRopeParams(head_dim=256, layer_types=(_S,) * 5 + (_F,) + (_S,) * 5 + (_F,), full_factor=8.0)
_COHERE2 = LayerRopeParams(head_dim=128, layer_types=(_S, _S, _S, _F) * 2, full_rope_theta=None,
                           sliding_rope_theta=50000.0, pairing="interleaved")
_DSV4 = LayerRopeParams(head_dim=64, layer_types=(_S, _S, _F, _F, _F, _S), full_rope_theta=160000.0)
_EXAONE4 = LayerRopeParams(head_dim=128, layer_types=(_S, _S, _S, _F), full_rope_theta=None,
                           sliding_rope_theta=1000000.0)
_LINEAR4 = LayerRopeParams(head_dim=32, layer_types=(_F, _S, _F, _S), full_rope_theta=20000.0, full_factor=4.0,
                           sliding_rope_theta=500000.0, pairing="interleaved")
_FIG = LayerRopeParams(head_dim=4, layer_types=(_S, _F), full_factor=8.0, sliding_rope_theta=100.0)
_FIG_X = np.asarray([1.0, 0.0, 0.0, 1.0]).reshape(1, 1, 1, 4)
_POS = pos([0, 1, 2, 3, 4093, 4094, 4095, 9000])
_POS2 = pos([0, 1, 2, 3, 4, 5, 6, 7], [4089, 4090, 4091, 4092, 4093, 4094, 4095, 9000])


def _case(cid, p, layer, clauses, note, heads=(2, 1), positions=_POS):
    B, T = positions.shape
    return Case(cid, "layers.apply", clauses, p,
                {"q": Gen((B, heads[0], T, p.head_dim)), "k": Gen((B, heads[1], T, p.head_dim)),
                 "position_ids": positions, "layer_idx": layer}, note)


_L = ("LAYERS-SETS",)
add_cases(
    Case("layers-figure-sliding", "layers.apply", _L, _FIG,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": pos([8]), "layer_idx": 0},
         "layer 0 (sliding, theta 100): angles [8, 0.8]"),
    Case("layers-figure-full", "layers.apply", _L, _FIG,
         {"q": _FIG_X, "k": _FIG_X[..., ::-1].copy(), "position_ids": pos([8]), "layer_idx": 1},
         "layer 1 (full, theta 1e6, factor 8): angles [1, 0.001]"),
    _case("layers-gemma3-sliding-4", _GEMMA3, 4, _L, "Gemma 3: layer 4 is sliding (theta 1e4, unscaled), the next is full",
          heads=(1, 1)),
    _case("layers-gemma3-full-5", _GEMMA3, 5, _L, "Gemma 3: layer 5 is full attention (theta 1e6, factor 8)", heads=(1, 1)),
    _case("layers-gemma3-sliding-6", _GEMMA3, 6, _L, "Gemma 3: layer 6 is sliding after a full layer", heads=(1, 1)),
    _case("layers-gemma3-full-11", _GEMMA3, 11, _L, "Gemma 3: the last layer, full attention", heads=(1, 1)),
    _case("layers-cohere2-sliding-2", _COHERE2, 2, _L, "Cohere 2: layer 2 sliding (theta 5e4, adjacent pairs)"),
    _case("layers-cohere2-full-3", _COHERE2, 3, ("LAYERS-NO-ROPE",), "Cohere 2: layer 3 full attention, no RoPE"),
    _case("layers-cohere2-full-7", _COHERE2, 7, ("LAYERS-NO-ROPE",), "Cohere 2: the last layer, no RoPE"),
    _case("layers-exaone4-sliding-0", _EXAONE4, 0, _L, "EXAONE 4 style: sliding theta 1e6, full NoPE"),
    _case("layers-exaone4-full-3", _EXAONE4, 3, ("LAYERS-NO-ROPE",), "EXAONE 4 style: full-attention layer 3, no RoPE"),
    _case("layers-dsv4-sliding-1", _DSV4, 1, _L, "two thetas, no scaling: sliding layer 1 (theta 1e4), layer 2 is not",
          positions=_POS2),
    _case("layers-dsv4-full-4", _DSV4, 4, _L, "two thetas: layer 4 (theta 160000), layer 5 sliding",
          positions=_POS2, heads=(1, 1)),
    _case("layers-linear-4-full-2", _LINEAR4, 2, _L, "factor 4 on the full-attention set, adjacent pairs"),
    _case("layers-linear-4-sliding-1", _LINEAR4, 1, _L, "the sliding layer before it: unscaled, theta 5e5"),
)
