"""The model-level oracle on one forward pass: every probe compared with the operation references at the
positions the scenario's rule gives (``rope`` probes with ``rope.apply`` / ``nope.apply`` / ``mrope.apply``, ``table``
probes with the encoding's row rule, ``bias`` probes with ``alibi.bias`` / ``t5.bias``, ``attention`` probes with
``attention.probs``), the positions the encoding *used* recovered from the probe, the attention mass across packed
documents and on pads, and the pairs of logits a scenario says are equal.  :mod:`posenc.harness.model_judge` runs
them over a scenario's run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from posenc import registry
from posenc.harness.diagnosis import diagnose
from posenc.harness.golden import computed
from posenc.harness.runner import compare_outputs
from posenc.reference import mrope as mrope_ref
from posenc.reference import rope as rope_ref
from posenc.registry.cases import Case
from posenc.spec.models import NopeParams, RopeParams
from posenc.spec.tolerance import logits_bound

#: Row offsets of absolute tables: the row of position p is p + offset (RoBERTa and fairseq: padding_idx + 1).
_TABLE_OFFSETS = {"GPT2EmbeddingParams": 0, "BertEmbeddingParams": 0, "OPTEmbeddingParams": 2,
                  "BartEmbeddingParams": 2}

@dataclass
class Problem:
    """One thing wrong in a run: ``kind`` (``oracle``, ``logits``, ``attention``, ``probe``, ``limit``), the
    clauses it breaks, a one-line ``text`` and detail lines."""

    kind: str
    clauses: tuple[str, ...]
    text: str
    detail: list[str] = field(default_factory=list)
    matches: tuple = ()

def _nope(enc: dict) -> Optional[NopeParams]:
    return enc.get("nope")

def rope_params(enc: dict, layer: Optional[int] = None) -> Optional[RopeParams]:
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

def layer_rotates(enc: dict, layer: Optional[int]) -> bool:
    n = _nope(enc)
    if n is None or layer is None:
        return True
    from posenc.reference.nope import layer_flags
    flags = layer_flags(n)
    return bool(flags[layer]) if layer < len(flags) else True

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

def oracle_rope(call: dict, rec: dict, enc: dict, dtype: str):
    """(problem or None, positions used [B, T] or None) of one rope probe."""
    layer = rec.get("layer")
    p = rope_params(enc, layer)
    if p is None:
        return None, None
    d = np.shape(rec["q_in"])[-1]
    if d == p.rdim and p.rdim < p.head_dim:  # the probe sees the rotated part only (GPT-J)
        p = p.with_width(head_dim=p.rdim)
    positions, valid = call["positions"], call["valid"]
    if not layer_rotates(enc, layer):
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
    wrong = valid & ~same_positions(used, positions) & (used != -2)  # -2: no integer position explains it
    lines = [c.message for c in comps if not c.ok]
    if wrong.any():
        b, t = map(int, np.argwhere(wrong)[0])
        first = f"row {b} token {t}: the rotation is that of position {_pos_text(used[b, t])} where the rule gives {positions[b, t]}"
        clauses = ("ROPE-ANGLE",)
    else:
        first = "the positions are right, the rotation is not (frequencies, pairing or scaling)"
        clauses = tuple(x for x in ("ROPE-ANGLE", f"ROPE-PAIR-{p.pairing.upper()}") if x in registry.spec().clauses)
    matches = tuple(diagnose(registry.spec(), g, got, dtype)) if not wrong.any() else ()
    return Problem("oracle", clauses, f"{call['label']}, layer {layer}: {first}", lines, matches), used

def same_positions(used: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where the recovered positions are the wanted ones (-1, nothing encoded, is position 0 too:
    a rotation by 0 leaves q and k unchanged)."""
    return (used == want) | ((used == -1) & (want == 0))

def _pos_text(u: int) -> str:
    """A recovered RoPE position in words."""
    return {-1: "none (q and k unchanged)", -2: "none (not a rotation by an integer position)"}.get(int(u), str(int(u)))

