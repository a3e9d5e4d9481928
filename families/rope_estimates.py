"""RoPE's estimators: the positions and the frequencies behind observed rotation angles (wrapped to
(-π, π]), for the inference models of :mod:`posenc.families.rope_inference` and M-RoPE's."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from posenc.spec.tolerance import EPS


def _wrap(a):
    return (a + math.pi) % math.tau - math.pi


def estimate_positions(phi: np.ndarray, w: np.ndarray, known: Optional[np.ndarray] = None,
                       p_max: float = 0.0, near: Optional[np.ndarray] = None,
                       slack: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``P [...]`` (float) with ``P * w ≡ phi (mod 2π)``, and the worst phase residual ``[...]``.

    ``phi [..., n]``: angles (radians, wrapped); ``w [n]``: inverse frequencies (radians per position);
    ``known [..., n]``: the angles that were seen (default all; an unseen one is left out).
    Unwraps across frequencies: the lowest gives a coarse position, each higher one refines it
    (RoPE's highest, 1 rad per position, last).  The lowest is unambiguous while ``|P w_min| < π``;
    beyond that every turn of it up to ``|P| <= p_max`` is tried (at most :data:`MAX_TURNS`), and
    the one the other frequencies fit best is kept.  ``near [...]`` (the specified positions): every
    row's turns are tried, and of those whose residual is within ``slack`` (radians: what the
    tolerance cannot tell apart) of the best, the one nearest ``near`` is kept -- with few
    frequencies a far position has many that fit (head_dim 4 at 70000: a turn every 77 positions).
    Explains ROPE-ANGLE."""
    w = np.asarray(w, float)
    shape, n = phi.shape[:-1], phi.shape[-1]
    phi = np.asarray(phi, float).reshape(-1, n)
    seen = np.ones(phi.shape, bool) if known is None else np.broadcast_to(known, shape + (n,)).reshape(phi.shape)
    want = None if near is None else np.broadcast_to(np.asarray(near, float), shape).reshape(-1)
    P, res = np.zeros(len(phi)), np.full(len(phi), np.inf)
    for mask in {tuple(m) for m in seen}:  # the tokens that saw the same frequencies, together
        rows = np.flatnonzero((seen == np.array(mask)).all(axis=1))
        o = np.array([i for i in np.argsort(w) if w[i] > 0 and mask[i]], int)  # a zero frequency tells nothing
        if not len(o):
            continue
        P[rows], res[rows] = _unwrap(phi[rows][:, o], w[o], 0)
        far = rows[res[rows] > 0.2] if want is None else rows
        k = min(math.ceil(p_max * w[o[0]] / math.tau), MAX_TURNS, int(4e6 / max(1, len(far) * len(o))) // 2)
        if len(far) and k > 0:
            P[far], res[far] = _unwrap(phi[far][:, o], w[o], k, None if want is None else want[far], slack)
    return P.reshape(shape), res.reshape(shape)


#: The most turns of the lowest frequency :func:`estimate_positions` tries each way.
MAX_TURNS = 1 << 14


def _unwrap(phi: np.ndarray, w: np.ndarray, k: int, near: Optional[np.ndarray] = None,
            slack: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`estimate_positions` of ``phi [N, n]`` at increasing ``w [n]``, trying the lowest
    frequency's angle plus ``-k..k`` turns: the best position and its residual per row (of the
    turns within ``slack`` of the best, the one nearest ``near [N]`` where given)."""
    Q = (phi[:, :1] + math.tau * np.arange(-k, k + 1)) / w[0]  # [N, turns]
    for i in range(1, len(w)):
        Q = (phi[:, i, None] + math.tau * np.round((Q * w[i] - phi[:, i, None]) / math.tau)) / w[i]
    r = np.abs(_wrap(Q[..., None] * w - phi[:, None, :])).max(axis=-1)
    if near is None:
        j = np.argmin(r, axis=1)
    else:
        tied = r <= r.min(axis=1, keepdims=True) + slack
        j = np.argmin(np.where(tied, np.abs(Q - near[:, None]), np.inf), axis=1)
    return Q[np.arange(len(Q)), j], r[np.arange(len(Q)), j]


def estimate_frequencies(phi: np.ndarray, pid: np.ndarray) -> tuple[np.ndarray, float]:
    """Angular frequencies ``w [n]`` (radians per position) with ``pid * w ≡ phi (mod 2π)``, and the
    worst phase residual.  ``phi [N, n]``: angles of N tokens; ``pid [N]``: their positions.  Unwraps
    across tokens by increasing |position|, seeded by the nearest position, and seeded by the angle
    difference of the two nearest positions (only far positions, 1000 and 1001, leave the first ambiguous);
    the lower residual is kept.
    Explains ROPE-INV-FREQ / ROPE-ANGLE."""
    order = [i for i in np.argsort(np.abs(pid)) if pid[i] != 0]

    def refine(w):
        for i in order:
            k = np.round((pid[i] * w - phi[i]) / math.tau)
            w = (phi[i] + math.tau * k) / pid[i]
        return w, float(np.abs(_wrap(np.multiply.outer(pid, w) - phi)).max())
    w, res = refine(phi[order[0]] / pid[order[0]])
    if res > 0 and len(np.unique(pid)) > 1:  # far positions only (1000, 1001): seeded by their nearest two too
        u = np.argsort(pid)
        j = int(np.argmin(np.where(np.diff(pid[u]) > 0, np.diff(pid[u]), np.inf)))
        a, b = u[j], u[j + 1]
        w2, res2 = refine(_wrap(phi[b] - phi[a]) / (pid[b] - pid[a]))  # |w| <= π / gap: RoPE's are <= 1 rad
        if res2 < res:
            w, res = w2, res2
    return w, res


def phase_slack(pid: np.ndarray, w: np.ndarray, theta: float, dtype: str) -> float:
    """The phase (radians) the tolerance rule cannot resolve on angles ``pid * w`` (``pid``: the specified
    positions, ``w [n]``: the inverse frequencies by pair, highest first): the rule's angle term at the
    largest position, ``4 eps32 |P| max_i w_i (1 + e_i ln θ)`` with ``e_i = i / n``, and its dtype term on a
    unit cos/sin, ``4 eps_eff`` (README, "Tolerance rule"; hostile review: the top frequency times
    ``1 + ln θ``, doubled, was 20-30 times that and tied every turn past position 1e6)."""
    w = np.abs(np.asarray(w, float).reshape(-1))
    ln_theta = math.log(max(float(theta), math.e))
    rate = float(np.max(w * (1 + np.arange(w.size) / max(w.size, 1) * ln_theta), initial=0))
    far = (float(np.abs(np.asarray(pid, float)).max(initial=0)) + 1) * rate
    return 4 * EPS["float32"] * far + 4 * max(EPS[dtype], EPS["float32"])
