"""Checks of the model family (MODEL-*): the verdict on one scenario's run (:func:`judge`).

(a) **Oracle.**  Every probe of every forward pass is compared with the family's reference at the
positions the scenario's rule gives: a ``rope`` probe (q and k in and out of the rotation) with
``rope.apply`` -- ``nope.apply`` on a NoPE layer -- under the spec's tolerance rule
(:func:`posenc.spec.tolerance.compare`, the padded slots not compared); a ``table`` probe's rows
with the encoding's row rule (GPT-2 and BERT: the position; OPT and BART: + 2; RoPE... ) exactly.
Where they differ, the positions the encoding *used* are recovered from the probe (the rotation
angle of each pair against ``p * inv_freq``, or the row minus the table's offset) and compared with
the model-level mutants (:func:`posenc.registry.model_mutant`) over every forward pass of the run;
the operation-level diagnosis (:func:`posenc.harness.diagnosis.diagnose`) names encoding bugs
(a pairing swapped, theta replaced).  ``attention`` probes give the attention mass that crosses
packed documents (MODEL-PACKED requires exactly 0) and that reaches padded keys (0 for every
real query).

(b) **Oracle-free.**  Every pair of logits the scenario says are equal is compared under the
model tolerance rule (:func:`posenc.spec.tolerance.logits_bound`).

A failure names the scenario clause, the forward pass, the layer, the row, the first wrong
position, the encoding clause it breaks, and what the model did instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from posenc import registry
from posenc.harness.diagnosis import Match
from posenc.harness.golden import computed
from posenc.harness.model_oracles import (
    Problem,
    alibi_params,
    change_problem,
    check_softmax_scale,
    consistent,
    cross_document_mass,
    layer_rotates,
    mrope_params,
    oracle_bias,
    oracle_mrope,
    oracle_rope,
    oracle_t5,
    oracle_table,
    pad_mass,
    pair_problem,
    rope_params,
    t5_params,
    table_offset,
)
from posenc.harness.model_run import Facts, beyond_used
from posenc.harness.model_words import infer
from posenc.harness.runner import compare_outputs
from posenc.reference import rope as rope_ref
from posenc.reference import rope_scaling
from posenc.spec.errors import AdapterError
from posenc.registry.cases import Case
from posenc.spec.models import RopeParams


@dataclass
class Verdict:
    problems: list[Problem]
    facts: Facts
    matches: list[Match]
    inferred: list[str]
    unsupported: list[str]  # checks that could not run, with the reason
    checked: int  # probes and pairs compared


_PROBE_KEYS = {"rope": (("q_in", 4), ("k_in", 4), ("q_out", 4), ("k_out", 4)), "table": (("rows", 2),),
               "bias": (("bias", 4),), "attention": (("q", 4), ("k", 4))}


def validate(trace: dict, enc: Optional[dict] = None) -> None:
    """The probes a model reported fit the contract (posenc.adapters.model): a known kind, an integer
    (or no) layer, its arrays present with their ranks and numeric, q and k in and out of one shape
    and of a width its encoding rotates, one token per position of the pass; an attention probe's k
    as wide as its q, its mask and probabilities of the pass's [Tq, Tk].  Raises
    :class:`AdapterError` naming the forward pass, the probe and what is wrong."""
    enc = enc or {}
    for call in trace["calls"]:
        b, t = call["positions"].shape[-2:]
        rotated = [r.get("layer") for r in call["probes"] if isinstance(r, dict) and r.get("kind") == "rope"]
        twice = sorted({x for x in rotated if x is not None and rotated.count(x) > 1}, key=str)
        if twice:  # a second rotation rotates the rotated q and k: each probe alone looks right
            raise AdapterError(f"{call['label']}: layer(s) {twice} reported {max(rotated.count(x) for x in twice)} rope "
                               "probes in one forward pass: a layer rotates q and k once (a second rotation would "
                               "rotate them by twice the angle, which no one probe shows)")
        for i, rec in enumerate(call["probes"]):
            where = f"{call['label']}: probe {i}"
            kind = rec.get("kind")
            if not isinstance(kind, str) or kind not in _PROBE_KEYS:
                raise AdapterError(f"{where}: unknown probe kind {kind!r} (known: {', '.join(_PROBE_KEYS)}; a string)")
            layer = rec.get("layer")
            if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int) or layer < 0):
                raise AdapterError(f"{where} ({kind}): 'layer' must be a layer index (int) or absent, got "
                                   f"{type(layer).__name__} {layer!r}")
            for key, rank in _PROBE_KEYS[kind]:
                x = rec.get(key)
                kinds = "iu" if key == "rows" else "fiu"  # table rows are indices
                if not isinstance(x, np.ndarray) or x.ndim != rank or x.dtype.kind not in kinds:
                    raise AdapterError(f"{where} ({kind}): {key!r} must be {'an integer' if kinds == 'iu' else 'a numeric'} "
                                       f"array of rank {rank}, got {type(x).__name__}"
                                       f"{'' if not isinstance(x, np.ndarray) else f' {x.dtype} of shape {list(x.shape)}'}")
                if 0 in x.shape:  # an empty probe would make its oracle vacuous
                    raise AdapterError(f"{where} ({kind}): {key!r} of shape {list(x.shape)} is empty (no head, token "
                                       "or dimension): a probe must report what the layer computed")
            if kind == "attention":
                _validate_attention(where, rec, b, t)
            if kind == "rope":
                _validate_rope(where, rec, b, t, enc, layer)
            if kind == "bias" and t5_params(enc) is not None and not (
                    isinstance(rec.get("table"), np.ndarray) and rec["table"].ndim == 2 and rec["table"].dtype.kind in "fiu"):
                raise AdapterError(f"{where} (bias): T5's bias probe carries its relative attention table ('table', "
                                   f"numeric [buckets, H]), got {type(rec.get('table')).__name__}")
            if kind == "table" and rec["rows"].shape[-1] != t:
                raise AdapterError(f"{where} (table): rows {list(rec['rows'].shape)} must cover the pass's {t} tokens")
            if kind == "bias" and (rec["bias"].shape[-2] != t or rec["bias"].shape[-1] < t or
                                   rec["bias"].shape[0] not in (1, b)):
                raise AdapterError(f"{where} (bias): bias {list(rec['bias'].shape)} must be [B or 1, H, Tq, Tk] with "
                                   f"B = {b}, Tq = {t} (the pass's tokens) and Tk >= Tq (the keys read include them)")
    # one token's zero q and k is real (a pad id's zero embedding); a whole run's is an unfilled buffer
    rope = [r for c in trace["calls"] for r in c["probes"] if r.get("kind") == "rope"]
    if rope and not any(np.any(r["q_in"]) or np.any(r["k_in"]) for r in rope):
        raise AdapterError("every rope probe of the run has q and k in all zero: rotating zeros checks nothing (an "
                           "unfilled buffer?); a probe must report what the layer computed")


def _validate_attention(where: str, rec: dict, b: int, t: int) -> None:
    """An attention probe's q and k of the pass's [B, Hq, T, D] and [B, Hk, Tk, D] (Tk: the keys it read --
    a sliding window's, a cross-attention's source), its probabilities and mask of [Tq, Tk] (numeric or
    boolean), and a scale to recompute the probabilities with where it gives none."""
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
        if not ok or x.dtype.kind not in ("f" if key == "probs" else "biuf"):
            raise AdapterError(f"{where} (attention): {key!r} of {x.dtype} and shape {list(x.shape)} does not fit the "
                               f"pass ({'floating' if key == 'probs' else 'boolean or numeric'} [B, "
                               f"{'Hq' if want else '1 or H'}, {t}, {tk}])")
    sc = rec.get("scaling")
    if (sc is not None or rec.get("probs") is None) and (isinstance(sc, bool) or not isinstance(sc, (int, float))
                                                         or not np.isfinite(sc) or sc <= 0):
        raise AdapterError(f"{where} (attention): 'scaling' must be the softmax scale (a positive number)"
                           + (", required without 'probs'" if rec.get("probs") is None else "") + f", got {sc!r}")


def _validate_rope(where: str, rec: dict, b: int, t: int, enc: dict, layer) -> None:
    """A rope probe's q and k in and out of one shape, the pass's tokens, and a width the layer's RoPE set
    rotates (a layer that rotates must have a set in ``encodings()``)."""
    shapes = {k: rec[k].shape for k in ("q_in", "q_out")}, {k: rec[k].shape for k in ("k_in", "k_out")}
    if len(set(shapes[0].values())) > 1 or len(set(shapes[1].values())) > 1:
        raise AdapterError(f"{where} (rope): q and k in and out must keep their shapes, got {shapes}")
    if rec["q_in"].shape[0] != b or rec["q_in"].shape[2] != t or rec["k_in"].shape[2] != t or rec["k_in"].shape[0] != b:
        raise AdapterError(f"{where} (rope): q {list(rec['q_in'].shape)} and k {list(rec['k_in'].shape)} "
                           f"must be [B, H, T, D] with B, T = {b}, {t} (the pass's tokens)")
    p = mrope_params(enc) or rope_params(enc, layer)
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
    """Every check of one scenario's run (``trace``: :meth:`posenc.harness.model_run.Run.trace`; its
    probes :func:`validate`d first)."""
    validate(trace, info["encodings"])
    j = _Judging(scenario, trace, info, dtype)
    j.missing_probes()
    for call, th in zip(j.calls, j.thetas):
        j.forward_pass(call, _at_thetas(j.enc_all, th))  # this pass's frequencies (dynamic NTK's theta' at its length)
    return j.verdict()


class _Judging:
    """One scenario's run being judged: the problems found, the positions the encoding used per forward
    pass (recovered from its probes), what was checked and what could not be."""

    def __init__(self, scenario, trace: dict, info: dict, dtype: str):
        self.scenario, self.dtype = scenario, dtype
        self.enc_all = enc = info["encodings"]
        self.calls, self.pairs, self.changes = trace["calls"], trace["pairs"], trace.get("changes", [])
        self.refusals = trace.get("refusals", [])  # passes beyond max_positions: each must have raised
        self.twin_pairs, self.twin_note = trace.get("twin_pairs"), trace.get("twin_note")
        self.twin_changes = trace.get("twin_changes")
        self.probes_of = set(info.get("probes", ()))
        self.num_layers = info.get("num_layers")
        self.problems: list[Problem] = []
        self.unsupported: list[str] = list(trace.get("unchecked", ()))  # what the driver could not ask the model
        self.used: list[Optional[np.ndarray]] = []
        self.used_from: list[Optional[str]] = []
        self.used3: list[Optional[np.ndarray]] = []
        self.checked = 0
        self.checked_scale = None  # the softmax scale is a constant of the model: checked on its first attention probe
        self.cross, self.pads = None, None
        self.unread_mass = 0  # attention probes whose keys were not the pass's (a sliding window's): not read
        self.rope_layers = {r.get("layer") for c in self.calls for r in c["probes"] if r["kind"] == "rope"}
        self.needs_rope = rope_params(enc) is not None or mrope_params(enc) is not None
        self.needs_table = table_offset(enc) is not None
        self.table_seen = self.needs_table and any(r["kind"] == "table" for c in self.calls for r in c["probes"])
        self.thetas = dynamic_thetas(self.calls, enc)

    def missing_probes(self) -> None:
        """The oracles the model's encodings need but that no probe of the run feeds: unsupported."""
        enc, probes = self.enc_all, [r for c in self.calls for r in c["probes"]]
        if self.needs_rope and not self.rope_layers:
            self.unsupported.append("oracle: the model reported no rope probe (q and k before and after the rotation)")
        n = self.num_layers
        att = {r.get("layer") for r in probes if r["kind"] == "attention" and r.get("layer") is not None}
        if n and any(x >= n for x in att):
            self.problems.append(Problem("probe", (self.scenario.clause,), f"attention probes of layer(s) "
                                         f"{sorted(x for x in att if x >= n)}, but the model has {n} (num_layers)"))
        if self.needs_rope and self.rope_layers and not n:
            self.unsupported.append(f"layers that report no probe (num_layers not declared: the rope probes of layer(s) "
                                    f"{sorted(self.rope_layers, key=str)} were checked, and whether others rotate is "
                                    "not known)")
        if self.needs_rope and self.rope_layers and n:
            beyond = sorted(x for x in self.rope_layers if x is not None and x >= n)
            missing = sorted(i for i in range(n) if layer_rotates(enc, i) and i not in self.rope_layers)
            if beyond or missing:
                self.problems.append(Problem("probe", (self.scenario.clause,), (
                    f"rope probes of layer(s) {beyond}, but the model has {n} (num_layers)" if beyond else
                    f"layer(s) {missing} of the model's {n} rotate q and k (encodings()) but reported no rope probe "
                    "in any forward pass: the oracle cannot check them")))
        if self.needs_table and not any(r["kind"] == "table" for r in probes):
            self.unsupported.append("oracle: the model reported no table probe (the rows its positions selected)")
        if alibi_params(enc) is not None and not any(r["kind"] == "bias" for r in probes):
            self.unsupported.append("oracle: the model reported no bias probe (the ALiBi bias added to its attention "
                                    "logits)")

    def forward_pass(self, call: dict, enc: dict) -> None:
        """One forward pass: its logits finite at real tokens, every layer that rotates elsewhere rotating
        here, every probe against its oracle; the positions it used recorded."""
        u_call, u_from, u3_call = None, None, None
        recs = call["probes"]
        if not call.get("finite_real", True):  # a failure wherever it shows, never a check that counts as run
            self.problems.append(Problem("logits", (self.scenario.clause,), f"{call['label']}: the logits are not "
                                         "finite at real tokens (inf or NaN)"))
        if self.needs_rope and self.rope_layers:
            seen = {r.get("layer") for r in recs if r["kind"] == "rope"}
            missing = sorted(x for x in self.rope_layers if x is not None and x not in seen and layer_rotates(enc, x))
            if missing and call["positions"].size:
                self.problems.append(Problem("oracle", ("ROPE-ANGLE",), f"{call['label']}: layer(s) {missing} did not "
                                             "rotate q and k in this forward pass (no rotation; other passes rotated "
                                             "them)"))
                u_call, u_from = np.full(call["positions"].shape, -1, np.int64), "table"  # strictly none
        if self.needs_table and self.table_seen and call["positions"].size and not any(r["kind"] == "table" for r in recs):
            self.problems.append(Problem("oracle", (table_offset(enc)[1],), f"{call['label']}: no position table was "
                                         "read in this forward pass (other passes read it): no position added"))
            u_call, u_from = np.full(call["positions"].shape, -1, np.int64), "table"
        prob = consistent(call, recs, self.scenario.clause, enc)
        if prob is not None:
            self.problems.append(prob)
        for rec in recs:
            if rec["kind"] == "attention":
                self.attention(call, rec, enc)
                continue
            found = self.oracle(call, rec, enc)
            if found is None:
                continue
            prob, u, u3, is_mrope = found
            if is_mrope:
                u3_call = u3 if u3_call is None or (u3 is not None and (u3 != u3_call).any()) else u3_call
            if prob is not None:
                self.problems.append(prob)
            if u is not None and (u_call is None or (u != call["positions"]).any()):
                u_call, u_from = u, rec["kind"]
        self.used.append(u_call)
        self.used_from.append(u_from)
        self.used3.append(u3_call)

    def oracle(self, call: dict, rec: dict, enc: dict):
        """``(problem, positions used, M-RoPE's 3-D positions used, is M-RoPE)`` of one probe against its
        oracle; None for a probe no oracle of the model's encodings reads."""
        kind, dtype = rec["kind"], self.dtype
        if kind == "rope" and mrope_params(enc) is not None:
            prob, u3 = oracle_mrope(call, rec, enc, dtype)
            self.checked += 1
            return prob, None if u3 is None else u3[0], u3, True
        if kind == "rope" and self.needs_rope:
            found = oracle_rope(call, rec, enc, dtype)
        elif kind == "table" and self.needs_table:
            found = oracle_table(call, rec, enc)
        elif kind == "bias" and alibi_params(enc) is not None:
            found = oracle_bias(call, rec, enc, dtype), None
        elif kind == "bias" and t5_params(enc) is not None:
            found = oracle_t5(call, rec, enc, dtype)
        else:
            return None
        self.checked += 1
        return found[0], found[1], None, False

    def attention(self, call: dict, rec: dict, enc: dict) -> None:
        """An attention probe: the softmax scale (once), the mass across packed documents and on pads."""
        sm = enc.get("softmax_scale")
        if sm is not None and rec.get("scaling") is not None and self.checked_scale is None:
            self.checked_scale = check_softmax_scale(call, rec, sm)
            self.checked += 1
            if self.checked_scale is not True:
                self.problems.append(self.checked_scale)
        if call["documents"]:
            x, where = cross_document_mass(call, rec)
            if x is None:
                self.unread_mass += 1
                return
            self.checked += 1
            if not np.isfinite(x):
                self.problems.append(_not_finite(call, rec, "across documents", self.scenario.clause))
                return
            self.cross = max(self.cross or 0.0, x)
            if x > 0:
                self.problems.append(Problem("attention", (self.scenario.clause,), f"{call['label']}, layer "
                                             f"{rec.get('layer')}: a token attends to another document with "
                                             f"probability {x:.3g} (exactly 0 required): {where}"))
        if call["attention_mask"] is not None and (np.asarray(call["attention_mask"]) == 0).any():
            x = pad_mass(call, rec)
            if x is None:
                self.unread_mass += 1
                return
            self.checked += 1
            if not np.isfinite(x):
                self.problems.append(_not_finite(call, rec, "on padded keys", self.scenario.clause))
                return
            self.pads = max(self.pads or 0.0, x)
            if x > 0:
                self.problems.append(Problem("attention", (self.scenario.clause,), f"{call['label']}, layer "
                                             f"{rec.get('layer')}: a real token attends to a padded key with "
                                             f"probability {x:.3g}"))

    def logit_pairs(self) -> tuple[bool, bool]:
        """Every pair of logits the scenario says are equal; ``(any non-finite, any pair differs)``.  Each
        pair of the run under the model tolerance rule at the run's dtype; where the run has a float64 twin
        (the same weights and code in float64), the twin's pair of the same label too, under the float64
        bound (the clause in exact arithmetic, up to the model's own float32 parts: a plumbing bug too small
        for the run's dtype shows there).  A twin that judged no pair, or not every one, is reported."""
        non_finite, logits_differ = False, False
        twins = {t.get("label"): t for t in (self.twin_pairs or ())}
        missed = []
        for pair in self.pairs:
            judged = [(pair, self.dtype)]
            twin = _twin_of(twins, pair)
            if twin is not None:
                judged.append(twin)
            elif self.twin_pairs is not None:
                missed.append(f"{pair['label']}: " + ("no twin pair of that label" if pair["label"] not in twins else
                                                      "the twin's logits are not finite"))
            for p, dt in judged:
                self.checked += 1
                prob = pair_problem(self.scenario.clause, p, dt)
                if prob is not None:
                    self.problems.append(prob)
                    logits_differ = True
            non_finite |= not (np.isfinite(pair["a"]).all() and np.isfinite(pair["b"]).all())
        why = [self.twin_note] if self.twin_note else []
        why += missed[:2] + ([f"{len(missed) - 2} more pairs"] if len(missed) > 2 else [])
        if why:
            self.unsupported.append(f"the float64 twin's check of the logit pairs ({len(missed) or len(self.pairs)} of "
                                    f"{len(self.pairs)} pairs: {'; '.join(why)})")
        return non_finite, logits_differ

    def refusals_judged(self) -> None:
        """Every pass the scenario says must raise (a position past ``max_positions``) and returned logits."""
        for x in self.refusals:
            self.checked += 1
            if x["raised"] is None:
                self.problems.append(Problem("limit", (self.scenario.clause,), x["text"] + beyond_used(self.calls,
                                                                                                        self.used, x)))

    def must_differ(self) -> None:
        """Every pair of logits the scenario says must differ (:meth:`Run.changed`): at the run's dtype down to
        float32 (below it the bound is as large as the change a correct model shows), and on the float64 twin."""
        twins = {t.get("label"): t for t in (self.twin_changes or ())}
        for change in self.changes:
            judged = [] if self.dtype in ("bfloat16", "float16") else [(change, self.dtype)]
            twin = _twin_of(twins, change)
            if twin is not None:
                judged.append(twin)
            elif not judged:
                self.unsupported.append(f"{change['label']}: not compared at {self.dtype} without a float64 twin (its "
                                        "logits bound is as large as the change a correct model's logits show)")
            for c, dt in judged:
                self.checked += 1
                prob = change_problem(self.scenario.clause, c, dt)
                if prob is not None:
                    self.problems.append(prob)

    def stale_keys(self) -> Optional[str]:
        """The cached keys against the reference at the positions they were cached at; the rope type whose
        per-call frequencies make stale keys a bug, where a problem was found."""
        stale = None
        if self.needs_rope and self.rope_layers:
            enc_of = {id(c): _at_thetas(self.enc_all, th) for c, th in zip(self.calls, self.thetas)}
            for prob in _cached_keys(self.calls, self.used, enc_of, self.dtype):
                self.problems.append(prob)
                # the frequencies of a per-call rope type change as the sequence grows: stale keys are that bug
                stale = next((p.rope_type for p in self.enc_all.values() if isinstance(p, RopeParams)
                              and p.rope_type in ("longrope", "dynamic")), None)
        return stale

    def verdict(self) -> Verdict:
        passes_right = not any(p.kind == "oracle" for p in self.problems)  # every pass's encoding as the rule gives
        for what, has in (("across documents", lambda c: c["documents"]), ("on padded keys", lambda c: c[
                "attention_mask"] is not None and (np.asarray(c["attention_mask"]) == 0).any())):
            if "attention" not in self.probes_of and any(has(c) for c in self.calls):
                self.unsupported.append(f"attention mass {what}: the model reports no attention probe")
        if self.unread_mass and self.cross is None and self.pads is None:
            self.unsupported.append(f"attention mass across documents and on pads: no attention probe of the run holds "
                                    f"the pass's keys ({self.unread_mass} hold others: a window's, a source's)")
        non_finite, logits_differ = self.logit_pairs()
        self.refusals_judged()
        self.must_differ()
        stale = self.stale_keys()
        facts = Facts(calls=self.calls, used=self.used, used_from=self.used_from, cross_document=self.cross,
                      on_pads=self.pads,
                      extra={"non_finite": non_finite, "stale_cache": stale, "logits_differ": logits_differ,
                             "used3": self.used3, "passes_right": passes_right,
                             "dynamic_thetas": [tuple(sorted(th.items())) for th in self.thetas]})
        matches, inferred = [], []
        if self.problems:
            # the plumbing bugs the run's facts match, then the encoding bugs the probes' outputs match
            matches = _model_matches(self.scenario, facts)
            seen = {m.divergence for m in matches}
            for m in (m for p in self.problems for m in p.matches):  # once each (the first probe's ratio)
                if m.divergence not in seen:
                    seen.add(m.divergence)
                    matches.append(m)
            inferred = infer(facts)
        return Verdict(self.problems, facts, matches, inferred, self.unsupported, self.checked)


def _twin_of(twins: dict, item: dict) -> Optional[tuple[dict, str]]:
    """``(the float64 twin's record of item's label, "float64")`` where the twin has one with finite logits."""
    twin = twins.get(item["label"])
    if twin is None or not (np.isfinite(twin["a"]).all() and np.isfinite(twin["b"]).all()):
        return None
    return {**twin, "label": f"{twin['label']} (float64 twin)"}, "float64"


def _not_finite(call: dict, rec: dict, what: str, clause: str) -> Problem:
    """Attention probabilities that are NaN where a real token's attention is read: its mass cannot be."""
    return Problem("attention", (clause,), f"{call['label']}, layer {rec.get('layer')}: the attention probabilities of a "
                   f"real token are not finite (NaN): the mass {what} cannot be read")


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
                p = rope_params(enc, a.get("layer"))
                k_pre = ks.get(a.get("layer"))
                if not k_pre or len(k_pre) != i + 1 or not layer_rotates(enc, a.get("layer")):
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
    mut = registry.model_mutants()
    for d in registry.spec().current_divergences.values():
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