def mrope_params(enc: dict):
    p = enc.get("mrope")
    return p if type(p).__name__ == "MRopeParams" else None

def oracle_mrope(call: dict, rec: dict, enc: dict, dtype: str):
    """An M-RoPE model's rope probe against ``mrope.apply`` at the scenario's ``[3, B, T]``
    positions (a text-only pass: its positions on every axis); ``(problem, positions [3, B, T])``."""
    p = mrope_params(enc)
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
    wrong = valid[None] & ~same_positions(used, p3) & (used != -2)
    if wrong.any():
        ax, b, t = map(int, np.argwhere(wrong)[0])
        first = (f"row {b} token {t}: positions (t, h, w) = {tuple(int(x) for x in used[:, b, t])} where the rule "
                 f"gives {tuple(int(x) for x in p3[:, b, t])}")
    else:
        first = "the positions are right, the rotation is not (sections, pairing or frequencies)"
    clause = "MROPE-INTERLEAVED" if p.layout == "interleaved" else "MROPE-SECTIONS"
    matches = tuple(diagnose(registry.spec(), g, got, dtype)) if not wrong.any() else ()
    return Problem("oracle", (clause,), f"{call['label']}, layer {rec.get('layer')}: {first}",
                   [c.message for c in comps if not c.ok], matches), used

def table_offset(enc: dict) -> Optional[tuple[int, str, object]]:
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

def oracle_table(call: dict, rec: dict, enc: dict):
    t = table_offset(enc)
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
    gather = _gather_problem(call, rec, rows, valid, clause)
    if gather is not None:
        return gather, None
    used = np.where(rows >= 0, rows - off, -1)  # -1: the output is no row of the table
    wrong = valid & (rows != positions + off)
    if not wrong.any():
        return None, positions
    b, t_ = map(int, np.argwhere(wrong)[0])
    got = (f"table row {rows[b, t_]} (position {used[b, t_]})" if rows[b, t_] >= 0 else
           "no row of the table (the position added is none of its rows)")
    return Problem("oracle", (clause,), f"{call['label']}: row {b} token {t_} got {got} where the rule gives row "
                   f"{positions[b, t_] + off} (position {positions[b, t_]})"), used

def _gather_problem(call: dict, rec: dict, rows: np.ndarray, valid: np.ndarray, clause: str) -> Optional[Problem]:
    """Where a table probe gives the table (``table`` [N, E]) and what the lookup returned (``output``
    [B, T, E]): every real token's output is the table's row its ``rows`` name (exactly, up to rounding to
    a bfloat16 output where the table is held wider)."""
    table, out = rec.get("table"), rec.get("output")
    if table is None or out is None:
        return None
    table, out = np.asarray(table, np.float64), np.asarray(out, np.float64)
    if table.ndim == 2 and out.ndim == 3 and out.shape[0] == 1 and out.shape[1:] == (rows.shape[1], table.shape[1]):
        out = np.broadcast_to(out, (*rows.shape, table.shape[1]))  # one row of positions' vectors for the batch
    if table.ndim != 2 or out.shape != (*rows.shape, table.shape[1]):
        return Problem("probe", (clause,), f"{call['label']}: the table probe's table {list(table.shape)} and output "
                       f"{list(out.shape)} do not fit its rows {list(rows.shape)} ([N, E] and [B, T, E])")
    if (valid & (rows >= table.shape[0])).any():  # (a row -1: no row of the table, the oracle's to name)
        b, t = map(int, np.argwhere(valid & (rows >= table.shape[0]))[0])
        return Problem("probe", (clause,), f"{call['label']}: row {b} token {t}: the table probe names row "
                       f"{rows[b, t]} of a table of {table.shape[0]}")
    inside = rows >= 0
    got = table[np.where(inside, rows, 0)]
    # a gather is exact; the table may be held wider than the output (a float32 sinusoid table, bfloat16 output)
    same = (np.abs(got - out) <= 2.0 ** -8 * np.abs(got)) | (np.isnan(got) & np.isnan(out))
    bad = valid & inside & ~same.all(axis=-1)
    if not bad.any():
        return None
    b, t = map(int, np.argwhere(bad)[0])
    return Problem("oracle", (clause,), f"{call['label']}: row {b} token {t}: the lookup returned another vector "
                   f"than the table's row {rows[b, t]} its rows name (the gather itself is wrong; {int(bad.sum())} "
                   "tokens)")


