"""Family ``model`` (spec/model.yaml, MODEL-*): whole-model scenarios and their position rules.

Each scenario is one clause: a *driver* ``run(r)`` over a :class:`~posenc.harness.model_run.Run`
that calls a built model the way the clause describes (a prefill, decode steps through a cache, a
padded or packed batch, generate) and records, for every forward pass, the positions the clause's
rule gives, the probes the model captured, and the pairs of logits the clause says are equal; the
harness judges the record (:mod:`posenc.harness.model_judge`).

Position rules are the POS-* references (:mod:`posenc.reference.position_ids`): ``prefill``,
``decode``, ``left_pad`` (cumsum(mask) - 1 at real tokens) and ``packed``.  The encoding-level rule
(a learned table's row offset, RoPE's rotation, ALiBi's slopes) is applied by the judge from the
model's own encoding parameters (:meth:`posenc.adapters.model.ModelAdapter.encodings`).

Model-level mutants (:func:`posenc.families.model_mutant`) say whether a run's
:class:`~posenc.harness.model_run.Facts` -- the positions recovered from the probes of every
forward pass, the attention mass that crosses documents or reaches pads -- are what a plumbing bug
produces.

Primary sources: transformers 5.24 ``generation/utils.py`` (``_prepare_position_ids_for_generation``,
``_update_model_kwargs_for_generation``), ``masking_utils.py::find_packed_sequence_indices``,
``tests/generation/test_utils.py`` and ``tests/test_modeling_common.py`` (the equivalences each
clause cites).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from posenc import families
from posenc.families.model_common import DECODE_STEPS, DOCS, LENGTHS, PROMPT
from posenc.families.model_common import scenario as _scenario
from posenc.harness.checks import CAPABILITIES, CAUSAL, MODEL_KINDS, Facts, Run, cached_real
from posenc.reference import position_ids as pos
from posenc.spec.errors import Unsupported
from posenc.spec.models import (BartEmbeddingParams, BertEmbeddingParams, GPT2EmbeddingParams, LookupParams, MRopeParams,
                                NopeParams, OPTEmbeddingParams, RobertaEmbeddingParams, RopeParams, SinusoidalParams,
                                SoftmaxScaleParams)

# ---- scenarios -----------------------------------------------------------------------------------
# Each driver: the clause's calls, the positions its rule gives, the logits it says are equal.


@_scenario("MODEL-PREFILL", "prefill", kinds=MODEL_KINDS, implies=("POS-PREFILL",))
def _prefill(r: Run) -> None:
    ids = r.tokens(2, PROMPT + 12)
    r.forward("prefill", input_ids=ids, positions=pos.prefill(*ids.shape))


@_scenario("MODEL-BATCH", "batch", kinds=MODEL_KINDS, implies=("POS-PREFILL",))
def _batch(r: Run) -> None:
    ids = r.tokens(3, PROMPT)
    logits, _ = r.forward("batch of 3", input_ids=ids, positions=pos.prefill(*ids.shape))
    for b in range(3):
        one, _ = r.forward(f"row {b} alone", input_ids=ids[b:b + 1], positions=pos.prefill(1, PROMPT))
        r.same(f"row {b} in the batch == row {b} alone", logits[b], one[0], [f"row {b} position {t}" for t in range(PROMPT)])


@_scenario("MODEL-DECODE", "decode", kinds=CAUSAL, needs=("cache",), implies=("POS-DECODE",))
def _decode(r: Run) -> None:
    p, n = PROMPT, DECODE_STEPS
    ids = r.tokens(2, p + n)
    full, _ = r.forward("prefill of all tokens", input_ids=ids, positions=pos.prefill(2, p + n))
    _, cache = r.forward("prefill", input_ids=ids[:, :p], positions=pos.prefill(2, p), cache=None, use_cache=True)
    for s in range(n):
        step, cache = r.forward(f"decode step {s}", input_ids=ids[:, p + s:p + s + 1], cache=cache, use_cache=True,
                                positions=pos.decode(2, 1, p + s), cache_length=p + s)
        r.same(f"decode step {s} == prefill at position {p + s}", step[:, 0], full[:, p + s],
               [f"row {b} position {p + s}" for b in range(2)])


@_scenario("MODEL-CHUNKED-PREFILL", "chunked-prefill", kinds=CAUSAL, needs=("cache",), implies=("POS-DECODE",))
def _chunked(r: Run) -> None:
    chunk, n = 7, 3
    ids = r.tokens(2, chunk * n)
    full, _ = r.forward("prefill of all tokens", input_ids=ids, positions=pos.prefill(2, chunk * n))
    cache = None
    for c in range(n):
        sl = slice(c * chunk, (c + 1) * chunk)
        out, cache = r.forward(f"chunk {c}", input_ids=ids[:, sl], cache=cache, use_cache=True,
                               positions=pos.decode(2, chunk, c * chunk), cache_length=c * chunk)
        r.same(f"chunk {c} == prefill at positions {c * chunk}..{(c + 1) * chunk - 1}",
               out.reshape(-1, out.shape[-1]), full[:, sl].reshape(-1, full.shape[-1]),
               [f"row {b} position {t}" for b in range(2) for t in range(c * chunk, (c + 1) * chunk)])


def _mixed_rows(r: Run) -> list[np.ndarray]:
    return [r.tokens(1, n)[0] for n in LENGTHS]


def _alone(r: Run, row: np.ndarray, b: int, extra: Optional[np.ndarray] = None, what: str = "row") -> np.ndarray:
    ids = row[None] if extra is None else np.concatenate([row, extra])[None]
    logits, _ = r.forward(f"{what} {b} alone", input_ids=ids, positions=pos.prefill(1, ids.shape[1]))
    return logits[0]


def _real(mask: np.ndarray, b: int) -> list[int]:
    return [int(t) for t in np.flatnonzero(mask[b])]


@_scenario("MODEL-LEFT-PAD", "left-pad", kinds=("decoder",), needs=("attention_mask", "position_ids", "cache"),
           implies=("POS-LEFT-PAD", "POS-DECODE"))
def _left_pad(r: Run) -> None:
    rows = _mixed_rows(r)
    ids, mask = r.padded(rows, "left")
    b_, s_ = ids.shape
    positions, valid = pos.left_pad(mask)
    logits, cache = r.forward("left-padded prefill", input_ids=ids, attention_mask=mask, position_ids=positions,
                              use_cache=True, positions=positions, valid=valid)
    nxt = r.tokens(b_, DECODE_STEPS)
    steps = []
    for s in range(DECODE_STEPS):
        full_mask = np.concatenate([mask, np.ones((b_, s + 1), np.int64)], axis=1)
        p, v = pos.left_pad(full_mask, s_ + s)
        step, cache = r.forward(f"decode step {s}", input_ids=nxt[:, s:s + 1], attention_mask=full_mask,
                                position_ids=p, cache=cache, use_cache=True, positions=p, valid=v, cache_length=s_ + s)
        steps.append(step[:, 0])
    for b, row in enumerate(rows):
        alone = _alone(r, row, b, nxt[b])
        real = _real(mask, b)
        n = len(row)
        r.same(f"row {b} of the left-padded prefill == row {b} alone", logits[b, real], alone[:n],
               [f"row {b} position {t}" for t in range(n)])
        r.same(f"row {b}'s decode steps == row {b} alone", np.stack([s[b] for s in steps]), alone[n:],
               [f"row {b} decode step {s} (position {n + s})" for s in range(DECODE_STEPS)])


@_scenario("MODEL-LEFT-PAD-MASK-ONLY", "left-pad-mask-only", kinds=("decoder",), needs=("attention_mask",),
           implies=("POS-LEFT-PAD",))
def _left_pad_mask_only(r: Run) -> None:
    rows = _mixed_rows(r)
    ids, mask = r.padded(rows, "left")
    positions, valid = pos.left_pad(mask)
    logits, _ = r.forward("left-padded forward, attention_mask only", input_ids=ids, attention_mask=mask,
                          positions=positions, valid=valid)
    for b, row in enumerate(rows):
        alone = _alone(r, row, b)
        r.same(f"row {b} of the left-padded batch == row {b} alone", logits[b, _real(mask, b)], alone,
               [f"row {b} position {t}" for t in range(len(row))])


@_scenario("MODEL-RIGHT-PAD", "right-pad", kinds=MODEL_KINDS, implies=("POS-PREFILL",))
def _right_pad(r: Run) -> None:
    rows = _mixed_rows(r)
    ids, mask = r.padded(rows, "right")
    positions = np.where(mask == 1, pos.prefill(*ids.shape), 0)
    given = {"attention_mask": mask} if "attention_mask" in r.info["capabilities"] else {}
    if not given and r.info["kind"] == "encoder":  # a causal model's real tokens never see the pads after them
        raise Unsupported(f"MODEL-RIGHT-PAD needs attention_mask ({CAPABILITIES['attention_mask']}) for an encoder, "
                          f"whose tokens attend to the pads; model {r.info['name']} does not declare it")
    logits, _ = r.forward("right-padded forward" + ("" if given else ", no attention_mask (causal: the pads come after "
                                                    "every real token)"), input_ids=ids, positions=positions,
                          valid=mask == 1, **given)
    for b, row in enumerate(rows):
        alone = _alone(r, row, b)
        r.same(f"row {b} of the right-padded batch == row {b} alone", logits[b, :len(row)], alone,
               [f"row {b} position {t}" for t in range(len(row))])


@_scenario("MODEL-PACKED", "packed", kinds=("decoder",), needs=("position_ids|cu_seqlens",), implies=("POS-PACKED",))
def _packed(r: Run) -> None:
    docs = [r.tokens(1, n)[0] for n in DOCS]
    cu = np.concatenate([[0], np.cumsum(DOCS)]).astype(np.int64)
    ids = np.concatenate(docs)[None]
    positions = pos.packed(cu)
    varlen = {"cu_seqlens": cu.astype(np.int32)} if "cu_seqlens" in r.info["capabilities"] else {}
    if "position_ids" in r.info["capabilities"]:
        varlen["position_ids"] = positions
    logits, _ = r.forward("packed documents", input_ids=ids, positions=positions, documents=cu.tolist(), **varlen)
    for d, doc in enumerate(docs):
        alone = _alone(r, doc, d, what="document")
        r.same(f"document {d} in the pack == document {d} alone", logits[0, cu[d]:cu[d + 1]], alone,
               [f"document {d} position {t}" for t in range(len(doc))])


@_scenario("MODEL-INPUTS-EMBEDS", "inputs-embeds", kinds=MODEL_KINDS, needs=("inputs_embeds",), implies=("POS-PREFILL",))
def _inputs_embeds(r: Run) -> None:
    ids = r.tokens(2, PROMPT)
    a, _ = r.forward("input_ids", input_ids=ids, positions=pos.prefill(*ids.shape))
    b, _ = r.forward("inputs_embeds", inputs_embeds=r.embed(ids), positions=pos.prefill(*ids.shape))
    r.same("inputs_embeds == input_ids", b.reshape(-1, b.shape[-1]), a.reshape(-1, a.shape[-1]),
           [f"row {x} position {t}" for x in range(2) for t in range(PROMPT)])


@_scenario("MODEL-INPUTS-EMBEDS-DECODE", "inputs-embeds-decode", kinds=CAUSAL, needs=("inputs_embeds", "cache"),
           implies=("POS-DECODE",))
def _inputs_embeds_decode(r: Run) -> None:
    p, n = PROMPT, DECODE_STEPS
    ids = r.tokens(2, p + n)
    emb = r.embed(ids)
    ref, _ = r.forward("prefill of all tokens (input_ids)", input_ids=ids, positions=pos.prefill(2, p + n))
    _, cache = r.forward("prefill (inputs_embeds)", inputs_embeds=emb[:, :p], use_cache=True,
                         positions=pos.prefill(2, p))
    for s in range(n):
        step, cache = r.forward(f"decode step {s} (inputs_embeds)", inputs_embeds=emb[:, p + s:p + s + 1], cache=cache,
                                use_cache=True, positions=pos.decode(2, 1, p + s), cache_length=p + s)
        r.same(f"decode step {s} (inputs_embeds) == input_ids at position {p + s}", step[:, 0], ref[:, p + s],
               [f"row {b} position {p + s}" for b in range(2)])


@_scenario("MODEL-GENERATE", "generate", kinds=CAUSAL, needs=("generate", "attention_mask"),
           implies=("POS-LEFT-PAD", "POS-DECODE"))
def _generate(r: Run) -> None:
    # an encoder-decoder's decoder prompts are not left-padded: rows of one length there
    rows = _mixed_rows(r) if r.info["kind"] == "decoder" else [r.tokens(1, LENGTHS[-1])[0] for _ in LENGTHS]
    ids, mask = r.padded(rows, "left")
    _generated(r, rows, ids, mask, "")


@_scenario("MODEL-GENERATE-EQUAL", "generate-equal", kinds=CAUSAL, needs=("generate",), implies=("POS-DECODE",))
def _generate_equal(r: Run) -> None:
    ids = r.tokens(len(LENGTHS), LENGTHS[0])
    if "attention_mask" in r.info["capabilities"]:  # all ones: a model that takes a mask may require one
        _generated(r, list(ids), ids, np.ones_like(ids), ", rows of one length")
    else:
        _generated(r, list(ids), ids, None, ", no attention_mask")


def _generated(r: Run, rows: list, ids: np.ndarray, mask: Optional[np.ndarray], how: str) -> None:
    """Greedy generation of a batch with a cache == without == each row generated alone; a decoder's every
    step == a forward pass of its prompt and the tokens generated before it."""
    n = DECODE_STEPS
    with_cache = r.generate(f"generate with a cache{how}", ids, mask, n, use_cache=True)
    without = r.generate(f"generate without a cache{how}", ids, mask, n, use_cache=False)
    r.same_steps("generate with a cache == without (step logits)", with_cache, without, list(range(len(rows))))
    for b, row in enumerate(rows):
        alone = r.generate(f"row {b} generated alone{how}", row[None], None if mask is None else
                           np.ones((1, len(row)), np.int64), n, use_cache=True)
        r.same_steps(f"row {b} in the batch == row {b} generated alone (step logits)", with_cache, alone, [b])
        if r.info["kind"] == "decoder":  # step s is a forward pass of the prompt and the s tokens generated before it
            m = len(row)
            again = _alone(r, row, b, alone[0][0, m:m + n - 1])
            r.same(f"row {b} generated alone: every step == a forward pass of its prompt and the tokens generated "
                   "before it", alone[1][0], again[m - 1:], [f"row {b} step {s} (position {m - 1 + s})" for s in range(n)])


@_scenario("MODEL-STATIC-CACHE", "static-cache", kinds=CAUSAL, needs=("cache", "static_cache"),
           implies=("POS-DECODE",))
def _static_cache(r: Run) -> None:
    p, n = PROMPT, DECODE_STEPS
    ids = r.tokens(2, p + n)
    dyn, stat = [], []
    for kind, out in (("dynamic", dyn), ("static", stat)):
        cache = r.new_cache(kind, batch=2, max_length=p + n + 16)
        logits, cache = r.forward(f"prefill ({kind} cache)", input_ids=ids[:, :p], cache=cache, use_cache=True,
                                  positions=pos.prefill(2, p))
        out.append(logits[:, -1])
        for s in range(n):
            step, cache = r.forward(f"decode step {s} ({kind} cache)", input_ids=ids[:, p + s:p + s + 1], cache=cache,
                                    use_cache=True, positions=pos.decode(2, 1, p + s), cache_length=p + s)
            out.append(step[:, 0])
    r.same("static cache == dynamic cache", np.concatenate(stat), np.concatenate(dyn),
           [f"row {b} position {p - 1 + s}" for s in range(n + 1) for b in range(2)])


#: MODEL-POSITION-SHIFT's draws (``[low, high)``, from the run's seed): the shift, within what the calibrated
#: logits bound covers and past position 48; the gap; the far starts, one in each octave from 64 to 8192 (or
#: up to the last positions of a model declaring fewer: ``max_positions``).  The default seed draws the same
#: values every run (``--posenc-seed`` others): a model can still be written to pass them; the octaves leave
#: no range of positions unvisited where a rounding or a table's end would show.
SHIFT, GAP = (29, 45), (13, 41)
OCTAVES = tuple((1 << k, 1 << (k + 1)) for k in range(6, 13))

#: The parameter models of an absolute position term: a table added to the embeddings (learned or sinusoid)
_TABLES = (GPT2EmbeddingParams, BertEmbeddingParams, OPTEmbeddingParams, BartEmbeddingParams, RobertaEmbeddingParams,
           SinusoidalParams, LookupParams)


def _rope_sets(info: dict) -> list:
    return [v for v in info["encodings"].values() if isinstance(v, (RopeParams, MRopeParams))]


def _shifted(info: dict) -> Optional[str]:
    if _rope_sets(info) or any(isinstance(v, _TABLES) for v in info["encodings"].values()):
        return None
    return "MODEL-POSITION-SHIFT applies to models with RoPE, M-RoPE or a position table (positions the model is handed)"


def _shift_rule(info: dict, top: int) -> Optional[str]:
    """What every position + s does to the logits of a pass whose largest position + 1 is ``top``: ``equal``
    where every positional term is relative there (RoPE sets whose frequencies do not change below ``top``:
    dynamic NTK below its context, LongRoPE's per-call switch below its original context; NoPE layers, a
    softmax scale), ``changed`` where an absolute table adds the positions, None where neither holds (the
    frequencies depend on the pass's length)."""
    rule = "equal"
    for v in info["encodings"].values():
        rope = v.rope if isinstance(v, MRopeParams) else v
        if isinstance(v, _TABLES):
            return "changed"
        if isinstance(rope, RopeParams):
            if (rope.rope_type == "dynamic" and top > rope.max_position_embeddings) or (
                    rope.rope_type == "longrope" and rope.longrope_policy != "at_init"
                    and top > rope.original_max_position_embeddings):
                rule = None
        elif not isinstance(v, (NopeParams, SoftmaxScaleParams, tuple)):  # (tuple: layer_types)
            rule = None
    return rule


@_scenario("MODEL-POSITION-SHIFT", "position-shift", kinds=MODEL_KINDS, needs=("position_ids",), applies=_shifted,
           implies=("POS-PREFILL",), unchecked="whether the attention uses its positional encoding, and positions in "
           "the thousands handed in, are not checked")
def _position_shift(r: Run) -> None:
    t, b = PROMPT, 2
    ids, base = r.tokens(b, t), pos.prefill(b, t)
    shift, gap_ = (int(r.rng.integers(*x)) for x in (SHIFT, GAP))
    ref, _ = r.forward("positions 0 ..", input_ids=ids, position_ids=base, positions=base)
    rule, rows = _shift_rule(r.info, t + shift), [f"row {x} token {j}" for x in range(b) for j in range(t)]
    if rule is not None:
        shifted, _ = r.forward(f"positions {shift} ..", input_ids=ids, position_ids=base + shift, positions=base + shift)
        (r.same if rule == "equal" else r.changed)(
            f"every position + {shift} {'==' if rule == 'equal' else '!='} positions 0 .." +
            ("" if rule == "equal" else " (an absolute position term)"), shifted.reshape(-1, shifted.shape[-1]),
            ref.reshape(-1, ref.shape[-1]), rows)
    else:
        r.unchecked(f"every position + {shift} (the model's frequencies depend on the pass's length past its context)")
    k = t // 2  # a gap through the cache: in one pass a jump in position_ids may mean a new packed document
    if "cache" in r.info["capabilities"]:
        chunks = []
        for gap in (0, gap_):
            _, cache = r.forward(f"prefill of tokens 0 .. {k - 1}", input_ids=ids[:, :k], position_ids=base[:, :k],
                                 use_cache=True, positions=base[:, :k])
            p = base[:, k:] + gap
            out, _ = r.forward(f"tokens {k} .. through the cache at positions {int(p[0, 0])} ..", input_ids=ids[:, k:],
                               position_ids=p, cache=cache, use_cache=True, positions=p, cache_length=k)
            chunks.append(out.reshape(-1, out.shape[-1]))
        r.changed(f"tokens after a gap of {gap_} positions != without it", chunks[1], chunks[0],
                  [f"row {x} token {j}" for x in range(b) for j in range(k, t)])
    else:
        r.unchecked("whether the attention uses the rotation (the logits after a gap in the positions, through a "
                    "cache: the model has none)")
    top = r.info.get("max_positions")
    drawn = [(lo, int(r.rng.integers(lo, hi))) for lo, hi in OCTAVES]  # every octave drawn: the same draws
    starts = sorted({s if top is None else min(s, int(top) - t) for lo, s in drawn if top is None or lo < int(top)})
    for s in starts:
        far = base + s
        r.forward(f"positions {s} ..", input_ids=ids, position_ids=far, positions=far)
    if top is not None and int(top) < OCTAVES[-1][1]:
        r.unchecked(f"positions from {int(top)} on (the model takes {int(top)}: max_positions)")
    if "rope" not in r.info["probes"] and _rope_sets(r.info):
        r.unchecked(f"positions {', '.join(map(str, starts))} .. (the model reports no rope probe; their logits are not "
                    "compared: a float32 rotation's rounding there exceeds the logits bound)")
    elif "attention" not in r.info["probes"] and _rope_sets(r.info):
        r.unchecked("whether every layer's attention reads its rotation (no attention probe: the logits show that "
                    "the model uses it, not that each layer does)")


def _is_longrope(info: dict) -> Optional[str]:
    p = info["encodings"].get("rope")
    if p is None or getattr(p, "rope_type", None) != "longrope":
        return "MODEL-LONGROPE-SWITCH applies to models with LongRoPE (rope_type longrope)"
    return None


@_scenario("MODEL-LONGROPE-SWITCH", "longrope-switch", kinds=("decoder",), needs=("generate",), applies=_is_longrope,
           implies=("POS-DECODE",))
def _longrope_switch(r: Run) -> None:
    p = r.info["encodings"]["rope"]
    orig = int(p.original_max_position_embeddings)
    prompt, n = orig - 4, 10  # crosses seq_len > original_max_position_embeddings at step 4
    ids = r.tokens(2, prompt)
    mask = np.ones_like(ids)
    with_cache = r.generate("generate with a cache", ids, mask, n, use_cache=True)
    without = r.generate("generate without a cache", ids, mask, n, use_cache=False)
    r.same_steps(f"generate with a cache == without, across the switch at sequence length {orig + 1}", with_cache,
                 without, [0, 1], steps_of=f"step (prompt {prompt}) ")


@families.model_mutant("model_restart_after_cache")
def _m_restart(f: Facts) -> Optional[bool]:
    return f.positions_are(lambda c: c["positions"] - cached_real(c)[:, None] if c["cache_length"] else None)


@families.model_mutant("model_decode_no_position")
def _m_no_position(f: Facts) -> Optional[bool]:
    return f.positions_are(lambda c: np.full_like(c["positions"], -1) if c["positions"].shape[-1] == 1
                           and c["cache_length"] else None)


@families.model_mutant("pos_cache_off_by_one")
def _m_off_by_one(f: Facts) -> Optional[bool]:
    return f.positions_are(lambda c: c["positions"] + 1 if c["cache_length"] else None)


@families.model_mutant("pos_left_pad_ignored")
def _m_left_pad_ignored(f: Facts) -> Optional[bool]:
    def rule(c):
        if c["attention_mask"] is None or (np.asarray(c["attention_mask"]) == 1).all():
            return None
        return pos.decode(*c["positions"].shape, c["cache_length"])
    return f.positions_are(rule)


@families.model_mutant("model_decode_padded_width")
def _m_padded_width(f: Facts) -> Optional[bool]:
    def rule(c):  # every pass after the prompt's: a decode step, or a generate step without a cache
        if not (c["cache_length"] or c.get("step")) or c["attention_mask"] is None \
                or (np.asarray(c["attention_mask"]) == 1).all():
            return None
        return pos.decode(*c["positions"].shape, c["cache_length"])
    return f.positions_are(rule)


def _packed_mrope(f: Facts):
    """The packed passes with M-RoPE positions whose used positions are known: ``(call, used [3, B, T],
    document boundaries)`` each."""
    for c, u3 in zip(f.calls, f.extra.get("used3") or []):
        if c["documents"] and c.get("mrope") is not None and u3 is not None:
            yield c, np.where(u3 == -1, 0, u3), c["documents"]  # -1: unrotated, position 0


@families.model_mutant("pos_packed_no_restart")
def _m_packed(f: Facts) -> Optional[bool]:
    """The documents count on: on the whole row (1-D), or, with M-RoPE, each document's positions
    are the rule's shifted past the previous document's largest position (the rope index computed
    over the packed row as one sequence)."""
    seen = False
    for c, u3, cu in _packed_mrope(f):
        want = np.array(c["mrope"])
        for d in range(1, len(cu) - 1):
            want[..., cu[d]:cu[d + 1]] += want[..., :cu[d]].max() + 1
        if not (u3 == want).all():
            return False
        seen = True
    if seen:
        return True
    return f.positions_are(lambda c: pos.prefill(*c["positions"].shape) if c["documents"] else None)


@families.model_mutant("model_mrope_packed_filler")
def _m_packed_filler(f: Facts) -> Optional[bool]:
    """In a packed pass with M-RoPE positions, the first document's are the rule's and every later
    document's tokens sit at one filler position on all three axes."""
    seen = False
    for c, u3, cu in _packed_mrope(f):
        first, rest = u3[..., :cu[1]], u3[..., cu[1]:]
        if rest.size == 0 or not (first == c["mrope"][..., :cu[1]]).all() or not (rest == rest.flat[0]).all():
            return False
        seen = True
    return seen or None


@families.model_mutant("model_static_cache_allocated_length")
def _m_static(f: Facts) -> Optional[bool]:
    return f.positions_are(lambda c: pos.decode(*c["positions"].shape, c["static"]) if c["static"] and c["cache_length"]
                           else None)


@families.model_mutant("model_packed_cross_document")
def _m_cross(f: Facts) -> Optional[bool]:
    if not any(c["documents"] for c in f.calls):
        return None
    right = f.positions_are(lambda c: None) is not False  # the positions restart as they should
    if f.cross_document is None:  # no attention probe: documents that differ at the right positions
        return bool(f.extra.get("logits_differ")) and right
    return f.cross_document > 0 and right


@families.model_mutant("model_pads_attended")
def _m_pads(f: Facts) -> Optional[bool]:
    if f.on_pads is None:
        return None
    return f.on_pads > 0


@families.model_mutant("model_padded_rows_nan")
def _m_nan(f: Facts) -> Optional[bool]:
    """Non-finite logits in the passes with padding only: every pass without a pad is finite."""
    def padded(c):
        return c["attention_mask"] is not None and (np.asarray(c["attention_mask"]) == 0).any()
    if not any(padded(c) for c in f.calls):
        return None
    return any(padded(c) and not c.get("finite", True) for c in f.calls) and \
        all(c.get("finite", True) for c in f.calls if not padded(c))


@families.model_mutant("model_mrope_stale_deltas")
def _m_stale_deltas(f: Facts) -> Optional[bool]:
    """Every pass whose positions differ from the rule's is a text-only pass after an image prompt,
    shifted by that prompt's rope delta (largest position + 1 - its length)."""
    if not any(c.get("image") for c in f.calls):
        return None
    delta, hit = None, False
    for c, used in zip(f.calls, f.used):
        if c.get("image") and c.get("mrope") is not None:
            delta = int(c["mrope"].max()) + 1 - c["mrope"].shape[-1] - c["cache_length"]
            continue
        if used is None:
            continue
        v = np.broadcast_to(c["valid"], used.shape)
        if ((used == c["positions"]) | ~v).all():
            continue
        if delta is None or not ((used == c["positions"] + delta) | ~v).all():
            return False
        hit = True
    return hit or None


@families.model_mutant("model_mrope_text_positions")
def _m_text_positions(f: Facts) -> Optional[bool]:
    """The passes that fed an image and used other positions than the rule's used 1-D positions (the
    running index on every axis; in a pack, each document's)."""
    seen = False
    for c, u3 in zip(f.calls, f.extra.get("used3") or []):
        if not c.get("image") or u3 is None or c.get("mrope") is None or np.array_equal(u3, c["mrope"]):
            continue
        want = pos.packed(c["documents"]) if c["documents"] else pos.decode(*c["positions"].shape, c["cache_length"])
        v = np.broadcast_to(c["valid"], want.shape)
        if not all(((u3[a] == want) | ((u3[a] == -1) & (want == 0)) | ~v).all() for a in range(3)):  # -1: unrotated
            return False
        seen = True
    return seen or None


@families.model_mutant("model_longrope_stale_cache")
def _m_longrope(f: Facts) -> Optional[bool]:
    return f.extra.get("stale_cache") == "longrope" or None


@families.model_mutant("model_dynamic_stale_cache")
def _m_dynamic_stale(f: Facts) -> Optional[bool]:
    """The cached keys a decode pass reads keep the rotation of an earlier, shorter pass's dynamic-NTK
    frequencies."""
    return f.extra.get("stale_cache") == "dynamic" or None


@families.model_mutant("model_dynamic_pass_length")
def _m_dynamic_length(f: Facts) -> Optional[bool]:
    """Every pass rotates as dynamic NTK's rule gives for its own length, yet logits the clause says
    are equal differ, and the passes ran at different theta': a token's frequencies are set by the
    pass it ran in (its batch's, chunk's or an earlier pass's length)."""
    thetas = set(f.extra.get("dynamic_thetas") or ())
    if not any(thetas):
        return None
    return bool(f.extra.get("passes_right") and f.extra.get("logits_differ") and len(thetas) > 1) or None


# the M-RoPE scenarios, then those of positions per row, far and past the maximum (their own modules;
# registered after the others, in this order)
from posenc.families.model_mrope import mrope_positions  # noqa: E402,F401 (re-exported)
from posenc.families import model_far  # noqa: E402,F401
