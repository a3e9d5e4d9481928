"""ALiBi (ALIBI-*) through BLOOM's and MPT's builders."""

from __future__ import annotations

import torch
from transformers.models.bloom import modeling_bloom as hf_bloom
from transformers.models.mpt import modeling_mpt as hf_mpt

from ..base import Unsupported
from ..torch_adapter import DTYPES


#: ``MptConfig().max_seq_len``: the length MptModel builds its ALiBi table for.
MPT_DEFAULT_MAX_SEQ_LEN = 2048


def _bloom_bias_max(params) -> None:
    if params.alibi_bias_max != 8:
        raise Unsupported(f"BLOOM's _get_alibi_slopes hard-codes the 8 of 2^(-8k/n) "
                          f"(alibi_bias_max {params.alibi_bias_max:g} is MPT's parameter)")


class Ops:
    """The ALiBi operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    @torch.no_grad()
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES from HF's own tables (float32, whatever the activations).

        form bloom: ``build_alibi_tensor`` on the mask ``[[1, 1]]`` gives ``m * pos`` with pos
        ``[0, 1]``: its column 1 is the slopes (``_get_alibi_slopes``, exactly).  Other forms:
        ``build_mpt_alibi_tensor(H, 2, alibi_bias_max)`` gives ``m * (j - 1)``: its column 0
        negated is the slopes.
        """
        H = params.num_heads
        if params.form == "bloom":
            _bloom_bias_max(params)
            mask = torch.ones(1, 2, dtype=torch.int64, device=device)
            return hf_bloom.build_alibi_tensor(mask, H, torch.float32)[:, 0, 1]
        return -hf_mpt.build_mpt_alibi_tensor(H, 2, params.alibi_bias_max, device=device)[:, 0, 0]

    @torch.no_grad()
    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-BLOOM, ALIBI-MPT through HF's builders; canonical ``[B, H, Tq, Tk]`` / ``[H, Tq, Tk]``."""
        dt, H = DTYPES[dtype], params.num_heads
        if params.form == "bloom":
            _bloom_bias_max(params)
            B, tk = attention_mask.shape
            alibi = hf_bloom.build_alibi_tensor(attention_mask, H, dt)  # [B*H, 1, Tk] in dt
            return alibi.view(B, H, 1, tk).expand(B, H, query_length, tk).contiguous()
        if params.form == "mpt":
            n = max(MPT_DEFAULT_MAX_SEQ_LEN, key_length)  # MptModel builds the table over config.max_seq_len
            table = hf_mpt.build_mpt_alibi_tensor(H, n, params.alibi_bias_max, device=device)  # [H, 1, n]
            # MptAttention.forward: position_bias[:, max(0, size(1) - q_len):, max(0, size(2) - k_len):]
            bias = table[:, max(0, table.size(1) - query_length):, max(0, table.size(2) - key_length):]
            return bias.expand(H, query_length, key_length).to(dt).contiguous()
        raise Unsupported(f"ALiBi form {params.form!r}: transformers builds only BLOOM's (+m pos_j, "
                          "build_alibi_tensor) and MPT's (m (j - (L - 1)), build_mpt_alibi_tensor) row-constant "
                          "tables; no model there has the "
                          + ("relative causal -m (i - j) table" if params.form == "causal" else
                             "symmetric (encoder) -m |i - j| bias"))
