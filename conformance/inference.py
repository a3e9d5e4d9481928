"""Inference beyond the divergence catalogue: say what a wrong output *is*.

When no known divergence reproduces a failing output (``runner.diagnose``), :func:`infer` fits
models of common bugs: the positions a RoPE implementation used, its frequencies (a ratio, another
θ), pairing, an unrotated tensor, attention factor, a flipped sin; the row shift of a learned or
sinusoidal table; ALiBi slope ratios or head counts; T5 bucket offsets or direction.  Each model
is verified by recomputing the implied output (with the reference wherever a parameter or an input
expresses it) under the tolerance rule (``runner.compare_outputs``): a fact only when it reproduces
the output, else a "closest fit" with its residual; with no fit, a fallback says where it is wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from posenc import families
from posenc.families import mrope as fm, rope as fr
from posenc.reference import alibi, mrope, rope, t5
from posenc.spec.models import AlibiParams, RopeParams
from posenc.spec.tolerance import bound

from .golden import Golden
from .runner import compare_outputs

Outputs = dict[str, np.ndarray]
Candidate = tuple[str, Callable[[], Optional[Outputs]]]  # sentence, lazy implied outputs
_K = (1, -1, 2, -2, 3, -3, 4, -4)  # row / position shifts tried, nearest first


def infer(golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[str]:
    """Short sentences saying what ``outputs`` are, compared with ``golden`` (empty: nothing inferred).

    ``golden``: the case (op, params, clauses), its NumPy inputs, reference outputs and error
    scales; ``outputs``: the adapter's NumPy outputs by name (any shape, possibly NaN/inf);
    ``dtype``: the activation dtype of the run.  Explains the clauses of the case's operation:
    ROPE-ANGLE, ROPE-INV-FREQ, ROPE-PAIR-*, ROPE-ATTENTION-FACTOR, SCALE-* (rope.*, mrope.*),
    LEARNED-* and SIN-* (row shifts), ALIBI-SLOPES, T5-BUCKET-* / T5-BIAS.  Never raises.
    """
    try:
        with np.errstate(all="ignore"):
            return _infer(golden, {n: np.asarray(v) for n, v in outputs.items()}, dtype)
    except Exception:  # noqa: BLE001 - a kit-internal traceback would be worse than no inference
        return []


@dataclass
class _Ctx:
    g: Golden
    out: Outputs
    dtype: str
    bad: list[str] = field(default_factory=list)
    af: Optional[float] = None  # the attention factor found (RoPE), if not the specified one

    def __post_init__(self):
        self.op, self.p, self.x = self.g.case.op, self.g.case.params, self.g.inputs

    def ref(self, params=None, inputs=None) -> Outputs:
        """The reference's outputs of the case's op with other parameters or inputs."""
        return families.reference_of(self.op).fn(self.p if params is None else params,
                                                 self.x if inputs is None else inputs)

    def fit(self, implied: Outputs) -> tuple[bool, float]:
        """Whether ``implied`` (missing names: the golden's) reproduces the output; max |err|/bound.
        The scales widen as the diagnosis's do (to the implied magnitudes, the row's largest angle)."""
        g, mut = self.g, {**self.g.outputs, **{n: np.asarray(v) for n, v in implied.items()}}
        if any(np.shape(mut[n]) != np.shape(g.outputs[n]) for n in mut if n in g.outputs):
            return False, float("inf")
        ds = {n: np.maximum(v, np.abs(mut[n])) for n, v in g.dtype_scales.items() if n in mut}
        an = {n: np.maximum(v, v.max(axis=-1, keepdims=True)) if np.ndim(v) else v for n, v in g.angle_scales.items()}
        cmps = compare_outputs(Golden(g.case, g.inputs, mut, ds, an, g.angle_based), self.out, self.dtype)
        return all(c.ok for c in cmps), max((c.ratio for c in cmps), default=0.0)


def _infer(g: Golden, out: Outputs, dtype: str) -> list[str]:
    cmps = compare_outputs(g, out, dtype)
    names = [n for n in g.outputs if not n.endswith(".compared")]
    bad = [n for n, c in zip(names, cmps) if not c.ok]
    if not bad:
        return []
    ctx = _Ctx(g, out, dtype, bad)
    ref_ratio = max(c.ratio for c in cmps)
    shaped = [n for n in bad if n in out and out[n].shape == g.outputs[n].shape]
    if len(shaped) < len(bad):
        return [f"{n}: missing from the outputs" if n not in out else f"{n}: shape {list(out[n].shape)}, "
                f"the reference's is {list(g.outputs[n].shape)}" for n in bad if n not in shaped]
    if any(out[n].dtype.kind == "f" and not np.isfinite(out[n]).all() for n in bad):
        return _fallback(ctx)  # NaN/inf: no model of a bug gives them
    try:
        found = _judge(ctx, _MODELS.get(ctx.op.split(".")[0], lambda c: [])(ctx), ref_ratio)
    except Exception:  # noqa: BLE001 - a model that cannot be built here: fall back
        found = []
    return found if found and not found[0].startswith("closest fit") else found + _fallback(ctx)


def _judge(ctx: _Ctx, candidates: list[Candidate], ref_ratio: float) -> list[str]:
    """The first candidate that reproduces the output, else the best closest fit (if much better)."""
    best: Optional[tuple[float, str]] = None
    for sentence, implied in candidates:
        try:
            mut = implied()
            ok, ratio = (False, float("inf")) if mut is None else ctx.fit(mut)
        except Exception:  # noqa: BLE001 - a model that cannot be computed here does not fit
            continue
        if ok:
            return [sentence]
        if np.isfinite(ratio) and (best is None or ratio < best[0]):
            best = (ratio, sentence)
    if best is not None and best[0] < min(ref_ratio / 10, 1e3):
        return [f"closest fit: {best[1]} (residual: max |err|/bound {best[0]:.3g})"]
    return []


def _sig(v: float, digits: int = 4) -> str:
    return f"{v:.{digits}g}"


# ---- rotations (rope.*, mrope.*) ---------------------------------------------------------------
@dataclass
class _Call:
    """One call: its key ("" or ".<k>", rope.cos_sin_calls), positions ``[B, T]`` and the
    reference's frequencies ``[n]`` (None where not inputs), the reference's cos/sin ``c``, ``s``
    and the adapter's effective ones ``ce``, ``se`` (all ``[B, T, n]``)."""

    key: str
    pid: Optional[np.ndarray]
    w: Optional[np.ndarray]
    c: np.ndarray
    s: np.ndarray
    ce: np.ndarray = None
    se: np.ndarray = None


