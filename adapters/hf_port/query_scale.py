"""Position-dependent query scaling (QSCALE-MISTRAL) through transformers' own
``get_llama_4_attn_scale`` (Ministral 3 / Mistral 4), applied as Ministral3Attention.forward
applies it: the factor cast to q's dtype, then multiplied."""

from __future__ import annotations

import torch
from transformers.models.ministral3 import modeling_ministral3 as hf_ministral3

from ..base import Unsupported


class Ops:
    """The query-scaling operation of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    @torch.no_grad()
    def query_scale_apply(self, q, position_ids, params):
        if params.form != "mistral":
            raise Unsupported("Llama 4's temperature tuning is inline in Llama4TextAttention.forward (no function "
                              "to call) and reads the cache position, not position_ids")
        s = hf_ministral3.get_llama_4_attn_scale(position_ids, params.beta, params.scale_length)
        return q * s.to(q.dtype)
