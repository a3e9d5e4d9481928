"""The position-id family (POS-*): references of the position_ids.* rules (prefill, decode,
left padding, packing), the mutants of its divergences and its golden cases; the math is
:mod:`posenc.reference.position_ids`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, pos
from posenc.reference import position_ids
from posenc.spec.models import LookupParams

from . import add_cases, case_clauses, mutant, reference
from ._common import exact_scales, run, scalar


@case_clauses("position_ids")
def positions_clauses(p, op: str) -> list[str]:
    """The clauses a position-ids case exercises beyond its own: left padding continues from its cache
    length (0 included)."""
    return ["POS-DECODE"] if op == "position_ids.left_pad" else []



def _pos_prefill(p, x):
    return {"position_ids": position_ids.prefill(scalar(x, "batch"), scalar(x, "seq_len"))}


def _pos_decode(p, x):
    return {"position_ids": position_ids.decode(scalar(x, "batch"), scalar(x, "seq_len"), scalar(x, "cache_length"))}


def _pos_left_pad(p, x):
    pos, cmp = position_ids.left_pad(x["attention_mask"], scalar(x, "cache_length"))
    return {"position_ids": pos, "position_ids.compared": cmp}


def _pos_packed(p, x):
    return {"position_ids": position_ids.packed(x["cu_seqlens"])}


for _op, _fn in (("position_ids.prefill", _pos_prefill), ("position_ids.decode", _pos_decode),
                 ("position_ids.left_pad", _pos_left_pad), ("position_ids.packed", _pos_packed)):
    reference(_op, scales=exact_scales([]))(_fn)


@mutant("pos_cache_off_by_one", "position_ids.decode", "position_ids.left_pad")
def pos_cache_off_by_one(op, p, x, dtype=None):
    out = run(op, p, x)
    out["position_ids"] = out["position_ids"] + 1
    return out


@mutant("pos_left_pad_ignored", "position_ids.left_pad")
def pos_left_pad_ignored(op, p, x, dtype=None):
    pos, _ = position_ids.left_pad(np.ones_like(np.asarray(x["attention_mask"])), int(x["cache_length"]))
    _, compared = position_ids.left_pad(x["attention_mask"], int(x["cache_length"]))
    return {"position_ids": pos, "position_ids.compared": compared}


@mutant("pos_packed_no_restart", "position_ids.packed")
def pos_packed_no_restart(op, p, x, dtype=None):
    n = int(np.asarray(x["cu_seqlens"])[-1])
    return {"position_ids": position_ids.prefill(1, n)}


# ---- golden cases ----------------------------------------------------------------------------
# ---- position ids -------------------------------------------------------------------------
_NOP = LookupParams(num_rows=1, dim=1)  # position-id rules take no parameters
add_cases(
    Case("pos-prefill", "position_ids.prefill", ("POS-PREFILL",), _NOP, {"batch": 2, "seq_len": 5}),
    Case("pos-decode", "position_ids.decode", ("POS-DECODE",), _NOP, {"batch": 3, "seq_len": 2, "cache_length": 7}),
    Case("pos-left-pad", "position_ids.left_pad", ("POS-LEFT-PAD",), _NOP,
         {"attention_mask": pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1]), "cache_length": 0},
         "padded slots are not compared"),
    Case("pos-left-pad-cache", "position_ids.left_pad", ("POS-LEFT-PAD", "POS-DECODE"), _NOP,
         {"attention_mask": pos([0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "cache_length": 4}),
    Case("pos-decode-long", "position_ids.decode", ("POS-DECODE",), _NOP,
         {"batch": 2, "seq_len": 2, "cache_length": 131070}),
    Case("pos-mask-holes", "position_ids.left_pad", ("POS-LEFT-PAD",), _NOP,
         {"attention_mask": pos([1, 0, 1, 1, 0, 1], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]), "cache_length": 0},
         "cumsum(mask) - 1 at real tokens, also across holes and right padding"),
    Case("pos-packed", "position_ids.packed", ("POS-PACKED",), _NOP, {"cu_seqlens": np.asarray([0, 3, 5, 9], np.int64)},
         "cu_seqlens [0,3,5,9] -> [0,1,2,0,1,0,1,2,3]"),
)
