"""Checks of the model family (MODEL-*): the verdict on one scenario's run (:func:`judge`).

(a) **Oracle.**  Every probe of every forward pass is compared with the family's reference at the
positions the scenario's rule gives: a ``rope`` probe (q and k in and out of the rotation) with
``rope.apply`` -- ``nope.apply`` on a NoPE layer -- under the spec's tolerance rule
(:func:`posenc.spec.tolerance.compare`, the padded slots not compared); a ``table`` probe's rows
with the encoding's row rule (GPT-2 and BERT: the position; OPT and BART: + 2; RoPE... ) exactly.
Where they differ, the positions the encoding *used* are recovered from the probe (the rotation
angle of each pair against ``p * inv_freq``, or the row minus the table's offset) and compared with
the model-level mutants (:func:`posenc.families.model_mutant`) over every forward pass of the run;
the operation-level diagnosis (:func:`posenc.conformance.runner.diagnose`) names encoding bugs
(a pairing swapped, theta replaced).  ``attention`` probes give the attention mass that crosses
packed documents (MODEL-PACKED requires exactly 0) and that reaches padded keys (0 for every
real query).

(b) **Oracle-free.**  Every pair of logits the scenario says are equal is compared under the
model tolerance rule (:func:`posenc.spec.tolerance.logits_bound`).

A failure names the scenario clause, the forward pass, the layer, the row, the first wrong
position, the encoding clause it breaks, and what the model did instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from posenc import families
from posenc.conformance.cases import Case
from posenc.conformance.golden import computed
from posenc.conformance.runner import Match, compare_outputs, diagnose
from posenc.reference import mrope as mrope_ref
from posenc.reference import rope as rope_ref
from posenc.reference import rope_scaling
from posenc.spec import load_spec
from posenc.spec.models import NopeParams, RopeParams
from posenc.spec.tolerance import logits_bound

from .model import Facts

_SPEC = load_spec()
#: Row offsets of absolute tables: the row of position p is p + offset (RoBERTa and fairseq: padding_idx + 1).
_TABLE_OFFSETS = {"GPT2EmbeddingParams": 0, "BertEmbeddingParams": 0, "OPTEmbeddingParams": 2,
                  "BartEmbeddingParams": 2}


@dataclass
class Problem:
    """One thing wrong in a run: ``kind`` (``oracle``, ``logits``, ``attention``, ``probe``), the
    clauses it breaks, a one-line ``text`` and detail lines."""

    kind: str
    clauses: tuple[str, ...]
    text: str
    detail: list[str] = field(default_factory=list)
    matches: tuple = ()


@dataclass
class Verdict:
    problems: list[Problem]
    facts: Facts
    matches: list[Match]
    inferred: list[str]
    unsupported: list[str]  # checks that could not run, with the reason
    checked: int  # probes and pairs compared


# ---- parameters per layer --------------------------------------------------------------------


def _nope(enc: dict) -> Optional[NopeParams]:
    return enc.get("nope")


def _rope_params(enc: dict, layer: Optional[int] = None) -> Optional[RopeParams]:
    """The RoPE set a layer rotates with: ``rope``, or ``rope.<layer type>`` of the layer's type
    (``layer_types``; LAYERS-SETS); with no layer given, any set the model has."""
    p = enc.get("rope")
    if isinstance(p, RopeParams):
        return p
    sets = {k[5:]: v for k, v in enc.items() if k.startswith("rope.") and isinstance(v, RopeParams)}
    types = enc.get("layer_types")
    if layer is not None and types is not None and layer < len(types):
        return sets.get(types[layer])
    return next(iter(sets.values()), None) if layer is None else None


def _layer_rotates(enc: dict, layer: Optional[int]) -> bool:
    n = _nope(enc)
    if n is None or layer is None:
        return True
    from posenc.reference.nope import layer_flags
    flags = layer_flags(n)
    return bool(flags[layer]) if layer < len(flags) else True


# ---- recovering the positions an encoding used ---------------------------------------------------


def recovered_rope_positions(p: RopeParams, rec: dict, expected: np.ndarray, pairs=None, w=None) -> np.ndarray:
    """The integer position each token's rotation corresponds to, ``[B, T]``: the rotation angle
    of every (q and k) pair against ``position * inv_freq``, the best integer in
    ``[0, 2 max(expected) + 64]`` (weighted over heads and pairs); -1 where q and k came back
    unchanged (nothing encoded), -2 where no integer position explains the angles.  ``pairs``: only
    these pairs (an M-RoPE axis's), with their frequencies ``w``."""
    rd, pairing = p.pair_dim, p.pairing  # proportional RoPE: pairs span head_dim, the rest at frequency 0
    a, b = rope_ref.pair_indices(rd, pairing)
    oa, ob = rope_ref.output_indices(rd, pairing)
    if w is None:
        w, _ = rope_ref.inv_freq(p, rope_ref.seq_len_of(expected))
    if pairs is not None:
        a, b, oa, ob, w = a[pairs], b[pairs], oa[pairs], ob[pairs], np.asarray(w)[pairs]
    sign = -1.0 if p.rotation == "negative" else 1.0
    angles, weights = [], []
    for xi, yo in (("q_in", "q_out"), ("k_in", "k_out")):
        x, y = np.asarray(rec[xi], np.float64), np.asarray(rec[yo], np.float64)
        x1, x2, y1, y2 = x[..., a], x[..., b], y[..., oa], y[..., ob]
        angles.append(np.arctan2(x1 * y2 - x2 * y1, x1 * y1 + x2 * y2))  # [B, H, T, P]
        weights.append(np.hypot(x1, x2) * np.hypot(y1, y2))
    ang = np.concatenate(angles, axis=1)
    wt = np.concatenate(weights, axis=1)
    hi = int(max(0, np.max(expected))) * 2 + 64
    cand = np.arange(0, hi + 1, dtype=np.float64)
    # cost[b, t, c] = sum_{h, i} w (1 - cos(angle - sign c w_i))
    phase = sign * cand[:, None] * np.asarray(w)[None, :]  # [C, P]
    cos_a, sin_a = np.cos(ang), np.sin(ang)  # [B, H, T, P]
    cost = (np.einsum("bhtp,cp->btc", wt * cos_a, np.cos(phase)) + np.einsum("bhtp,cp->btc", wt * sin_a, np.sin(phase)))
    total = wt.sum(axis=(1, 3))[..., None]  # [B, T, 1]
    resid = 1.0 - cost / np.maximum(total, 1e-300)
    best = np.argmin(resid, axis=-1)
    out = best.astype(np.int64)
    fit = np.take_along_axis(resid, best[..., None], -1)[..., 0]
    out[~(fit <= 1e-3)] = -2  # no integer position explains the angles (or they are not finite)
    same = np.all(np.asarray(rec["q_in"]) == np.asarray(rec["q_out"]), axis=(1, 3)) & \
        np.all(np.asarray(rec["k_in"]) == np.asarray(rec["k_out"]), axis=(1, 3))
    out[same] = -1
    return out


def recovered_mrope_positions(p, rec: dict, expected3: np.ndarray) -> np.ndarray:
    """M-RoPE's recovered positions ``[3, B, T]``: each axis's from the pairs whose frequencies
    read that axis (``MRopeParams.axes``)."""
    axes = np.asarray(p.axes)
    w = mrope_ref.inv_freq(p, mrope_ref.seq_len_of(expected3))
    out = []
    for ax in range(3):
        pairs = np.flatnonzero(axes == ax)
        out.append(recovered_rope_positions(p.rope, rec, expected3[ax], pairs=pairs, w=w) if pairs.size
                   else np.full(expected3.shape[1:], -2, np.int64))
    return np.stack(out)


# ---- the oracle on one forward pass ----------------------------------------------------------------


def _non_finite(rec: dict, valid: np.ndarray) -> Optional[str]:
    """What is not finite in a rope probe at the pass's real tokens (nothing to check it against), or None."""
    for key in ("q_in", "k_in", "q_out", "k_out"):
        x = np.asarray(rec[key], np.float64)
        bad = ~np.isfinite(x) & np.asarray(valid, bool)[:, None, :, None]
        if bad.any():
            b, h, t, d = map(int, np.argwhere(bad)[0])
            return (f"{key} is not finite at real tokens ({int(bad.sum())} elements; first row {b} head {h} token {t}): "
                    "the rotation cannot be checked there")
    return None


def _compare_qk(case: Case, rec: dict, position_ids: np.ndarray, valid: np.ndarray, dtype: str):
    """A rope probe's q and k out against ``case``'s operation (``rope.apply``, ``mrope.apply``) of its
    q and k in at ``position_ids``, at the valid tokens: ``(golden, outputs, comparisons)``."""
    g = computed(case, {"q": np.asarray(rec["q_in"], np.float64), "k": np.asarray(rec["k_in"], np.float64),
                        "position_ids": position_ids})
    mask = np.asarray(valid, bool)[:, None, :, None]
    outputs = dict(g.outputs)
    for name in ("q", "k"):
        outputs[f"{name}.compared"] = np.broadcast_to(mask, g.outputs[name].shape)
    g = replace(g, outputs=outputs)
    got = {"q": np.asarray(rec["q_out"], np.float64), "k": np.asarray(rec["k_out"], np.float64)}
    return g, got, compare_outputs(g, got, dtype)


def _rope_case(p, call_label: str, layer) -> Case:
    return Case(id=f"model-{call_label}-layer{layer}".replace(" ", "-"), op="rope.apply",
                clauses=("ROPE-ANGLE",), params=p)


def _oracle_rope(call: dict, rec: dict, enc: dict, dtype: str):
    """(problem or None, positions used [B, T] or None) of one rope probe."""
    layer = rec.get("layer")
    p = _rope_params(enc, layer)
    if p is None:
        return None, None
    d = np.shape(rec["q_in"])[-1]
    if d == p.rdim and p.rdim < p.head_dim:  # the probe sees the rotated part only (GPT-J)
        p = p.model_copy(update={"head_dim": p.rdim, "rotary_dim": None})
    positions, valid = call["positions"], call["valid"]
    if not _layer_rotates(enc, layer):
        used = recovered_rope_positions(p, rec, positions)
        return Problem("oracle", ("NOPE-LAYER-FLAGS", "NOPE-IDENTITY"),
                       f"{call['label']}: layer {layer} is a NoPE layer (NopeParams) but rotated q and k"), used
    bad = _non_finite(rec, valid)
    if bad:
        return Problem("oracle", ("ROPE-ANGLE",), f"{call['label']}, layer {layer}: {bad}"), None
    g, got, comps = _compare_qk(_rope_case(p, call["label"], layer), rec, np.asarray(positions, np.int64), valid, dtype)
    if all(c.ok for c in comps):
        return None, positions
    used = recovered_rope_positions(p, rec, positions)
    wrong = valid & ~_same_positions(used, positions) & (used != -2)  # -2: no integer position explains it
    lines = [c.message for c in comps if not c.ok]
    if wrong.any():
        b, t = map(int, np.argwhere(wrong)[0])
        first = f"row {b} token {t}: the rotation is that of position {_pos_text(used[b, t])} where the rule gives {positions[b, t]}"
        clauses = ("ROPE-ANGLE",)
    else:
        first = "the positions are right, the rotation is not (frequencies, pairing or scaling)"
        clauses = tuple(x for x in ("ROPE-ANGLE", f"ROPE-PAIR-{p.pairing.upper()}") if x in _SPEC.clauses)
    matches = tuple(diagnose(_SPEC, g, got, dtype)) if not wrong.any() else ()
    return Problem("oracle", clauses, f"{call['label']}, layer {layer}: {first}", lines, matches), used


def _same_positions(used: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where the recovered positions are the wanted ones (-1, nothing encoded, is position 0 too:
    a rotation by 0 leaves q and k unchanged)."""
    return (used == want) | ((used == -1) & (want == 0))


def _pos_text(u: int) -> str:
    """A recovered RoPE position in words."""
    return {-1: "none (q and k unchanged)", -2: "none (not a rotation by an integer position)"}.get(int(u), str(int(u)))


def _mrope(enc: dict):
    p = enc.get("mrope")
    return p if type(p).__name__ == "MRopeParams" else None


def _oracle_mrope(call: dict, rec: dict, enc: dict, dtype: str):
    """An M-RoPE model's rope probe against ``mrope.apply`` at the scenario's ``[3, B, T]``
    positions (a text-only pass: its positions on every axis); ``(problem, positions [3, B, T])``."""
    p = _mrope(enc)
    p3 = call.get("mrope")
    if p3 is None:
        p3 = np.broadcast_to(call["positions"], (3, *call["positions"].shape)).copy()
    valid = np.asarray(call["valid"], bool)
    bad = _non_finite(rec, valid)
    if bad:
        return Problem("oracle", ("MROPE-SECTIONS",), f"{call['label']}, layer {rec.get('layer')}: {bad}"), None
    case = Case(id=f"model-{call['label']}-mrope".replace(" ", "-"), op="mrope.apply", clauses=("MROPE-SECTIONS",),
                params=p)
    g, got, comps = _compare_qk(case, rec, p3, valid, dtype)
    if all(c.ok for c in comps):
        return None, p3
    used = recovered_mrope_positions(p, rec, p3)
    wrong = valid[None] & ~_same_positions(used, p3) & (used != -2)
    if wrong.any():
        ax, b, t = map(int, np.argwhere(wrong)[0])
        first = (f"row {b} token {t}: positions (t, h, w) = {tuple(int(x) for x in used[:, b, t])} where the rule "
                 f"gives {tuple(int(x) for x in p3[:, b, t])}")
    else:
        first = "the positions are right, the rotation is not (sections, pairing or frequencies)"
    clause = "MROPE-INTERLEAVED" if p.layout == "interleaved" else "MROPE-SECTIONS"
    matches = tuple(diagnose(_SPEC, g, got, dtype)) if not wrong.any() else ()
    return Problem("oracle", (clause,), f"{call['label']}, layer {rec.get('layer')}: {first}",
                   [c.message for c in comps if not c.ok], matches), used


def _table_offset(enc: dict) -> Optional[tuple[int, str, object]]:
    """(row offset, clause, params) of the model's absolute position table, or None."""
    for name, p in enc.items():
        cls = type(p).__name__
        if cls == "LookupParams":  # a plain learned table indexed by the position (Whisper's decoder)
            return 0, "LEARNED-GPT2-POSITIONS", p
        if cls in _TABLE_OFFSETS:
            clause = {"GPT2EmbeddingParams": "LEARNED-GPT2-POSITIONS", "BertEmbeddingParams": "LEARNED-BERT-POSITIONS",
                      "OPTEmbeddingParams": "LEARNED-OPT-OFFSET", "BartEmbeddingParams": "LEARNED-BART-POSITIONS"}[cls]
            return _TABLE_OFFSETS[cls], clause, p
        if cls == "RobertaEmbeddingParams":
            return p.padding_idx + 1, "LEARNED-ROBERTA-POSITIONS", p
        if cls == "SinusoidalParams" and getattr(p, "variant", None) == "fairseq":
            return p.padding_idx + 1, "SIN-FAIRSEQ-POSITIONS", p
    return None


def _oracle_table(call: dict, rec: dict, enc: dict):
    t = _table_offset(enc)
    if t is None:
        return None, None
    off, clause, _ = t
    rows = np.asarray(rec["rows"], np.int64)
    positions, valid = call["positions"], np.asarray(call["valid"], bool)
    if rows.ndim == 2 and rows.shape[0] == 1 and rows.shape[1:] == positions.shape[1:]:
        rows = np.broadcast_to(rows, positions.shape)  # one row of positions for the whole batch
    if rows.shape != positions.shape:
        return Problem("probe", (clause,), f"{call['label']}: the table probe has rows of shape {list(rows.shape)}, "
                       f"the forward pass has {list(positions.shape)} tokens"), None
    used = np.where(rows >= 0, rows - off, -1)  # -1: the output is no row of the table
    wrong = valid & (rows != positions + off)
    if not wrong.any():
        return None, positions
    b, t_ = map(int, np.argwhere(wrong)[0])
    got = (f"table row {rows[b, t_]} (position {used[b, t_]})" if rows[b, t_] >= 0 else
           "no row of the table (the position added is none of its rows)")
    return Problem("oracle", (clause,), f"{call['label']}: row {b} token {t_} got {got} where the rule gives row "
                   f"{positions[b, t_] + off} (position {positions[b, t_]})"), used


def _alibi(enc: dict):
    p = enc.get("alibi")
    return p if type(p).__name__ == "AlibiParams" else None


def _t5(enc: dict):
    p = enc.get("decoder")
    return p if type(p).__name__ == "T5Params" else None


def _oracle_t5(call: dict, rec: dict, enc: dict, dtype: str):
    """T5's decoder bias probe against ``t5.bias`` with the model's own table: queries at the cache
    length the scenario's rule gives (the call's positions), keys 0 .. Tk - 1."""
    p = _t5(enc)
    got = np.asarray(rec["bias"], np.float64)[0]
    tq, tk = got.shape[-2:]
    start = int(call["positions"].min()) if call["positions"].size else 0
    inputs = {"table": np.asarray(rec["table"], np.float64), "query_length": tq, "key_length": tk, "cache_length": start}
    case = Case(id=f"model-{call['label']}-t5".replace(" ", "-"), op="t5.bias", clauses=("T5-BIAS",), params=p)
    g = computed(case, inputs)
    comps = compare_outputs(g, {"bias": got}, dtype)
    shape = call["positions"].shape
    if all(c.ok for c in comps):
        return None, np.broadcast_to(start + np.arange(tq), shape).astype(np.int64)
    used = None  # the query offset whose bias the probe is, if one is
    for o in range(0, start + tq + 8):
        cand = computed(case, {**inputs, "cache_length": o})
        if all(c.ok for c in compare_outputs(cand, {"bias": got}, dtype)):
            used = np.broadcast_to(o + np.arange(tq), shape).astype(np.int64)
            break
    return Problem("oracle", ("T5-BIAS", "T5-BUCKET-CAUSAL"), f"{call['label']}, layer {rec.get('layer')}: the relative "
                   f"bias is not T5's at queries {start}..{start + tq - 1} over keys 0..{tk - 1}"
                   + (f" (the model's queries start at {rec['past']})" if rec.get("past") not in (None, start) else ""),
                   [c.message for c in comps if not c.ok], tuple(diagnose(_SPEC, g, {"bias": got}, dtype))), used


def _oracle_bias(call: dict, rec: dict, enc: dict, dtype: str):
    """An ALiBi bias probe against ``alibi.bias`` of the model's form (BLOOM: from the attention mask
    the model read, all ones when none was passed; MPT: relative to the last key), compared where
    the clause specifies it (real queries and keys, no future key)."""
    p = _alibi(enc)
    if p is None:
        return None
    got = np.asarray(rec["bias"], np.float64)
    b, tq = call["positions"].shape
    tk = got.shape[-1]
    mask = call["attention_mask"]
    mask = np.ones((b, tk), np.int64) if mask is None else np.asarray(mask, np.int64)
    inputs = {"query_length": tq, "key_length": tk}
    if p.form == "bloom":  # from the mask; the other forms from the lengths alone
        inputs["attention_mask"] = mask
    case = Case(id=f"model-{call['label']}-bias".replace(" ", "-"), op="alibi.bias", clauses=("ALIBI-SLOPES",), params=p)
    g = computed(case, inputs)
    want = g.outputs["bias"]
    if got.ndim == want.ndim + 1 and got.shape[0] == 1:  # a batch-independent form ([H, Tq, Tk]) probed as [1, ...]
        got = got[0]
    elif got.ndim == want.ndim and got.shape[0] == 1 and want.shape[0] > 1:  # one row of the batch for all
        got = np.broadcast_to(got, want.shape)
    if got.shape != want.shape:
        return Problem("probe", ("ALIBI-SLOPES",), f"{call['label']}: the bias probe has shape {list(np.shape(rec['bias']))}, "
                       f"the {p.form} form's is {list(want.shape)}")
    comps = compare_outputs(g, {"bias": got}, dtype)
    if all(c.ok for c in comps):
        return None
    form = {"bloom": "ALIBI-BLOOM", "mpt": "ALIBI-MPT", "causal": "ALIBI-CAUSAL", "symmetric": "ALIBI-SYMMETRIC"}[p.form]
    return Problem("oracle", ("ALIBI-SLOPES", form), f"{call['label']}, layer {rec.get('layer')}: the ALiBi bias is not "
                   f"the {p.form} form's at these positions", [c.message for c in comps if not c.ok],
                   tuple(diagnose(_SPEC, g, {"bias": got}, dtype)))


def _softmax_scale(call: dict, rec: dict, p) -> object:
    """The attention's softmax scale against SCALE-YARN-SOFTMAX-SCALE (``softmax_scale(p)``:
    qk_head_dim^-0.5 x mscale(factor, mscale_all_dim)^2): True, or the problem."""
    from posenc.reference.attention import softmax_scale
    want, got = softmax_scale(p), float(rec["scaling"])
    if abs(got - want) <= 4 * np.finfo(np.float32).eps * abs(want):
        return True
    # which known bug it is: the attention.probs reference and mutants on the probe's own q and k
    from posenc.reference.attention import expand_kv, softmax
    q, k = np.asarray(rec["q"], np.float64)[:1, :, -1:], np.asarray(rec["k"], np.float64)[:1]
    g = computed(Case(id="model-softmax-scale", op="attention.probs", clauses=("SCALE-YARN-SOFTMAX-SCALE",), params=p),
                 {"q": q, "k": k})
    probs = softmax(np.einsum("bhqd,bhkd->bhqk", q, expand_kv(q, k)) * got)
    return Problem("oracle", ("SCALE-YARN-SOFTMAX-SCALE",), f"{call['label']}, layer {rec.get('layer')}: the attention "
                   f"scales q.k by {got:.9g} where SCALE-YARN-SOFTMAX-SCALE gives {want:.9g}", [],
                   tuple(diagnose(_SPEC, g, {"probs": probs}, "float32")))


def _consistent(call: dict, recs: list, clause: str, enc: dict) -> Optional[Problem]:
    """Where a layer reports both its rotation and its attention, the attention reads what the
    rotation produced: q is the rope probe's q_out, and the last T keys are its k_out (where the
    shapes say they are the same tensors: not MLA's concatenated q).  A probe that describes another
    tensor than the one the model used is caught here."""
    rope = {r.get("layer"): r for r in recs if r["kind"] == "rope"}
    for a in (r for r in recs if r["kind"] == "attention"):
        r = rope.get(a.get("layer"))
        if r is None:
            # this pass rotated other layers and its encoding says this one rotates too: which layer is this?
            if rope and a.get("layer") not in rope and _layer_rotates(enc, a.get("layer")):
                return Problem("probe", (clause,), f"{call['label']}: an attention probe of layer {a.get('layer')} has no "
                               f"rope probe beside it (the rope probes are of layers {sorted(rope, key=str)}): the "
                               "probes do not describe one model's layers")
            continue
        q, k = np.asarray(a["q"], np.float64), np.asarray(a["k"], np.float64)
        qo, ko = np.asarray(r["q_out"], np.float64), np.asarray(r["k_out"], np.float64)
        if q.shape != qo.shape or k.shape[:2] != ko.shape[:2] or k.shape[3:] != ko.shape[3:] or k.shape[2] < ko.shape[2]:
            continue
        t = ko.shape[2]  # this pass's keys: the last T, or in a static cache's buffer after the cached ones
        start = call["cache_length"] if call.get("static") else k.shape[2] - t
        k_new = k[:, :, start:start + t]
        if k_new.shape != ko.shape:
            continue
        for name, x, y in (("q", q, qo), ("k", k_new, ko)):
            both = np.isfinite(x) & np.isfinite(y)
            scale = max(float(np.abs(y[both]).max()) if both.any() else 0.0, 1e-30)
            if not np.array_equal(np.isfinite(x), np.isfinite(y)) or (np.abs(x - y)[both] > 1e-6 * scale).any():
                return Problem("probe", (clause,), f"{call['label']}, layer {a.get('layer')}: the attention reads "
                               f"another {name} than the rotation's output its rope probe reports (the probes do not "
                               "describe the tensors the model used)")
    return None


# ---- attention probes --------------------------------------------------------------------------------


def attention_probs(rec: dict) -> np.ndarray:
    """The attention probabilities ``[B, Hq, Tq, Tk]``: the probe's own (eager), or recomputed in
    float64 from its q, k, mask and scaling (a ``None`` mask: causal, bottom-right aligned; a bool
    or integer mask: True / 1 may attend; a float mask: added to the logits, as the attention adds
    it -- -inf, or any value far enough below the others (a dtype's minimum, -1e9, -1e4) that its
    exp is 0)."""
    if rec.get("probs") is not None:
        return np.asarray(rec["probs"], np.float64)
    q, k = np.asarray(rec["q"], np.float64), np.asarray(rec["k"], np.float64)
    if k.shape[1] != q.shape[1]:
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    logits = np.einsum("bhqd,bhkd->bhqk", q, k) * float(rec["scaling"])
    tq, tk = logits.shape[-2:]
    mask = rec.get("mask")
    if mask is None:  # the attention's own rule: causal, bottom-right aligned, or every key (an encoder)
        allowed = np.tril(np.ones((tq, tk), bool), k=tk - tq) if rec.get("causal", True) else np.ones((tq, tk), bool)
    else:
        m = np.asarray(mask)
        m = m[..., -tk:] if m.shape[-1] != tk else m
        if m.dtype == bool or np.issubdtype(m.dtype, np.integer):  # 1 / True: may attend
            allowed = m.astype(bool)
        else:  # additive
            m = m.astype(np.float64)
            allowed = m > -np.inf
            logits = logits + np.where(allowed, m, 0.0)
    logits = np.where(allowed, logits, -np.inf)
    mx = np.max(logits, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(logits - mx)
    s = e.sum(-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1), 0.0)


def _key_tokens(call: dict, tk: int) -> int:
    """How many keys precede this pass's tokens in the attention (its cache length)."""
    return tk - call["positions"].shape[-1]


def _cross_document(call: dict, rec: dict) -> tuple[float, str]:
    """The largest attention probability across documents, and where: ``token q (document d) on
    token k (document e), head h``."""
    cu = call["documents"]
    probs = attention_probs(rec)
    tk = probs.shape[-1]
    doc = np.searchsorted(np.asarray(cu[1:]), np.arange(tk), side="right")
    off = _key_tokens(call, tk)
    qdoc = doc[off:]
    across = np.where((qdoc[:, None] != doc[None, :])[None, None], probs, 0.0)
    b, h, q, k = map(int, np.unravel_index(int(np.argmax(across)), across.shape))
    return float(across[b, h, q, k]), (f"token {q + off} (document {int(doc[q + off])}) on token {k} (document "
                                       f"{int(doc[k])}), row {b} head {h}")


def _on_pads(call: dict, rec: dict) -> float:
    m = call["attention_mask"]
    probs = attention_probs(rec)
    tk = probs.shape[-1]
    if m is None or np.asarray(m).shape[-1] != tk:
        return 0.0
    pad_key = np.asarray(m)[:, None, None, :] == 0
    real_query = np.asarray(call["valid"], bool)[:, None, :, None]
    return float(np.max(np.where(pad_key & real_query, probs, 0.0)))


# ---- logits pairs ------------------------------------------------------------------------------------------


def _pair_problem(clause: str, pair: dict, dtype: str) -> Optional[Problem]:
    a, b = pair["a"], pair["b"]
    if a.shape != b.shape:
        return Problem("logits", (clause,), f"{pair['label']}: logits of shapes {list(a.shape)} and {list(b.shape)}")
    scale = np.maximum(np.abs(a).max(axis=-1), np.abs(b).max(axis=-1))
    bound = logits_bound(dtype, scale)
    err = np.abs(a - b).max(axis=-1)
    finite = np.isfinite(a).all(axis=-1) & np.isfinite(b).all(axis=-1)
    bad = (err > bound) | ~finite
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    if not finite[i]:
        return Problem("logits", (clause,), f"{pair['label']}: {pair['where'][i]}: the logits are not finite (NaN or "
                       f"inf in {int((~finite).sum())} of {len(bad)} rows)")
    ratio = err / np.where(bound > 0, bound, np.inf)
    return Problem("logits", (clause,), f"{pair['label']}: {pair['where'][i]}: max |logit difference| {err[i]:.3g} > bound "
                   f"{bound[i]:.3g} ({int(bad.sum())} of {len(bad)} rows; worst {np.nanmax(ratio):.3g} x the bound)")


# ---- the verdict ------------------------------------------------------------------------------------------


_PROBE_KEYS = {"rope": (("q_in", 4), ("k_in", 4), ("q_out", 4), ("k_out", 4)), "table": (("rows", 2),),
               "bias": (("bias", 4),), "attention": (("q", 4), ("k", 4))}


def validate(trace: dict, enc: Optional[dict] = None) -> None:
    """The probes a model reported fit the contract (posenc.adapters.model): a known kind, an integer
    (or no) layer, its arrays present with their ranks and numeric, q and k in and out of one shape
    and of a width its encoding rotates, one token per position of the pass; an attention probe's k
    as wide as its q, its mask and probabilities of the pass's [Tq, Tk].  Raises
    :class:`AdapterError` naming the forward pass, the probe and what is wrong."""
    from posenc.spec.errors import AdapterError
    enc = enc or {}
    for call in trace["calls"]:
        b, t = call["positions"].shape[-2:]
        for i, rec in enumerate(call["probes"]):
            where = f"{call['label']}: probe {i}"
            kind = rec.get("kind")
            if kind not in _PROBE_KEYS:
                raise AdapterError(f"{where}: unknown probe kind {kind!r} (known: {', '.join(_PROBE_KEYS)})")
            layer = rec.get("layer")
            if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or layer < 0):
                raise AdapterError(f"{where} ({kind}): 'layer' must be a layer index (int) or absent, got "
                                   f"{type(layer).__name__} {layer!r}")
            for key, rank in _PROBE_KEYS[kind]:
                x = rec.get(key)
                if not isinstance(x, np.ndarray) or x.ndim != rank or x.dtype.kind not in "fiu":
                    raise AdapterError(f"{where} ({kind}): {key!r} must be a numeric array of rank {rank}, got "
                                       f"{type(x).__name__}{'' if not isinstance(x, np.ndarray) else f' {x.dtype} of shape {list(x.shape)}'}")
            if kind == "attention":
                q, k = rec["q"], rec["k"]
                if q.shape[0] != b or q.shape[2] != t or k.shape[0] != b or k.shape[-1] != q.shape[-1] or \
                        q.shape[1] % k.shape[1]:
                    raise AdapterError(f"{where} (attention): q {list(q.shape)} and k {list(k.shape)} must be [B, Hq, T, D] "
                                       f"and [B, Hk, Tk, D] with B, T = {b}, {t} and Hq a multiple of Hk")
                tk = k.shape[2]
                for key, want in (("probs", (b, q.shape[1], t, tk)), ("mask", None)):
                    x = rec.get(key)
                    if x is None:
                        continue
                    x = np.asarray(x)
                    ok = x.shape == want if want else (x.ndim == 4 and x.shape[-2:] == (t, tk) and x.shape[0] in (1, b))
                    if not ok:
                        raise AdapterError(f"{where} (attention): {key!r} of shape {list(x.shape)} does not fit the pass "
                                           f"([B, {'Hq' if want else '1 or H'}, {t}, {tk}])")
            if kind == "rope":
                shapes = {k: rec[k].shape for k in ("q_in", "q_out")}, {k: rec[k].shape for k in ("k_in", "k_out")}
                if len(set(shapes[0].values())) > 1 or len(set(shapes[1].values())) > 1:
                    raise AdapterError(f"{where} (rope): q and k in and out must keep their shapes, got {shapes}")
                if rec["q_in"].shape[0] != b or rec["q_in"].shape[2] != t or rec["k_in"].shape[2] != t:
                    raise AdapterError(f"{where} (rope): q {list(rec['q_in'].shape)} and k {list(rec['k_in'].shape)} "
                                       f"must be [B, H, T, D] with B, T = {b}, {t} (the pass's tokens)")
                p = _mrope(enc) or _rope_params(enc, layer)
                if p is None and any(isinstance(v, RopeParams) for v in enc.values()):
                    sets = sorted(k for k, v in enc.items() if isinstance(v, RopeParams))
                    raise AdapterError(f"{where} (rope): layer {layer} rotates q and k, but encodings() gives no RoPE "
                                       f"set for it (sets {', '.join(sets)}; layer_types {enc.get('layer_types')!r}): "
                                       "the oracle cannot check it")
                d = rec["q_in"].shape[-1]
                widths = {p.head_dim, p.rdim} if p is not None else set()
                if p is not None and (d not in widths or rec["k_in"].shape[-1] != d):
                    raise AdapterError(f"{where} (rope): q and k of width {d} / {rec['k_in'].shape[-1]}, but the encoding "
                                       f"rotates head_dim {p.head_dim} (rotary width {p.rdim}): the probe or encodings() "
                                       "is wrong")
            if kind == "table" and rec["rows"].shape[-1] != t:
                raise AdapterError(f"{where} (table): rows {list(rec['rows'].shape)} must cover the pass's {t} tokens")


def dynamic_thetas(calls: list[dict], enc: dict) -> list[dict]:
    """Per forward pass, the theta' each dynamic-NTK RoPE set of ``enc`` rotates with: the pass's
    length ``max(positions) + 1`` through the set's policy, in the order the passes ran
    (SCALE-DYNAMIC-PER-CALL: that length alone; SCALE-DYNAMIC-GROW, transformers': grown for the
    longest length so far, reset below max_position_embeddings -- so a pass's frequencies depend
    on the passes before it in the scenario).  ``{set name: theta'}``; empty without dynamic NTK."""
    sets = {k: p for k, p in enc.items() if isinstance(p, RopeParams) and p.rope_type == "dynamic"}
    if not sets:
        return [{} for _ in calls]
    states = {k: rope_scaling.DynamicGrowState(p) for k, p in sets.items()}
    out = []
    for c in calls:
        n = rope_ref.seq_len_of(c["positions"])
        thetas = {}
        for k, p in sets.items():
            if p.dynamic_policy == "grow_until_reset":
                states[k].inv_freq(n)
                thetas[k] = states[k].theta
            else:
                thetas[k] = rope_scaling.dynamic_theta(p, n)
        out.append(thetas)
    return out


def _at_thetas(enc: dict, thetas: dict) -> dict:
    """``enc`` with each dynamic set replaced by plain RoPE at the theta' of ``thetas``."""
    if not thetas:
        return enc
    return {**enc, **{k: enc[k].model_copy(update={"rope_type": "default", "rope_theta": t, "factor": None,
                                                   "dynamic_policy": None}) for k, t in thetas.items()}}


def judge(scenario, trace: dict, info: dict, dtype: str) -> Verdict:
    """Every check of one scenario's run (``trace``: :meth:`posenc.families.model.Run.trace`; its
    probes :func:`validate`d first)."""
    enc = info["encodings"]
    validate(trace, enc)
    calls, problems, unsupported = trace["calls"], [], []
    used: list[Optional[np.ndarray]] = []
    used_from: list[Optional[str]] = []
    checked = 0
    probes_of = set(info.get("probes", ()))
    rope_layers = {r.get("layer") for c in calls for r in c["probes"] if r["kind"] == "rope"}
    needs_rope = _rope_params(enc) is not None or _mrope(enc) is not None
    needs_table = _table_offset(enc) is not None
    if needs_rope and not rope_layers:
        unsupported.append("oracle: the model reported no rope probe (q and k before and after the rotation)")
    if needs_table and not any(r["kind"] == "table" for c in calls for r in c["probes"]):
        unsupported.append("oracle: the model reported no table probe (the rows its positions selected)")
    if _alibi(enc) is not None and not any(r["kind"] == "bias" for c in calls for r in c["probes"]):
        unsupported.append("oracle: the model reported no bias probe (the ALiBi bias added to its attention logits)")
    table_seen = needs_table and any(r["kind"] == "table" for c in calls for r in c["probes"])
    checked_scale = None  # the softmax scale is a constant of the model: checked on its first attention probe
    cross, pads = None, None
    used3: list[Optional[np.ndarray]] = []
    thetas = dynamic_thetas(calls, enc)
    enc_all = enc
    for call, th in zip(calls, thetas):
        enc = _at_thetas(enc_all, th)  # this pass's frequencies (dynamic NTK's theta' at its length)
        u_call, u_from, u3_call = None, None, None
        recs = call["probes"]
        if not call.get("finite_real", True):  # a failure wherever it shows, never a check that counts as run
            problems.append(Problem("logits", (scenario.clause,), f"{call['label']}: the logits are not finite at "
                                    "real tokens (inf or NaN)"))
        if needs_rope and rope_layers:
            seen = {r.get("layer") for r in recs if r["kind"] == "rope"}
            missing = sorted(x for x in rope_layers if x is not None and x not in seen and _layer_rotates(enc, x))
            if missing and call["positions"].size:
                problems.append(Problem("oracle", ("ROPE-ANGLE",), f"{call['label']}: layer(s) {missing} did not rotate "
                                        "q and k in this forward pass (no rotation; other passes rotated them)"))
                u_call, u_from = np.full(call["positions"].shape, -1, np.int64), "table"  # strictly none
        if needs_table and table_seen and call["positions"].size and not any(r["kind"] == "table" for r in recs):
            problems.append(Problem("oracle", (_table_offset(enc)[1],), f"{call['label']}: no position table was read "
                                    "in this forward pass (other passes read it): no position added"))
            u_call, u_from = np.full(call["positions"].shape, -1, np.int64), "table"
        prob = _consistent(call, recs, scenario.clause, enc)
        if prob is not None:
            problems.append(prob)
        for rec in recs:
            kind = rec["kind"]
            if kind == "rope" and _mrope(enc) is not None:
                prob, u3 = _oracle_mrope(call, rec, enc, dtype)
                u = None if u3 is None else u3[0]
                u3_call = u3 if u3_call is None or (u3 is not None and (u3 != u3_call).any()) else u3_call
                checked += 1
            elif kind == "rope" and needs_rope:
                prob, u = _oracle_rope(call, rec, enc, dtype)
                checked += 1
            elif kind == "table" and needs_table:
                prob, u = _oracle_table(call, rec, enc)
                checked += 1
            elif kind == "bias" and _alibi(enc) is not None:
                prob, u = _oracle_bias(call, rec, enc, dtype), None
                checked += 1
            elif kind == "bias" and _t5(enc) is not None:
                prob, u = _oracle_t5(call, rec, enc, dtype)
                checked += 1
            elif kind == "attention":
                sm = enc.get("softmax_scale")
                if sm is not None and rec.get("scaling") is not None and checked_scale is None:
                    checked_scale = _softmax_scale(call, rec, sm)
                    checked += 1
                    if checked_scale is not True:
                        problems.append(checked_scale)
                if call["documents"]:
                    x, where = _cross_document(call, rec)
                    cross = max(cross or 0.0, x)
                    checked += 1
                    if x > 0:
                        problems.append(Problem("attention", (scenario.clause,), f"{call['label']}, layer {rec.get('layer')}: "
                                                f"a token attends to another document with probability {x:.3g} (exactly 0 "
                                                f"required): {where}"))
                if call["attention_mask"] is not None and (np.asarray(call["attention_mask"]) == 0).any():
                    x = _on_pads(call, rec)
                    pads = max(pads or 0.0, x)
                    checked += 1
                    if x > 0:
                        problems.append(Problem("attention", (scenario.clause,), f"{call['label']}, layer {rec.get('layer')}: "
                                                f"a real token attends to a padded key with probability {x:.3g}"))
                continue
            else:
                continue
            if prob is not None:
                problems.append(prob)
            if u is not None and (u_call is None or (u != call["positions"]).any()):
                u_call, u_from = u, kind
        used.append(u_call)
        used_from.append(u_from)
        used3.append(u3_call)
    enc = enc_all
    passes_right = not any(p.kind == "oracle" for p in problems)  # every pass's encoding as the rule gives
    if "attention" not in probes_of and any(c["documents"] for c in calls):
        unsupported.append("attention mass across documents: the model reports no attention probe")
    non_finite, logits_differ = False, False
    for pair in trace["pairs"]:
        checked += 1
        prob = _pair_problem(scenario.clause, pair, dtype)
        if prob is not None:
            problems.append(prob)
            logits_differ = True
        non_finite |= not (np.isfinite(pair["a"]).all() and np.isfinite(pair["b"]).all())
    stale = None
    if needs_rope and rope_layers:
        enc_of = {id(c): _at_thetas(enc, th) for c, th in zip(calls, thetas)}
        for prob in _cached_keys(calls, used, enc_of, dtype):
            problems.append(prob)
            # the frequencies of a per-call rope type change as the sequence grows: stale keys are that bug
            stale = next((p.rope_type for p in enc.values() if isinstance(p, RopeParams)
                          and p.rope_type in ("longrope", "dynamic")), None)
    facts = Facts(calls=calls, used=used, used_from=used_from, cross_document=cross, on_pads=pads,
                  extra={"non_finite": non_finite, "stale_cache": stale, "logits_differ": logits_differ,
                         "used3": used3, "passes_right": passes_right,
                         "dynamic_thetas": [tuple(sorted(th.items())) for th in thetas]})
    matches, inferred = [], []
    if problems:
        # the plumbing bugs the run's facts match, then the encoding bugs the probes' outputs match
        matches = _model_matches(scenario, facts)
        seen = {m.divergence for m in matches}
        matches += [m for m in dict.fromkeys(m for p in problems for m in p.matches) if m.divergence not in seen]
        inferred = infer(facts)
    return Verdict(problems, facts, matches, inferred, unsupported, checked)


def _chains(calls: list[dict]) -> dict[str, list[dict]]:
    """The forward passes of each ``generate`` run with a cache (labels ``<run>: forward pass i``),
    in order, where the passes after the first feed one token each."""
    out: dict[str, list[dict]] = {}
    for c in calls:
        run, sep, _ = c["label"].rpartition(": forward pass ")
        if sep:
            out.setdefault(run, []).append(c)
    return {k: v for k, v in out.items() if len(v) > 1 and all(c["positions"].shape[-1] == 1 for c in v[1:])}


def _cached_keys(calls: list[dict], used: list, enc_of: dict, dtype: str) -> list[Problem]:
    """The keys the attention reads from the cache, in every decode pass of a ``generate`` run,
    against RoPE of each cached token's key (its rope probe's k_in) at the position its own pass
    used with *this* pass's frequencies (a per-call LongRoPE or dynamic NTK changes them as the
    sequence grows; ``enc_of``: each pass's encodings by ``id(call)``): one problem per run whose
    cached keys are rotated otherwise (stale: encoded under other frequencies and kept).  The
    positions are the ones recovered from the probes, so a position bug is not taken for a stale
    cache."""
    out = []
    used_of = {id(c): u for c, u in zip(calls, used)}
    for run, chain in _chains(calls).items():
        ks: dict = {}
        for i, c in enumerate(chain):
            for r in c["probes"]:
                if r["kind"] == "rope":
                    ks.setdefault(r.get("layer"), []).append(np.asarray(r["k_in"], np.float64))
            if i == 0:
                continue
            pos_all = np.concatenate([np.where(used_of.get(id(x)) is not None and (used_of[id(x)] >= 0),
                                               used_of.get(id(x)) if used_of.get(id(x)) is not None else 0,
                                               x["positions"]) for x in chain[:i + 1]], axis=-1)
            valid = np.concatenate([np.broadcast_to(x["valid"], x["positions"].shape) for x in chain[:i + 1]], axis=-1)
            enc = enc_of[id(c)]
            for a in (r for r in c["probes"] if r["kind"] == "attention"):
                p = _rope_params(enc, a.get("layer"))
                k_pre = ks.get(a.get("layer"))
                if not k_pre or len(k_pre) != i + 1 or not _layer_rotates(enc, a.get("layer")):
                    continue
                k_pre = np.concatenate(k_pre, axis=2)
                k_att = np.asarray(a["k"], np.float64)
                if p is None or k_att.shape != k_pre.shape or k_pre.shape[-1] != p.head_dim:
                    continue
                case = Case(id=f"model-cached-keys-{i}", op="rope.apply", clauses=("ROPE-ANGLE",), params=p)
                g = computed(case, {"q": k_pre[:, :1], "k": k_pre, "position_ids": pos_all})
                outputs = dict(g.outputs)
                outputs["k.compared"] = np.broadcast_to(valid[:, None, :, None], g.outputs["k"].shape)
                outputs["q.compared"] = np.zeros(g.outputs["q"].shape, bool)
                comps = compare_outputs(replace(g, outputs=outputs), {"q": g.outputs["q"], "k": k_att}, dtype)
                if not all(cmp.ok for cmp in comps):
                    seq = int(pos_all.max()) + 1
                    out.append(Problem("oracle", ("ROPE-ANGLE",), f"{c['label']}, layer {a.get('layer')}: the cached "
                                       f"keys the attention reads are not RoPE at their positions with this pass's "
                                       f"frequencies (sequence length {seq}): unrotated, or encoded under other "
                                       "frequencies and kept",
                                       [x.message for x in comps if not x.ok]))
                    break
            if out and out[-1].text.startswith(c["label"]):
                break
    return out


def _model_matches(scenario, facts: Facts) -> list[Match]:
    """The divergences whose model-level mutants reproduce the run's facts."""
    out = []
    mut = families.model_mutants()
    for d in _SPEC.current_divergences.values():
        fn = mut.get(d.mutant)
        if fn is None:
            continue
        try:
            hit = fn(facts)
        except Exception:  # noqa: BLE001 - a mutant without a form for these facts
            hit = None
        if hit:
            out.append(Match(d.id, tuple(d.violates), d.description, 0.0))
    return out


def positions_used(facts: Facts, limit: int = 3) -> list[str]:
    """Per forward pass whose encoding used other positions than the rule's (at most ``limit``):
    each wrong row's positions from its first wrong token against the rule's (``none``: nothing
    encoded; ``?``: not a rotation by an integer position); M-RoPE's as (t, h, w)."""
    out = []
    used3 = facts.extra.get("used3") or [None] * len(facts.calls)
    for call, u, u3 in zip(facts.calls, facts.used, used3):
        if u is None:
            continue
        v = np.broadcast_to(call["valid"], u.shape)
        e = call["positions"]
        if u3 is not None and call.get("mrope") is not None:  # [3, B, T]: every axis, shown as triples
            got_of, want_of = u3, np.asarray(call["mrope"])
            ok = _same_positions(u3, want_of).all(axis=0)
        else:
            got_of, want_of = u[None], e[None]
            ok = _same_positions(u, e)
        if ok[v].all():
            continue

        def fmt(x):
            s = [{-1: "none", -2: "?"}.get(int(a), str(int(a))) for a in x]
            return s[0] if len(s) == 1 else f"({', '.join(s)})"
        rows = []
        for b in range(u.shape[0]):
            idx = np.flatnonzero(v[b])
            bad = np.flatnonzero(~ok[b][idx])
            if not bad.size:
                continue
            first = max(int(bad[0]) - 1, 0)  # one right token before the first wrong one
            window = idx[first:first + 6]
            lead = f"from token {int(window[0])}: " if first else ""
            more = " ..." if idx.size > first + 6 else ""
            got = ", ".join(fmt(got_of[:, b, t]) for t in window)
            want = ", ".join(fmt(want_of[:, b, t]) for t in window)
            rows.append(f"row {b}: {lead}{got}{more} (rule: {want}{more})")
        out.append(f"{call['label']}: {'; '.join(rows)}")
        if len(out) >= limit:
            break
    return out


def infer(facts: Facts) -> list[str]:
    """What the positions the encoding used are, in words, where a simple rule explains every
    forward pass whose positions are known: they restart at 0 after the cache, are shifted by k
    after it (or everywhere), count the pads, are row 0's on every row, or are missing on
    one-token steps."""
    known = [(c, u) for c, u in zip(facts.calls, facts.used) if u is not None]
    if not known:
        return []
    every = facts.positions_are
    from .model import _cached_real
    from posenc.reference import position_ids as pos
    out = []
    restart = every(lambda c: c["positions"] - _cached_real(c)[:, None] if c["cache_length"] else None)
    if restart:
        out.append("positions restart at 0 after the cache (each forward pass counts from 0)")
    if every(lambda c: np.full_like(c["positions"], -1) if c["positions"].shape[-1] == 1 and c["cache_length"] else None):
        out.append("no position is encoded on one-token steps")
        if restart:  # a rotation by 0 is none: one-token steps cannot tell them apart
            out.append("(on one-token steps position 0 and no position look alike: MODEL-CHUNKED-PREFILL, whose "
                       "chunks are longer than one token, tells the two apart)")
    after = [u[np.broadcast_to(c["valid"], u.shape)] for c, u in known if c["cache_length"]]
    stuck = {int(x) for a in after for x in a.ravel()}
    if after and len(stuck) == 1 and len(after) > 1 and min(stuck) >= 0:
        k = stuck.pop()
        if every(lambda c, k=k: np.full_like(c["positions"], k) if c["cache_length"] else None):
            out.append(f"every forward pass after the cache at one position, {k}")
    for k in sorted({int(x) for c, u in known if c["cache_length"] for x in (u - c["positions"]).ravel()} - {0})[:4]:
        if every(lambda c, k=k: c["positions"] + k if c["cache_length"] else None):
            out.append(f"{k:+d} on the forward passes after the cache")
    if every(lambda c: pos.decode(*c["positions"].shape, c["cache_length"]) if c["attention_mask"] is not None
             and (np.asarray(c["attention_mask"]) == 0).any() else None):
        out.append("positions count the pads (cache length + arange over the padded row, every row the same)")
    if not out and every(lambda c: np.broadcast_to(c["positions"][:1], c["positions"].shape)
                         if c["positions"].shape[0] > 1 else None):
        out.append("row 1 and the others use row 0's positions")
    deltas = {int(x) for c, u in known for x in (u - c["positions"])[np.broadcast_to(c["valid"], u.shape)].ravel()}
    if len(deltas) == 1 and deltas != {0}:
        out.append(f"positions shifted by {deltas.pop():+d} everywhere")
    return out
