"""Family ``model`` (spec/model.yaml): the scenarios of positions per row, far from 0 and past the model's
last one (MODEL-DECODE-PER-ROW, MODEL-FAR-DECODE, MODEL-POSITION-LIMIT), registered by
:mod:`posenc.families.model`, which imports this module after its own scenarios.

A model without ``position_ids`` (its positions are its cache's slots, as a model driven by
``input_pos`` or a cache length) is driven to the same positions by its cache: MODEL-FAR-DECODE fills
the cache with that many tokens first, MODEL-POSITION-LIMIT feeds one token more than it takes.

Primary sources: transformers 5.24 ``models/llama/modeling_llama.py::LlamaModel.forward`` (``position_ids``
given per row, else ``cache_position``), ``models/gpt2/modeling_gpt2.py::GPT2Model.forward`` (the position
table ``wpe``: an index past its rows raises); ml-explore/mlx issues 3494 and 3795 (batched decode of
rows at different positions).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from posenc import families
from posenc.families.model_common import DECODE_STEPS, FAR, PROMPT
from posenc.families.model_common import scenario as _scenario
from posenc.harness.checks import CAUSAL, MODEL_KINDS, Facts, Run
from posenc.reference import position_ids as pos

#: MODEL-DECODE-PER-ROW's row offsets, drawn distinct from ``[0, high)`` (from the run's seed)
ROW_OFFSETS = 60
#: MODEL-FAR-DECODE's positions counted by the cache: it is filled with this many tokens first (``[low, high)``,
#: drawn), in chunks of FILL_CHUNK tokens (one row: the attention of a chunk over the whole cache stays small)
FAR_SLOTS, FILL_CHUNK = (1024, 1536), 256


def _start(r: Run, want: int, length: int) -> int:
    """``want``, or the last start from which ``length`` positions stay below the model's ``max_positions``."""
    top = r.info.get("max_positions")
    return want if top is None else max(0, min(want, int(top) - length))


def _decode_steps(r: Run, ids: np.ndarray, at: np.ndarray, cache, start: int, how: str = "", cached: int = 0,
                  ids_given: bool = True) -> list:
    """Decode steps of ``ids[:, start:]`` one token at a time through ``cache``, which holds ``cached`` tokens
    before ``ids`` (positions ``at[:, start + s]``, handed as position_ids where ``ids_given`` and the model takes
    them); each step's logits ``[B, V]``."""
    steps = []
    for s in range(ids.shape[1] - start):
        q = at[:, start + s:start + s + 1]
        given = {"position_ids": q} if ids_given and "position_ids" in r.info["capabilities"] else {}
        step, cache = r.forward(f"{how}decode step {s} (positions {', '.join(map(str, q[:, 0]))})",
                                input_ids=ids[:, start + s:start + s + 1], cache=cache, use_cache=True, positions=q,
                                cache_length=cached + start + s, **given)
        steps.append(step[:, 0])
    return steps


@_scenario("MODEL-DECODE-PER-ROW", "decode-per-row", kinds=CAUSAL, needs=("cache", "position_ids"),
           implies=("POS-DECODE",))
def _decode_per_row(r: Run) -> None:
    p, n, b = PROMPT, DECODE_STEPS, 3
    ids = r.tokens(b, p + n)
    top = ROW_OFFSETS if r.info.get("max_positions") is None else min(ROW_OFFSETS, int(r.info["max_positions"]) - p - n)
    off = r.rng.choice(np.arange(max(top, b)), size=b, replace=False)  # distinct: a row using another's shows
    at = off[:, None] + pos.prefill(b, p + n)
    _, cache = r.forward(f"prefill, rows at positions {', '.join(f'{int(o)} ..' for o in off)}", input_ids=ids[:, :p],
                         position_ids=at[:, :p], use_cache=True, positions=at[:, :p])
    steps = _decode_steps(r, ids, at, cache, p)
    for x in range(b):
        alone, _ = r.forward(f"row {x} alone at positions {int(off[x])} ..", input_ids=ids[x:x + 1],
                             position_ids=at[x:x + 1], positions=at[x:x + 1])
        r.same(f"row {x}'s decode steps == row {x} alone", np.stack([s[x] for s in steps]), alone[0, p:],
               [f"row {x} decode step {s} (position {int(at[x, p + s])})" for s in range(n)])


def _filled(r: Run, filler: np.ndarray, what: str):
    """A cache holding ``filler`` (``[1, F]``), fed in chunks: positions 0 .. F-1, the chunked prefill's rule
    (MODEL-CHUNKED-PREFILL), every chunk's rotation or table rows checked; its attention and bias probes are not
    kept (a chunk's over the whole cache is large)."""
    cache = None
    for c in range(0, filler.shape[1], FILL_CHUNK):
        chunk = filler[:, c:c + FILL_CHUNK]
        _, cache = r.forward(f"{what}: tokens {c} .. {c + chunk.shape[1] - 1} into the cache", input_ids=chunk,
                             cache=cache, use_cache=True, positions=pos.decode(1, chunk.shape[1], c), cache_length=c,
                             keep=("rope", "table"))
    return cache


