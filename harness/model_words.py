"""A model-level run's positions in words: per forward pass, the positions its encoding used against the
rule's (:func:`positions_used`), and the simple rule that explains them, where one does (:func:`infer`:
they restart after the cache, count the pads, are row 0's, ...).  Read by the judge
(:mod:`posenc.harness.model_judge`) and the failure's report (:mod:`posenc.conformance.model_suite`)."""

from __future__ import annotations

import numpy as np

from posenc.harness.model_oracles import same_positions
from posenc.harness.model_run import Facts, cached_real


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
            ok = same_positions(u3, want_of).all(axis=0)
        else:
            got_of, want_of = u[None], e[None]
            ok = same_positions(u, e)
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
    from posenc.reference import position_ids as pos
    out = []
    restart = every(lambda c: c["positions"] - cached_real(c)[:, None] if c["cache_length"] else None)
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
