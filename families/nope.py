"""The NoPE family (NOPE-*): references of nope.apply and nope.layer_flags, the mutant of its
divergence and its golden cases; the math is :mod:`posenc.reference.nope`."""

from __future__ import annotations

from posenc.families import Case, Gen, pos
from posenc.reference import nope
from posenc.spec.models import NopeParams
from posenc.spec.registry import model_params

from . import add_cases, mutant, no_form, reference
from ._common import exact_scales, scalar


def _nope_apply(p, x):
    q, k = nope.apply(x["q"], x["k"], scalar(x, "layer_idx"), p)
    return {"q": q, "k": k}


def _nope_flags(p, x):
    return {"use_rope": nope.layer_flags(p)}


reference("nope.apply", scales=exact_scales(["q", "k"]))(_nope_apply)
reference("nope.layer_flags", scales=exact_scales([]))(_nope_flags)


@mutant("nope_flags_inverted", "nope.layer_flags")
def nope_flags_inverted(op, p, x, dtype=None):
    """HF's no_rope_layers read literally: 1 taken to mean NoPE (every flag inverted)."""
    return {"use_rope": 1 - nope.layer_flags(p)}


no_form("nope.apply", "its cases are NoPE layers; with the flags inverted such a layer rotates, by a RoPE whose "
        "parameters NopeParams does not carry (nope.layer_flags shows the inverted flags)", "nope_flags_inverted")


# ---- golden cases ----------------------------------------------------------------------------
# ---- NoPE (NOPE-*) --------------------------------------------------------------------------------
# SmolLM3-3B: SmolLM3Config defaults num_hidden_layers 36, no_rope_layer_interval 4 (layers 3, 7,
# ..., 35 NoPE), 16 heads, 4 KV heads, head_dim 128 (hidden 2048 / 16) -- library defaults.
_SMOL = model_params("smollm3-3b")
_EXPLICIT = NopeParams(num_hidden_layers=8, no_rope_layers=(1, 1, 0, 1, 0, 0, 1, 1))
add_cases(
    Case("nope-flags-smollm3", "nope.layer_flags", ("NOPE-LAYER-FLAGS",), _SMOL,
         note="36 layers, interval 4: layers 3, 7, ..., 35 are NoPE (flag 0)"),
    Case("nope-flags-interval-3", "nope.layer_flags", ("NOPE-LAYER-FLAGS",),
         NopeParams(num_hidden_layers=10, no_rope_layer_interval=3), note="layers 2, 5, 8 are NoPE"),
    Case("nope-flags-explicit", "nope.layer_flags", ("NOPE-LAYER-FLAGS",), _EXPLICIT,
         note="an explicit no_rope_layers list (1 = uses RoPE) is taken as is"),
    Case("nope-apply-smollm3", "nope.apply", ("NOPE-IDENTITY", "NOPE-LAYER-FLAGS"), _SMOL,
         {"q": Gen((2, 16, 5, 128)), "k": Gen((2, 4, 5, 128)),
          "position_ids": pos([0, 1, 2, 3, 4], [65532, 65533, 65534, 65535, 65536]), "layer_idx": 3},
         "SmolLM3-3B layer 3 (NoPE): 16 q heads, 4 kv heads, head_dim 128; q and k bit-identical"),
    Case("nope-apply-explicit", "nope.apply", ("NOPE-IDENTITY", "NOPE-LAYER-FLAGS"), _EXPLICIT,
         {"q": Gen((3, 2, 4, 64)), "k": Gen((3, 1, 4, 64)), "position_ids": pos([5, 6, 7, 8], [0, 1, 2, 3], [9, 9, 9, 9]),
          "layer_idx": 5}, "layer 5 of an explicit list (flag 0)"),
)
add_cases(
    Case("nope-flags-explicit-longer", "nope.layer_flags", ("NOPE-LAYER-FLAGS",),
         NopeParams(num_hidden_layers=5, no_rope_layers=(0, 1, 1, 0, 1, 1, 0)),
         note="a list longer than num_hidden_layers: the first 5 count (layers 0 and 3 are NoPE)"),
)