@_scenario("MODEL-FAR-DECODE", "far-decode", kinds=CAUSAL, needs=("cache",), implies=("POS-DECODE",))
def _far_decode(r: Run) -> None:
    p, n = PROMPT, DECODE_STEPS
    if "position_ids" in r.info["capabilities"]:  # positions handed in
        ids = r.tokens(2, p + n)
        start = _start(r, int(r.rng.integers(*FAR)), p + n)
        at = start + pos.prefill(2, p + n)
        full, _ = r.forward(f"position_ids: one pass at positions {start} ..", input_ids=ids, position_ids=at,
                            positions=at)
        _, cache = r.forward(f"position_ids: prefill at positions {start} ..", input_ids=ids[:, :p],
                             position_ids=at[:, :p], use_cache=True, positions=at[:, :p])
        _same_steps(r, _decode_steps(r, ids, at, cache, p, "position_ids: "), full, at, p)
    # positions counted by the cache (no position_ids handed): its slots filled first
    ids = r.tokens(1, p + n)
    start = _start(r, int(r.rng.integers(*FAR_SLOTS)), p + n)
    filler = r.tokens(1, start)
    at = start + pos.prefill(1, p + n)
    full, _ = r.forward(f"one pass at positions {start} .. after {start} cached tokens", input_ids=ids,
                        cache=_filled(r, filler, "the one pass"), use_cache=True, positions=at, cache_length=start)
    _, cache = r.forward(f"prefill at positions {start} .. after {start} cached tokens", input_ids=ids[:, :p],
                         cache=_filled(r, filler, "the decode"), use_cache=True, positions=at[:, :p], cache_length=start)
    _same_steps(r, _decode_steps(r, ids, at, cache, p, "", cached=start, ids_given=False), full, at, p)
    if r.info.get("max_positions") is not None and start < FAR_SLOTS[0]:
        r.unchecked(f"positions from {FAR_SLOTS[0]} on (the model takes {r.info['max_positions']}: max_positions)")


def _same_steps(r: Run, steps: list, full: np.ndarray, at: np.ndarray, p: int) -> None:
    for s, step in enumerate(steps):
        r.same(f"decode step {s} == one pass at position {int(at[0, p + s])}", step, full[:, p + s],
               [f"row {x} position {int(at[x, p + s])}" for x in range(full.shape[0])])


def _has_limit(info: dict) -> Optional[str]:
    if info.get("max_positions") is None:
        return ("MODEL-POSITION-LIMIT applies to models that declare a last position (max_positions); this one "
                "declares none")
    return None


@_scenario("MODEL-POSITION-LIMIT", "position-limit", kinds=MODEL_KINDS, applies=_has_limit, implies=("POS-PREFILL",))
def _position_limit(r: Run) -> None:
    top, t = int(r.info["max_positions"]), 8
    caps = r.info["capabilities"]
    if "position_ids" in caps:
        ids = r.tokens(2, t)
        last = top - t + pos.prefill(2, t)
        r.forward(f"positions {top - t} .. {top - 1} (the last the model takes)", input_ids=ids, position_ids=last,
                  positions=last)
        for over in (t // 2, top):  # just past the end, and a whole table further (a wrap there looks right)
            at = last + over
            r.refused(f"positions {int(at.min())} .. {int(at.max())}", input_ids=ids, position_ids=at, positions=at,
                      limit=top)
        return
    ids = r.tokens(1, top + 1)
    if "cache" in caps and r.info["kind"] != "encoder":
        _, cache = r.forward(f"prefill of {top} tokens (positions 0 .. {top - 1}, the last the model takes)",
                             input_ids=ids[:, :top], use_cache=True, positions=pos.prefill(1, top))
        r.refused(f"token {top} through the cache (position {top})", input_ids=ids[:, top:], cache=cache,
                  use_cache=True, positions=np.array([[top]]), limit=top, cache_length=top)
        return
    r.forward(f"{top} tokens (positions 0 .. {top - 1}, the last the model takes)", input_ids=ids[:, :top],
              positions=pos.prefill(1, top))
    r.refused(f"{top + 1} tokens (positions 0 .. {top})", input_ids=ids, positions=pos.prefill(1, top + 1), limit=top)


@families.model_mutant("rope_row0_positions")
def _m_row0(f: Facts) -> Optional[bool]:
    """Every row of a batch at row 0's positions (a shared offset or cache_position)."""
    return f.positions_are(lambda c: np.broadcast_to(c["positions"][:1], c["positions"].shape)
                           if c["positions"].shape[0] > 1 else None)