def alibi_params(enc: dict):
    p = enc.get("alibi")
    return p if type(p).__name__ == "AlibiParams" else None

def t5_params(enc: dict):
    p = enc.get("decoder")
    return p if type(p).__name__ == "T5Params" else None

def oracle_t5(call: dict, rec: dict, enc: dict, dtype: str):
    """T5's decoder bias probe against ``t5.bias`` with the model's own table: queries at the cache
    length the scenario's rule gives (the call's positions), keys 0 .. Tk - 1."""
    p = t5_params(enc)
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
                   [c.message for c in comps if not c.ok], tuple(diagnose(registry.spec(), g, {"bias": got}, dtype))), used

def oracle_bias(call: dict, rec: dict, enc: dict, dtype: str):
    """An ALiBi bias probe against ``alibi.bias`` of the model's form (BLOOM: from the attention mask
    the model read, all ones when none was passed; MPT: relative to the last key), compared where
    the clause specifies it (real queries and keys, no future key)."""
    p = alibi_params(enc)
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
                   tuple(diagnose(registry.spec(), g, {"bias": got}, dtype)))

def check_softmax_scale(call: dict, rec: dict, p) -> object:
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
                   tuple(diagnose(registry.spec(), g, {"probs": probs}, "float32")))

def consistent(call: dict, recs: list, clause: str, enc: dict) -> Optional[Problem]:
    """Where a layer reports both its rotation and its attention, the attention reads what the
    rotation produced: q is the rope probe's q_out, and the last T keys are its k_out (where the
    shapes say they are the same tensors: not MLA's concatenated q).  A probe that describes another
    tensor than the one the model used is caught here."""
    rope = {r.get("layer"): r for r in recs if r["kind"] == "rope"}
    for a in (r for r in recs if r["kind"] == "attention"):
        r = rope.get(a.get("layer"))
        if r is None:
            # this pass rotated other layers and its encoding says this one rotates too: which layer is this?
            if rope and a.get("layer") not in rope and layer_rotates(enc, a.get("layer")):
                return Problem("probe", (clause,), f"{call['label']}: an attention probe of layer {a.get('layer')} has no "
                               f"rope probe beside it (the rope probes are of layers {sorted(rope, key=str)}): the "
                               "probes do not describe one model's layers")
            continue
        q, k = np.asarray(a["q"], np.float64), np.asarray(a["k"], np.float64)
        qo, ko = np.asarray(r["q_out"], np.float64), np.asarray(r["k_out"], np.float64)
        w = qo.shape[-1]  # the rope probe may cover the rotated slice only: the head's first w dims (a partial
        #                   rotary) or its last w (MLA's q and k, the rope part after the nope part)
        if q.shape[:-1] != qo.shape[:-1]:  # batch, heads, tokens: one q, read by the attention and rotated
            return Problem("probe", (clause,), f"{call['label']}, layer {a.get('layer')}: the rope probe's q "
                           f"{list(qo.shape)} and the attention's {list(q.shape)} differ in batch, heads or tokens: "
                           "the rope probe must cover every head the attention reads")
        if q.shape[-1] < w or k.shape[:2] != ko.shape[:2] or k.shape[-1] != q.shape[-1] \
                or ko.shape[-1] != w or k.shape[2] < ko.shape[2]:
            continue
        t = ko.shape[2]  # this pass's keys: the last T, or in a static cache's buffer after the cached ones
        start = call["cache_length"] if call.get("static") else k.shape[2] - t
        k_new = k[:, :, start:start + t]
        if k_new.shape[:-1] != ko.shape[:-1]:  # a sliding window's buffer: this pass's keys are not where they'd be
            continue
        for name, x, y in (("q", q, qo), ("k", k_new, ko)):
            if not any(_same_tensor(x[..., sl], y) for sl in _slices(x.shape[-1], w)):
                return Problem("probe", (clause,), f"{call['label']}, layer {a.get('layer')}: the attention reads "
                               f"another {name} than the rotation's output its rope probe reports: the attention does "
                               "not use that rotation, or the probes describe other tensors than the model used")
    return None