def _geometry(ctx: _Ctx) -> tuple[int, str]:
    """``(pair_dim, pairing)`` of the case's rotation (M-RoPE: rotary_dim, half pairs)."""
    p = ctx.p
    return (getattr(p, "rdim", p.head_dim), "half") if ctx.op.startswith("mrope") else (p.pair_dim, p.pairing)


def _sin_sign(ctx: _Ctx) -> int:
    """-1 where the case's pairs turn by -phi (ROPE-ROTATION-NEGATIVE), else +1: the sign that
    turns the sin recovered from a rotation into the table's sin, and back."""
    return -1 if ctx.op.startswith("rope.") and getattr(ctx.p, "rotation", "positive") == "negative" else 1


def _reference_calls(ctx: _Ctx) -> list[_Call]:
    """The reference's cos/sin (and frequencies, positions) of every call of the case."""
    op, p, x = ctx.op, ctx.p, ctx.x
    if op == "rope.apply_with_cos_sin":
        return [_Call("", None, None, np.asarray(x["cos"], float), np.asarray(x["sin"], float))]
    if op.startswith("mrope"):
        r = fm.mrope_outputs("mrope.cos_sin", p, x)
        return [_Call("", None, mrope.inv_freq(p), r["cos"], r["sin"])]
    freq, seen = fr.freq_provider(p), {}

    def recorded(n):  # one provider over the calls in order (a stateful policy sees the sequence)
        seen["w"], a = freq(n)
        return seen["w"], a
    calls = []
    for key in fr.call_keys(x) if op == "rope.cos_sin_calls" else ["position_ids"]:
        r = fr.rope_outputs("rope.cos_sin", p, {"position_ids": np.asarray(x[key])}, recorded)
        calls.append(_Call(key[12:], np.asarray(x[key]), np.asarray(seen["w"], float), r["cos"], r["sin"]))
    return calls


def _effective(ctx: _Ctx, calls: list[_Call], tensors: list[str]) -> None:
    """The adapter's cos/sin: given outputs, or recovered from q/k (per pair ``z_out / z_in``)."""
    if not ctx.op.endswith("apply") and ctx.op != "rope.apply_with_cos_sin":
        for c in calls:
            c.ce, c.se = ctx.out["cos" + c.key].astype(float), ctx.out["sin" + c.key].astype(float)
        return
    (a, b), (oa, ob) = rope.pair_indices(*_geometry(ctx)), rope.output_indices(*_geometry(ctx))
    num, den = 0, 0
    for n in tensors:
        xi, y = np.asarray(ctx.x[n], float), ctx.out[n].astype(float)
        zi, zo = xi[..., a] + 1j * xi[..., b], y[..., oa] + 1j * y[..., ob]
        num = num + (zo * np.conj(zi)).sum(axis=1)  # over heads: [B, T, n]
        den = den + (np.abs(zi) ** 2).sum(axis=1)
    z = num / np.where(den == 0, 1.0, den)
    calls[0].ce, calls[0].se = z.real, _sin_sign(ctx) * z.imag  # the table's sin (ROPE-ROTATION-NEGATIVE)


