"""The M-RoPE family's oracle-free check: text tokens (t = h = w) reduce to the same adapter's 1-D RoPE."""

from __future__ import annotations

import numpy as np

from posenc.harness.checks import Unsupported, call_adapter, clauses_of, fail, load_golden, require_dtype, run_op
from posenc.spec.tolerance import bound

from . import check


@check("mrope_text_reduces_to_rope", invariant="text_reduces", ops=("mrope.apply",))
def mrope_text_reduces_to_rope(request, adapter, device, dtype, case):
    """Text tokens (t = h = w): the adapter's M-RoPE equals the SAME adapter's plain half-pairing
    RoPE with the same head_dim, rotary_dim, rope_theta, rope_type and scaling fields
    (``params.rope``) at those positions."""
    require_dtype(adapter, dtype)
    cl = clauses_of(request)
    p = case.params
    g = load_golden(case.id)
    pid3 = g.inputs["position_ids"]
    if not (np.array_equal(pid3[0], pid3[1]) and np.array_equal(pid3[0], pid3[2])):
        raise Unsupported("case has vision tokens (t, h, w differ)")
    rp = p.rope

    def go():  # both contract-checked (type, dtype, device, shape) before they are compared
        m = run_op(adapter, "mrope.apply", p, {"q": g.inputs["q"], "k": g.inputs["k"], "position_ids": pid3}, dtype, device)
        r = run_op(adapter, "rope.apply", rp, {"q": g.inputs["q"], "k": g.inputs["k"], "position_ids": pid3[0]},
                   dtype, device)
        return [t.astype(np.float64) for t in (m["q"], m["k"], r["q"], r["k"])]
    mq, mk, rq, rk = call_adapter(adapter, case, dtype, cl, go)
    for name, m, r in (("q", mq, rq), ("k", mk, rk)):
        sc, an = g.dtype_scales[name], g.angle_scales[name]
        excess = np.abs(m - r) - 2 * bound(dtype, sc, an, True)
        if not (excess <= 0).all():  # NaN outputs fail too
            i = tuple(int(v) for v in np.unravel_index(int(np.argmax(excess)), excess.shape))
            fail(cl, adapter, case, dtype, f"text tokens (t = h = w): M-RoPE {name} must equal the adapter's own 1-D "
                 f"RoPE at those positions; worst at {list(i)}: {m[i]:.6g} != {r[i]:.6g} (position "
                 f"{int(pid3[0][i[0], i[2]])})")