def _slices(width: int, w: int) -> list:
    return [slice(None)] if width == w else [slice(0, w), slice(width - w, width)]


def _same_tensor(x: np.ndarray, y: np.ndarray) -> bool:
    """``x`` is ``y`` (one tensor read twice: equal up to 1e-6 of its scale, non-finite where it is)."""
    if x.shape != y.shape:
        return False
    both = np.isfinite(x) & np.isfinite(y)
    scale = max(float(np.abs(y[both]).max()) if both.any() else 0.0, 1e-30)
    return bool(np.array_equal(np.isfinite(x), np.isfinite(y)) and not (np.abs(x - y)[both] > 1e-6 * scale).any())

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

def cross_document_mass(call: dict, rec: dict) -> tuple[Optional[float], str]:
    """The largest attention probability across documents, and where: ``token q (document d) on
    token k (document e), head h``; None where the probe's keys are not the packed row's."""
    cu = call["documents"]
    probs = attention_probs(rec)
    tk = probs.shape[-1]
    if tk != cu[-1]:  # not the packed row's keys (a sliding window's, a cross-attention's): not read
        return None, ""
    doc = np.searchsorted(np.asarray(cu[1:]), np.arange(tk), side="right")
    off = _key_tokens(call, tk)
    qdoc = doc[off:]
    across = np.where((qdoc[:, None] != doc[None, :])[None, None], probs, 0.0)
    b, h, q, k = map(int, np.unravel_index(int(np.argmax(across)), across.shape))
    return float(across[b, h, q, k]), (f"token {q + off} (document {int(doc[q + off])}) on token {k} (document "
                                       f"{int(doc[k])}), row {b} head {h}")

def pad_mass(call: dict, rec: dict) -> Optional[float]:
    """The largest attention probability a real token gives a padded key; None where the probe's keys are
    not the attention mask's (a sliding window's, a cross-attention's): not read."""
    m = call["attention_mask"]
    probs = attention_probs(rec)
    tk = probs.shape[-1]
    if m is None or np.asarray(m).shape[-1] != tk:
        return None
    pad_key = np.asarray(m)[:, None, None, :] == 0
    real_query = np.asarray(call["valid"], bool)[:, None, :, None]
    return float(np.max(np.where(pad_key & real_query, probs, 0.0)))