def _emit(ctx: _Ctx, calls: list[_Call], cs: list[tuple[np.ndarray, np.ndarray]]) -> Outputs:
    """Outputs implied by cos/sin ``cs`` per call (for apply: the bad tensors rotated by them)."""
    if ctx.op in ("rope.cos_sin", "rope.cos_sin_calls", "mrope.cos_sin"):
        return {n + c.key: v for c, pair in zip(calls, cs) for n, v in zip(("cos", "sin"), pair)}
    rotation = "negative" if _sin_sign(ctx) < 0 else "positive"
    return {n: rope.apply_with_cos_sin(ctx.x[n], *cs[0], *_geometry(ctx), rotation) for n in ctx.bad}


def _wrap(a):
    return (a + math.pi) % math.tau - math.pi


def estimate_positions(phi: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``P [...]`` (float) with ``P * w ≡ phi (mod 2π)``, and the worst phase residual ``[...]``.

    ``phi [..., n]``: angles (radians, wrapped); ``w [n]``: inverse frequencies (radians per position).
    Unwraps across frequencies: the lowest gives a coarse, unambiguous position (|P w_min| < π), each
    higher one refines it (RoPE's highest, 1 rad per position, last).  Explains ROPE-ANGLE."""
    order = [i for i in np.argsort(w) if w[i] > 0]  # a zero frequency (proportional) tells nothing
    phi, w = phi[..., order], w[order]
    P = phi[..., 0] / w[0]
    for i in range(1, len(w)):
        k = np.round((P * w[i] - phi[..., i]) / math.tau)
        P = (phi[..., i] + math.tau * k) / w[i]
    res = np.abs(_wrap(P[..., None] * w - phi)).max(axis=-1)
    return P, res


def _rope_models(ctx: _Ctx) -> list[Candidate]:
    p = ctx.p
    cands: list[Candidate] = []
    tensors = [n for n in ctx.bad if n in ("q", "k")]
    for sub in [[n] for n in tensors] + ([tensors] if len(tensors) == 2 else []):
        cands.append((f"{' and '.join(sub)} {'is' if len(sub) == 1 else 'are'} returned unrotated (the output "
                      "equals the input)", lambda sub=sub: {n: ctx.x[n] for n in sub}))
    for other in ("half", "interleaved") if tensors and ctx.op.startswith("rope") else ():
        if other != p.pairing:
            cands.append((f"{other} pairs applied where {p.pairing} pairs are specified",
                          lambda o=other: ctx.ref(p.model_copy(update={"pairing": o}))))
    if ctx.op == "rope.inv_freq":
        return cands + _inv_freq_models(ctx)
    calls = _reference_calls(ctx)
    _effective(ctx, calls, tensors)
    return cands + _rotation_models(ctx, calls)


def _rotation_models(ctx: _Ctx, calls: list[_Call]) -> list[Candidate]:
    """Models of the effective cos/sin: attention factor, sin sign, positions, frequencies, θ."""
    cands: list[Candidate] = []
    ae = np.concatenate([np.hypot(c.ce, c.se).ravel() for c in calls])
    ar = np.concatenate([np.hypot(c.c, c.s).ravel() for c in calls])
    amp, aref = float(np.median(ae)), float(np.median(ar))
    scale = amp / aref if aref > 0 else 1.0
    mag = ""
    if aref > 0 and abs(scale - 1) > 2e-3 and np.std(ae) < 1e-2 * max(amp, 1e-30):
        ctx.af = float(_sig(amp))
        mag = (f"attention factor {_sig(amp)} where {_sig(aref)} is specified (cos and sin have magnitude "
               f"{_sig(amp)}{'; the factor is dropped?' if abs(amp - 1) < 1e-3 else ''})")
        if ctx.op == "rope.apply_with_cos_sin":
            mag = f"the given cos/sin are applied with magnitude {_sig(amp)}, not their own {_sig(aref)} (rescaled?)"
        cands.append((mag, lambda: _emit(ctx, calls, [(c.c * scale, c.s * scale) for c in calls])))
    prefix = mag + "; " if mag else ""
    phe = [np.arctan2(c.se, c.ce) for c in calls]
    phr = [np.arctan2(c.s, c.c) for c in calls]
    if all(np.abs(_wrap(e + r)).max() < 0.05 for e, r in zip(phe, phr)) and \
            any(np.abs(_wrap(e - r)).max() > 0.05 for e, r in zip(phe, phr)):
        turn = ("+φ where -φ is specified (ROPE-ROTATION-NEGATIVE: a standard rotate_half?)"
                if _sin_sign(ctx) < 0 and ctx.op != "rope.cos_sin" and ctx.op != "rope.cos_sin_calls"
                else "-φ where +φ is specified")
        cands.append((prefix + f"sin has the wrong sign: the rotation runs in the other direction (angle {turn})",
                      lambda: _emit(ctx, calls, [(c.c * scale, -c.s * scale) for c in calls])))
    if ctx.op.startswith("mrope"):  # [3, B, T] positions: the same shift on every axis
        cands += [(prefix + f"positions are the specified ones {k:+d} on every token and axis", lambda k=k: ctx.ref(
            inputs={**ctx.x, "position_ids": np.asarray(ctx.x["position_ids"]) + k})) for k in _K]
    if all(c.pid is not None and c.w is not None for c in calls):
        cands += _position_models(ctx, calls, phe, scale, prefix)
        cands += _theta_models(ctx, calls, phe, prefix)
    return cands


def _scaled(ctx: _Ctx, **update):
    """The case's RoPE parameters updated, with the attention factor found (if any)."""
    return ctx.p.model_copy(update={**update, **({"attention_factor": ctx.af} if ctx.af else {})})


def _implied_positions(ctx: _Ctx, calls: list[_Call], P: list[np.ndarray]) -> Outputs:
    """The reference at other positions (``P`` per call), with the attention factor found (if any)."""
    keys = ["position_ids" + c.key for c in calls]
    return ctx.ref(_scaled(ctx), {**ctx.x, **dict(zip(keys, P))})


def _position_models(ctx: _Ctx, calls: list[_Call], phe, scale: float, prefix: str) -> list[Candidate]:
    cands: list[Candidate] = []
    shifted = [(f"positions are the specified ones {k:+d} on every token (frequencies of the shifted positions)",
                lambda k=k: _implied_positions(ctx, calls, [c.pid + k for c in calls])) for k in _K]
    est = [estimate_positions(e, c.w) for e, c in zip(phe, calls)]
    P = [e[0] for e in est]
    if max(float(r.max()) for _, r in est) > 0.2:
        return shifted  # the frequencies differ too (they depend on the positions: dynamic, longrope)
    if all(np.abs(q - np.round(q)).max() < 0.1 for q in P):
        Pi = [np.round(q).astype(np.int64) for q in P]
        if any((q != c.pid).any() for q, c in zip(Pi, calls)):
            text = describe_positions([c.pid for c in calls], Pi, [c.key for c in calls])
            cands.append((prefix + text, lambda: _implied_positions(ctx, calls, Pi)))
    pid = np.concatenate([c.pid.ravel() for c in calls]).astype(float)
    pe = np.concatenate([q.ravel() for q in P])
    nz = np.abs(pid) > 0
    if nz.any():
        ratio = pe[nz] / pid[nz]
        r = float(np.median(ratio))
        if abs(r) > 1e-6 and abs(r - 1) > 1e-4 and np.abs(ratio - r).max() < 2e-3 * abs(r):
            cands.append((prefix + _ratio_sentence(ctx.p, r),
                          lambda: _emit(ctx, calls, [_rotated(c, r, scale) for c in calls])))
    return cands


def _rotated(c: _Call, r: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The reference's cos/sin of call ``c`` with every angle times ``r``, magnitude times ``scale``."""
    a, phi = scale * np.hypot(c.c, c.s), c.pid[..., None] * c.w * r
    return a * np.cos(phi), a * np.sin(phi)


def _ratio_sentence(p, r: float) -> str:
    text = f"frequencies × {_sig(r)} (every angle is {_sig(r)} times the specified one)"
    f = getattr(p, "factor", None) if getattr(p, "rope_type", None) == "linear" else None
    if f and (abs(r * f - 1) < 1e-3 or abs(r - f) < 1e-3 * f):
        text += f": the linear factor {_sig(f)} {'applied twice' if r < 1 else 'not applied'}?"
    elif abs(r - round(r)) < 1e-3 or abs(1 / r - round(1 / r)) < 1e-3:
        text += f": positions or frequencies scaled by {_sig(r if r >= 1 else 1 / r)}?"
    return text


def describe_positions(pids: list[np.ndarray], used: list[np.ndarray], keys: list[str]) -> str:
    """One sentence comparing the positions used with the specified ones (ROPE-ANGLE, POS-*).

    ``pids``/``used``: per call, integer ``[B, T]``; ``keys``: the calls' suffixes ("" or ".<k>").
    """
    d = [u - p for u, p in zip(used, pids)]
    allv = np.concatenate([x.ravel() for x in d])
    if (allv == allv[0]).all():
        return f"positions are the specified ones {int(allv[0]):+d} on every token"
    if len(d) > 1 and not d[0].any() and all((x == d[1].flat[0]).all() for x in d[1:]):
        return (f"positions are the specified ones {int(d[1].flat[0]):+d} on decode steps "
                f"(every call after the first; the first call is right)")
    B, T = pids[0].shape
    if all((u == np.arange(u.shape[-1])).all() for u in used):
        return (f"positions restart at 0 (positions 0..{T - 1} instead of "
                f"{', '.join(f'{int(p[b, 0])}..' for p in pids for b in range(p.shape[0]))})")
    if B > 1 and all((u == u[:1]).all() for u in used) and any((p != p[:1]).any() for p in pids):
        return "every batch row uses row 0's positions"
    if all((x == x[:, :1]).all() for x in d):
        per = ", ".join(f"row {b}{k}: {int(x[b, 0]):+d}" for x, k in zip(d, keys) for b in range(x.shape[0]))
        return f"positions are off by a constant per row ({per})"
    if all(not x[:, :-1].any() and (x[:, -1] == d[0][0, -1]).all() for x in d):
        return f"positions are the specified ones {int(d[0][0, -1]):+d} on the last token of every row"
    wrong = [(k, b, t, int(p[b, t]), int(u[b, t])) for p, u, k in zip(pids, used, keys)
             for b, t in zip(*np.nonzero(u != p))]
    lo, right = min(w[3] for w in wrong), [int(v) for p, u in zip(pids, used) for v in p[u == p]]
    head = f"only positions >= {lo} are off; " if right and max(right) < lo else ""
    shown = ", ".join(f"[{b}, {t}]{k} {pp} -> {uu}" for k, b, t, pp, uu in wrong[:4]) + ", ..." * (len(wrong) > 4)
    return f"{head}the positions used differ from the specified ones at {len(wrong)} tokens: {shown}"


def estimate_frequencies(phi: np.ndarray, pid: np.ndarray) -> tuple[np.ndarray, float]:
    """Angular frequencies ``w [n]`` (radians per position) with ``pid * w ≡ phi (mod 2π)``, and the
    worst phase residual.  ``phi [N, n]``: angles of N tokens; ``pid [N]``: their positions.  Unwraps
    across tokens by increasing |position|.  Explains ROPE-INV-FREQ / ROPE-ANGLE."""
    order = [i for i in np.argsort(np.abs(pid)) if pid[i] != 0]
    w = phi[order[0]] / pid[order[0]]
    for i in order[1:]:
        k = np.round((pid[i] * w - phi[i]) / math.tau)
        w = (phi[i] + math.tau * k) / pid[i]
    return w, float(np.abs(_wrap(np.multiply.outer(pid, w) - phi)).max())


def _theta_models(ctx: _Ctx, calls: list[_Call], phe, prefix: str) -> list[Candidate]:
    """θ fit for default-type RoPE: ``w_i = θ' ** (-2i / rotary_dim)`` (ROPE-INV-FREQ)."""
    p = ctx.p
    if ctx.op.startswith("rope.") and p.rope_type != "default":  # a scaled type with plain θ frequencies
        plain = RopeParams(head_dim=p.head_dim, rotary_dim=p.rotary_dim, rope_theta=p.rope_theta,
                           pairing=p.pairing, rotation=p.rotation, attention_factor=ctx.af or p.attention_factor)
        return [(prefix + f"the rope_type {p.rope_type!r} scaling is not applied (plain θ "
                 f"{_sig(p.rope_theta, 6)} frequencies)", lambda: ctx.ref(plain))]
    if not ctx.op.startswith("rope."):
        return []
    n = calls[0].w.shape[-1]
    pid = np.concatenate([c.pid.reshape(-1) for c in calls]).astype(float)
    if n < 2 or not (pid != 0).any():
        return []
    w, res = estimate_frequencies(np.concatenate([x.reshape(-1, n) for x in phe]), pid)
    if res > 0.2 or not (w > 0).all():
        return []
    slope, icpt = np.polyfit(2.0 * np.arange(n) / p.rdim, np.log(w), 1)
    theta = math.exp(-slope)
    if abs(icpt) > 1e-3 or abs(theta / p.rope_theta - 1) < 1e-4:
        return []  # not a θ^(-2i/r) law with w_0 = 1, or θ itself (another model's business)
    return _theta_candidates(ctx, theta, prefix)


def _theta_candidates(ctx: _Ctx, theta: float, prefix: str = "") -> list[Candidate]:
    """The reference at θ ``theta`` (rounded first: the θ a config would hold), ROPE-INV-FREQ."""
    p, cands = ctx.p, []
    for guess in dict.fromkeys((float(_sig(theta, 2)), float(_sig(theta, 3)), theta)):
        q = _scaled(ctx, rope_theta=guess)
        cands.append((prefix + f"θ (rope_theta) {_sig(guess, 6)} where {_sig(p.rope_theta, 6)} is specified",
                      lambda q=q: ctx.ref(q)))
    return cands


def _inv_freq_models(ctx: _Ctx) -> list[Candidate]:
    """inv_freq ``[n]``: a uniform ratio, or another θ (ROPE-INV-FREQ)."""
    w, wr = ctx.out["inv_freq"].astype(float), ctx.g.outputs["inv_freq"]
    cands: list[Candidate] = []
    r = w / wr
    if np.ptp(r) < 1e-5 * abs(r[0]):
        cands.append((_ratio_sentence(ctx.p, float(r[0])), lambda: {"inv_freq": wr * float(r[0])}))
    p = ctx.p
    if getattr(p, "rope_type", None) == "default" and len(w) > 1 and (w > 0).all():
        e = 2.0 * np.arange(len(w)) / p.rdim
        cands += _theta_candidates(ctx, math.exp(-np.polyfit(e, np.log(w), 1)[0]))
    return cands


# ---- tables and biases ---------------------------------------------------------------------------
_TABLES = ("wpe", "position_embeddings", "table")


def _int_models(ctx: _Ctx) -> list[Candidate]:
    """Integer outputs off by a constant (rows, positions, buckets)."""
    cands: list[Candidate] = []
    for n in ctx.bad:
        ref, got = ctx.g.outputs[n], ctx.out[n]
        if ref.dtype.kind not in "iu" or got.dtype.kind not in "iu":
            continue
        m = np.broadcast_to(np.asarray(ctx.g.outputs.get(f"{n}.compared", True), bool), ref.shape)
        # exact differences (Python ints: an output near the int64 range must not wrap around)
        d = np.array([int(a) - int(b) for a, b in zip(got[m].ravel().tolist(), ref[m].ravel().tolist())], object)
        if d.size and (d == d[0]).all() and abs(int(d[0])) < 2 ** 53:
            hint = {2: " (OPT's offset 2 applied twice?)", -2: " (OPT's offset 2 not applied?)"}.get(
                int(d[0]), "") if ctx.op == "learned.opt_rows" else ""
            cands.append((f"{n} are the specified ones {int(d[0]):+d} everywhere{hint}",
                          lambda n=n, c=int(d[0]): {n: ctx.g.outputs[n] + c}))
    return cands


def _shift_sentence(ctx: _Ctx, k: int, what: str) -> str:
    way = "later" if k > 0 else "earlier"
    hint = " (OPT offset applied twice?)" if "opt" in ctx.op and k == 2 else ""
    return (f"{what} read {abs(k)} row{'s' if abs(k) > 1 else ''} {way}: row r {'+' if k > 0 else '-'} {abs(k)} "
            f"where row r is specified{hint}")


def _learned_models(ctx: _Ctx) -> list[Candidate]:
    """LEARNED-*: the rows of the position table read ``k`` too late or too early."""
    cands = _int_models(ctx)
    for n in [n for n in _TABLES if n in ctx.x and np.ndim(ctx.x[n]) == 2][:1]:
        t = np.asarray(ctx.x[n], float)
        for k in _K:
            cands.append((_shift_sentence(ctx, k, f"the position table {n!r} is"),
                          lambda k=k: ctx.ref(inputs={**ctx.x, n: np.roll(t, -k, axis=0)})))
    return cands


def _sinusoidal_models(ctx: _Ctx) -> list[Candidate]:
    """SIN-*: the table rows of other positions."""
    cands = _int_models(ctx)
    key = next((k for k in ("position_ids", "cache_length") if k in ctx.x), None)
    if key is not None and ctx.op != "sinusoidal.fairseq_positions":
        for k in _K:
            cands.append((_shift_sentence(ctx, k, "the sinusoid table is"),
                          lambda k=k: ctx.ref(inputs={**ctx.x, key: np.asarray(ctx.x[key]) + k})))
    return cands


def _alibi_models(ctx: _Ctx) -> list[Candidate]:
    """ALIBI-SLOPES: per-head slopes (fitted from the bias), as a ratio, another head count or bias max."""
    p = ctx.p
    m_ref = alibi.slopes(p)
    if ctx.op == "alibi.slopes":
        m, ref_bias = ctx.out["slopes"].astype(float), None
    else:
        ref_bias = ctx.g.outputs["bias"]
        shape = [1] * ref_bias.ndim
        shape[-3] = p.num_heads
        D = ref_bias / m_ref.reshape(shape)
        cm = np.broadcast_to(np.asarray(ctx.g.outputs.get("bias.compared", True), bool), D.shape)
        axes = tuple(i for i in range(D.ndim) if i != D.ndim - 3)
        y = ctx.out["bias"].astype(float)
        m = (np.where(cm, y * D, 0).sum(axes)) / np.where(cm, D * D, 0).sum(axes)

    def implied(slopes):
        return {"slopes": np.asarray(slopes, float)} if ref_bias is None else \
            {"bias": ref_bias / m_ref.reshape(shape) * np.asarray(slopes).reshape(shape)}
    cands: list[Candidate] = []
    r = m / m_ref
    if np.ptp(r) < 1e-3 * abs(r).max():
        cands.append((f"slopes are the specified ones × {_sig(float(np.median(r)))}",
                      lambda: implied(m_ref * float(np.median(r)))))
    for n in (n for n in range(1, max(4 * p.num_heads, 64) + 1) if n != p.num_heads):
        mn = alibi.slopes(AlibiParams(num_heads=n, alibi_bias_max=p.alibi_bias_max))
        if np.allclose(mn[:p.num_heads], m[:n], rtol=1e-3):  # fewer heads: the rest as specified
            full = np.concatenate([mn, m_ref[n:]])[:p.num_heads]
            cands.append((f"slopes of {n} heads used for {p.num_heads}", lambda full=full: implied(full)))
    e, er = -np.log2(m), -np.log2(m_ref)
    if (m > 0).all() and np.ptp(e / er) < 1e-3:
        bmax = p.alibi_bias_max * float(np.median(e / er))
        cands.append((f"alibi_bias_max {_sig(bmax)} where {_sig(p.alibi_bias_max)} is specified",
                      lambda: implied(np.exp2(-er * bmax / p.alibi_bias_max))))
    return cands


def _t5_models(ctx: _Ctx) -> list[Candidate]:
    """T5-BUCKET-* / T5-BIAS: the bucket each slot used, against the specified buckets."""
    p, x = ctx.p, ctx.x
    if ctx.op == "t5.buckets":
        rel, used, table = np.asarray(x["relative_position"]), ctx.out["buckets"].astype(np.int64), None
    else:
        q, k, cl = (int(x[n]) for n in ("query_length", "key_length", "cache_length"))
        rel = t5.relative_positions(q, k, cl)
        table = np.asarray(x["table"], float)  # [NB, H]
        y = ctx.out["bias"].astype(float)  # [H, Tq, Tk]
        yf = y.reshape(y.shape[0], -1)  # nearest table row per slot, |t|^2 - 2 t.y: [NB, Tq*Tk] in memory
        used = np.argmin((table ** 2).sum(1)[:, None] - 2 * table @ yf, axis=0).reshape(y.shape[1:])
    spec = t5.buckets(rel, p)

    def implied(b):
        if table is None:
            return {"buckets": b}
        if b.min() < 0 or b.max() >= table.shape[0]:
            return None
        return {"bias": np.transpose(table[b], (2, 0, 1))}
    cands: list[Candidate] = []
    d = (used - spec)[used != spec]
    if d.size:
        c = int(np.median(d))
        capped = np.clip(spec + c, 0, p.num_buckets - 1)
        cands.append((f"buckets are the specified ones {int(c):+d} everywhere", lambda: implied(spec + c)))
        cands.append((f"buckets are the specified ones {int(c):+d} (kept within 0..{p.num_buckets - 1})",
                       lambda: implied(capped)))
    cands.append(("the relative position's direction is flipped (query - key instead of key - query)",
                  lambda: implied(t5.buckets(-rel, p))))
    other = "causal" if p.bidirectional else "bidirectional"
    cands.append((f"{other} buckets where {'bidirectional' if p.bidirectional else 'causal'} are specified",
                  lambda: implied(t5.buckets(rel, p.model_copy(update={"bidirectional": not p.bidirectional})))))
    for k in _K:
        cands.append((f"relative positions off by {int(k):+d} (key - query {int(k):+d}: a cache length "
                      f"off by {int(-k):+d}?)", lambda k=k: implied(t5.buckets(rel + k, p))))
    return cands


_MODELS: dict[str, Callable[[_Ctx], list[Candidate]]] = {
    "rope": _rope_models, "mrope": _rope_models, "learned": _learned_models, "sinusoidal": _sinusoidal_models,
    "alibi": _alibi_models, "t5": _t5_models, "position_ids": _int_models}


# ---- fallback ------------------------------------------------------------------------------------
def _ratios(ctx: _Ctx, n: str) -> np.ndarray:
    """Element-wise |err|/bound of output ``n`` (inf for NaN/inf or exact mismatches)."""
    ref, got = ctx.g.outputs[n], ctx.out[n]
    m = np.broadcast_to(np.asarray(ctx.g.outputs.get(f"{n}.compared", True), bool), ref.shape)
    if np.issubdtype(ref.dtype, np.integer):
        return np.where((got.astype(np.int64) != ref) & m, np.inf, 0.0)
    dt = "float32" if n in families.operation(ctx.op).float32_outputs else ctx.dtype
    b = np.broadcast_to(bound(dt, ctx.g.dtype_scales.get(n, 0.0), ctx.g.angle_scales.get(n, 0.0),
                              ctx.g.angle_based), ref.shape)
    err = np.abs(got.astype(float) - ref)
    r = np.where(err == 0, 0.0, np.where(b == 0, np.inf, err / np.where(b == 0, 1.0, b)))
    r = np.where(np.isfinite(got.astype(float)), r, np.inf)
    return np.where(m, r, 0.0)


def _token_axis(ctx: _Ctx, n: str) -> Optional[int]:
    nd = ctx.g.outputs[n].ndim
    return 2 if n in ("q", "k") and nd == 4 else 1 if nd == 3 and "position_ids" in ctx.x else None


def _fallback(ctx: _Ctx) -> list[str]:
    """Where the output is wrong: outputs, batch rows, positions (with the error's growth), dims."""
    lines = []
    for n in ctx.bad:
        r = _ratios(ctx, n)
        bad = r > 1
        parts = [f"{n}: {int(bad.sum())} of {bad.size} elements wrong"]
        nonfinite = int((~np.isfinite(ctx.out[n].astype(float))).sum()) if ctx.out[n].dtype.kind == "f" else 0
        parts += [f"{nonfinite} NaN/inf"] if nonfinite else []
        if bad.ndim >= 2 and bad.shape[0] > 1:
            rows = np.nonzero(bad.reshape(bad.shape[0], -1).any(1))[0]
            if len(rows) < bad.shape[0]:
                parts.append(f"only batch row(s) {', '.join(map(str, rows))}")
        ax = _token_axis(ctx, n)
        pid = np.asarray(ctx.x.get("position_ids")) if "position_ids" in ctx.x else None
        if ax is not None and pid is not None and pid.ndim == 2 and pid.shape == (bad.shape[0], bad.shape[ax]):
            parts += _by_position(bad, r, ax, pid)
        if n in ("q", "k") and ctx.op.startswith("rope.") and hasattr(ctx.p, "rdim"):
            dims = np.nonzero(bad.reshape(-1, bad.shape[-1]).any(0))[0]
            if len(dims) and dims.min() >= ctx.p.rdim:
                parts.append(f"only the pass-through dims >= {ctx.p.rdim} (ROPE-PARTIAL)")
            elif len(dims) and dims.max() < ctx.p.rdim < bad.shape[-1]:
                parts.append(f"only the rotated dims < {ctx.p.rdim}")
        finite = r[np.isfinite(r)]
        if finite.size and finite.max() > 1:
            parts.append(f"worst |err|/bound {finite.max():.3g}")
        lines.append("; ".join(parts))
    return lines


def _by_position(bad: np.ndarray, r: np.ndarray, ax: int, pid: np.ndarray) -> list[str]:
    """Which positions are wrong, and whether the error grows with position."""
    other = tuple(i for i in range(bad.ndim) if i not in (0, ax))
    tok_bad = bad.any(axis=other) if other else bad  # [B, T]
    rr = np.where(np.isfinite(r), r, 0.0)
    tok_err = rr.max(axis=other) if other else rr
    if not tok_bad.any():
        return []
    out = []
    lo = int(pid[tok_bad].min())
    if (~tok_bad).any() and int(pid[~tok_bad].max()) < lo:
        out.append(f"only positions >= {lo} are wrong")
    elif tok_bad.all():
        out.append("at every position")
    else:
        out.append(f"at positions {sorted(set(int(v) for v in pid[tok_bad]))[:6]}")
    pv, ev = pid.ravel().astype(float), tok_err.ravel()
    if pv.size >= 3 and np.ptp(pv) > 0 and np.ptp(ev) > 0 and np.corrcoef(pv, ev)[0, 1] > 0.8:
        out[-1] += " (error grows with position: a precision bug?)"
    # a short error-by-position table: the batch row of the first wrong token, from that token on
    b, t = (int(v) for v in np.argwhere(tok_bad)[0])
    fin = np.isfinite(r)
    tok_inf = ~(fin.all(axis=other) if other else fin)  # a NaN/inf or an exact mismatch in the token
    span = range(t, min(tok_bad.shape[1], t + _TABLE_TOKENS))
    cells = ", ".join(f"{int(pid[b, j])}: " + ("inf" if tok_inf[b, j] else "0" if tok_err[b, j] == 0 else
                                              f"{float(tok_err[b, j]):.2g}") for j in span)
    out.append(f"row {b} |err|/bound by position from its first wrong token (token {t}; max over the other "
               f"axes): {cells}"
               + (" ..." if span.stop < tok_bad.shape[1] else ""))
    return out


#: Tokens the error-by-position table of a failure shows.
_TABLE_TOKENS = 8
