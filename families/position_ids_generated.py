"""Generated-case strategies of the position_ids family: batch sizes, lengths, caches up to
2^17, masks with left / right padding and holes, packed documents of random lengths."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import LookupParams

from . import branch, generator

_NOP = LookupParams(num_rows=1, dim=1)  # position-id rules take no parameters


@generator("position_ids.prefill")
def gen_prefill(draw):
    b, t = g.shape(draw, (1, 2, 3), (1, 2, 7))
    return g.case("position_ids.prefill", _NOP, {"batch": b, "seq_len": t}, ["POS-PREFILL"])


@generator("position_ids.decode")
def gen_decode(draw):
    b, t = g.shape(draw, (1, 2, 3), (1, 2, 4))
    cache = draw(st.sampled_from([0, 1, 7, 4095, 65535, 131070]))
    return g.case("position_ids.decode", _NOP, {"batch": b, "seq_len": t, "cache_length": cache}, ["POS-DECODE"])


@generator("position_ids.left_pad")
def gen_left_pad(draw):
    b, s = g.shape(draw, (1, 2, 3), (2, 4, 7))
    m = g.mask(draw, b, s)
    cache = draw(st.integers(0, s - 1))
    cl = ["POS-LEFT-PAD"]
    return g.case("position_ids.left_pad", _NOP, {"attention_mask": m, "cache_length": cache}, cl)


@generator("position_ids.packed")
def gen_packed(draw):
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    if sum(lengths) == 0:  # an empty pack is not a batch; empty documents inside one are
        lengths[-1] = 1
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return g.case("position_ids.packed", _NOP, {"cu_seqlens": cu}, ["POS-PACKED"])


@branch("POS-LEFT-PAD", "padded")
def _padded(p, x):
    return bool((np.asarray(x["attention_mask"]) == 0).any())