def logit_scale(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row of a pair ``[n, V]``: the larger max |logit| of ``a`` and ``b`` (the scale of the logits
    bound) over the vocabulary entries that vary.  An entry that holds one value at every row of both
    (n >= 2: different tokens) is pinned -- a suppressed token at -1e9 -- and sets no scale: it would
    make the bound as wide as the pin."""
    keep = np.ones(a.shape[-1], bool)
    if a.ndim == 2 and a.shape[0] >= 2:
        both = np.concatenate([a, b])
        keep = ~(both == both[:1]).all(axis=0)
        if not keep.any():
            keep[:] = True
    return np.maximum(np.abs(a[..., keep]).max(axis=-1), np.abs(b[..., keep]).max(axis=-1))


def _differences(clause: str, pair: dict, dtype: str):
    """Per row of a pair of logits (``a``, ``b`` ``[n, V]``): ``(max |a - b|, the logits bound)``, or the
    problem that their shapes differ."""
    a, b = pair["a"], pair["b"]
    if a.shape != b.shape:
        return Problem("logits", (clause,), f"{pair['label']}: logits of shapes {list(a.shape)} and {list(b.shape)}")
    return np.abs(a - b).max(axis=-1), logits_bound(dtype, logit_scale(a, b))


def pair_problem(clause: str, pair: dict, dtype: str) -> Optional[Problem]:
    a, b = pair["a"], pair["b"]
    measured = _differences(clause, pair, dtype)
    if isinstance(measured, Problem):
        return measured
    err, bound = measured
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


def change_problem(clause: str, change: dict, dtype: str) -> Optional[Problem]:
    """Two logits the clause says must differ (:meth:`posenc.harness.model_run.Run.changed`: a relative
    position changed between them) and that differ at no row by more than the logits bound: the model's
    attention does not use what its encoding produced.  A row within the bound alone proves nothing (a
    token whose attention the change barely moves, rounding at a low dtype); every row within it does."""
    measured = _differences(clause, change, dtype)
    if isinstance(measured, Problem):
        return measured
    err, bound = measured
    if (err > bound).any():  # NaN never counts as a change: nothing shows the positions were used
        return None
    i = int(np.nanargmax(err / np.where(bound > 0, bound, np.inf))) if np.isfinite(err).any() else 0
    return Problem("logits", (clause,), f"{change['label']}: the logits did not change at any of the {len(err)} rows "
                   f"(the most at {change['where'][i]}: max |difference| {err[i]:.3g}, bound {bound[i]:.3g}): the "
                   "attention does not use the positions its encoding produced (q and k rotated but not read, or "
                   "the rotation dropped)")


#: The parameter models the oracle reads, by probe kind (the encodings a declared probe needs).
_ORACLE_PARAMS = {"rope": ("RopeParams", "MRopeParams"),
                  "table": ("GPT2EmbeddingParams", "BertEmbeddingParams", "OPTEmbeddingParams", "BartEmbeddingParams",
                            "RobertaEmbeddingParams", "SinusoidalParams", "LookupParams"),
                  "bias": ("AlibiParams", "T5Params")}


#: The names the oracle reads a parameter model under (those of posenc.hf.params_from_hf_config):
#: ``(exact names, prefixes)``; a table's parameters may have any name.
_NAMES = {"RopeParams": (("rope",), ("rope.",)), "MRopeParams": (("mrope",), ()), "AlibiParams": (("alibi",), ()),
          "T5Params": (("encoder", "decoder"), ()), "NopeParams": (("nope",), ()),
          "SoftmaxScaleParams": (("softmax_scale",), ())}


def encodings_problem(enc, probes) -> Optional[str]:
    """What is wrong with a model's ``encodings()`` for the oracle, or None: a dict of the spec's parameter
    models (``layer_types`` a tuple of names), each under the name the oracle reads it by, and the
    parameters every declared probe kind's oracle reads (never a run whose probes are silently not
    checked: the suite makes the problem a usage error)."""
    from posenc.spec.models import PARAM_MODELS
    if not isinstance(enc, dict):
        return (f"encodings() must return a dict of parameter models, got {type(enc).__name__}")
    for k, p in enc.items():
        if k == "layer_types":
            if not isinstance(p, (tuple, list)) or not all(isinstance(x, str) for x in p):
                return f"encodings()['layer_types'] must be a tuple of layer type names, got {p!r}"
            continue
        if type(p).__name__ not in PARAM_MODELS or not isinstance(p, PARAM_MODELS[type(p).__name__]):
            return (f"encodings()[{k!r}] must be one of the spec's parameter models (posenc.spec.models: "
                    f"{', '.join(sorted(PARAM_MODELS))}), got {type(p).__name__}")
    for k, p in enc.items():
        want = _NAMES.get(type(p).__name__)
        if want and not (k in want[0] or any(k.startswith(x) for x in want[1])):
            return (f"encodings() names its {type(p).__name__} {k!r}; the oracle reads it under "
                    f"{' or '.join(repr(x) for x in (*want[0], *(x + '<layer type>' for x in want[1])))}")
    kinds = {type(p).__name__ for k, p in enc.items() if k != "layer_types"}
    for probe in probes:
        want = _ORACLE_PARAMS.get(probe)
        if want and not kinds & set(want):
            return (f"declares {probe!r} probes but encodings() gives none of {', '.join(want)}: the oracle would "
                    "have nothing to check them against")
    return None
