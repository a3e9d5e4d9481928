"""RoPE's cos/sin tables and their dtype (ROPE-TABLE-DTYPE, spec 0.5.0): the golden cases that carry the
clause and the mutant of DIV-ROPE-TABLE-NARROWER.

An adapter declares the dtype of the tables it gives and gets at bfloat16 / float16 activations
(``table_dtype``: ``activation`` or ``float32``; :func:`posenc.spec.shapes.table_dtype`); the runner hands
``rope.apply_with_cos_sin`` its ``cos`` / ``sin`` in that dtype and checks the dtype of every ``table`` output.
What no policy allows -- a table rounded below float32 beside float32 or float64 q and k -- is the mutant
below, found by the values.
"""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.reference import rope
from posenc.reference.rounding import bf16_round
from posenc.spec.models import RopeParams
from posenc.spec.registry import model_params

from . import add_cases, mutant
from ._common import Outputs, run

_TABLE_OPS = ("rope.apply", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply_with_cos_sin")


def tables_replaced(op: str, p, x, fn) -> Outputs:
    """The reference with cos and sin (the attention factor included) replaced by ``fn(cos)``, ``fn(sin)``
    wherever they are formed (rope.cos_sin, each call of rope.cos_sin_calls, inside rope.apply) or given
    (rope.apply_with_cos_sin)."""
    if op == "rope.apply_with_cos_sin":
        return run(op, p, {**x, **{n: fn(np.asarray(x[n], np.float64)) for n in ("cos", "sin")}})
    if op == "rope.apply":
        cs = run("rope.cos_sin", p, {"position_ids": x["position_ids"]})
        c, s = fn(cs["cos"]), fn(cs["sin"])
        return {n: rope.apply_with_cos_sin(x[n], c, s, p.pair_dim, p.pairing, p.rotation) for n in ("q", "k")}
    return {k: fn(v) if k.split(".")[0] in ("cos", "sin") else v for k, v in run(op, p, x).items()}


@mutant("rope_table_narrower", *_TABLE_OPS)
def rope_table_narrower(op, p, x, dtype=None):
    """DIV-ROPE-TABLE-NARROWER: at float32 / float64 activations, cos and sin rounded to bfloat16 (a cache
    cast down once and read by a wider computation); the angles exact.  None at bfloat16 (the activation
    dtype's own table) and float16 (a bfloat16 table's error is within float16's rule)."""
    if dtype not in ("float32", "float64"):
        return None
    return tables_replaced(op, p, x, bf16_round)


_LLAMA3 = model_params("llama-3-8b")
_PID = pos([0, 1, 255, 4095, 65535, 131071], [7, 300, 9000, 20000, 100000, 131000])
_GIVEN = RopeParams(head_dim=64, rope_theta=500000.0)
_GIVEN_PID = pos(range(17, 20), [4095, 65535, 131071])
_C, _S = rope.cos_sin(_GIVEN_PID, _GIVEN)
add_cases(
    Case("rope-cos-sin-table", "rope.cos_sin", ("ROPE-TABLE-DTYPE", "ROPE-ANGLE"), _LLAMA3,
         {"position_ids": _PID},
         "Llama 3 tables at positions 0 .. 131071: given in the adapter's table dtype (float32 or the "
         "activation dtype); a bfloat16 table beside float32 activations is off by up to 2**-9"),
    Case("rope-apply-cos-sin-table", "rope.apply_with_cos_sin", ("ROPE-TABLE-DTYPE", "ROPE-PAIR-HALF"), _GIVEN,
         {"q": Gen((2, 4, 3, 64)), "k": Gen((2, 2, 3, 64)), "cos": _C, "sin": _S},
         "float64 tables handed in the adapter's table dtype (float32 beside bfloat16 / float16 q and k "
         "where it declares table_dtype float32): a kernel that rounds them below the activations fails"),
)
