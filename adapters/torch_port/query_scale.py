"""Position-dependent query scaling (QSCALE-*): q times ``1 + beta ln(1 + floor(p' / L))``, p' the
position id (Mistral) or p + 1 (Llama 4), computed in float32 (float64 for float64 activations)."""

from __future__ import annotations

import torch

from ._common import compute_dtype


class Ops:
    """Query-scaling operation of the torch port."""

    def query_scale_apply(self, q, position_ids, params):
        p = position_ids + (1 if params.form == "llama4" else 0)
        cd = compute_dtype(q.dtype)
        s = 1 + params.beta * torch.log1p(torch.div(p, params.scale_length, rounding_mode="floor").to(cd))
        return (q.to(cd) * s[:, None, :, None]).to(q.dtype)
