"""The axial RoPE family's oracle-free check: the q.k score depends only on the displacement
between the two patches (AXIAL-RELATIVE)."""

from __future__ import annotations

import numpy as np

from posenc import families
from posenc.harness.checks import call_adapter, clauses_of, fail, invariant_clauses, load_golden, require_dtype, run_op
from posenc.reference import axial
from posenc.spec.tolerance import bound

from . import check

#: q's and k's coordinates (height, width; with three axes temporal first) and the shifts applied
#: to both, per axis: the axes differ, so a score that depends on one axis's absolute value fails
_Q, _K = (5, 2, 9), (1, 7, 3)
_SHIFTS = ((1000, 37, 250), (65536, 4096, 7))


def _relative_clauses(c):
    if getattr(c.params, "coordinates", "index") != "index":
        return []  # the shifts below leave a centred grid (patch indices only); no centred case claims it
    wanted = invariant_clauses("axial_relative")
    return [x for x in c.clauses if x in wanted]


@check("axial_relative", invariant="axial_relative", ops=("axial.apply",), clauses=_relative_clauses)
def axial_relative(request, adapter, device, dtype, case):
    """<R(P) q, R(P') k> depends only on P - P': q at P from one call's q output, k at P' from
    another call's k output, then both shifted by a different constant on each axis."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    g = load_golden(case.id)
    q, k = g.inputs["q"][:1, :1, :1], g.inputs["k"][:1, :1, :1]
    A = p.num_axes

    def pos(coords, shift):
        start = 0 if A == 3 else 1  # two axes: (h, w) = coords[1:], shift[:2]
        return np.asarray([[[coords[start + a] + shift[a]]] for a in range(A)], dtype=np.int64)

    def one(pid, name):
        def go():
            out = run_op(adapter, "axial.apply", p, {"q": q, "k": k, "position_ids": pid}, dtype, device)
            return out[name].astype(np.float64)
        return call_adapter(adapter, case, dtype, cl, go)

    dots, tols = [], []
    for shift in ((0, 0, 0),) + _SHIFTS:
        pq, pk = pos(_Q, shift), pos(_K, shift)
        yq, yk = one(pq, "q"), one(pk, "k")
        dots.append(float(np.sum(yq * yk)))
        bq = bound(dtype, *families.reference_of("axial.apply").scales(p, {"q": q, "k": k, "position_ids": pq})["q"], True)
        bk = bound(dtype, *families.reference_of("axial.apply").scales(p, {"q": q, "k": k, "position_ids": pk})["k"], True)
        rq = np.abs(axial.apply(q, k, pq, p)[0])  # the reference's magnitudes: a NaN output never widens the bound
        rk = np.abs(axial.apply(q, k, pk, p)[1])
        tols.append(float(np.sum(bq * (rk + bk) + rq * bk)))
    for d, t, s in zip(dots[1:], tols[1:], _SHIFTS):
        if not abs(d - dots[0]) <= t + tols[0]:  # NaN outputs fail too
            fail(cl, adapter, case, dtype, f"<R(P) q, R(P') k> must depend only on P - P': P = {_Q[3 - A:]}, "
                 f"P' = {_K[3 - A:]} gives {dots[0]:.6g}, both shifted by {s[:A]} give {d:.6g} "
                 f"(allowed difference {t + tols[0]:.3g})")
