"""Position ids (POS-*) as Llama's forward, HF generation and ``DataCollatorWithFlattening`` make them."""

from __future__ import annotations

import torch
from transformers import DataCollatorWithFlattening, LlamaConfig, LlamaForCausalLM

from posenc.spec.errors import AdapterError

from ..base import Unsupported
from ._common import _filled_cache


class Ops:
    """The position-id operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    def _lm(self, device) -> LlamaForCausalLM:
        if self._llama_lm is None:
            cfg = LlamaConfig(vocab_size=2, hidden_size=8, head_dim=8, intermediate_size=8, num_hidden_layers=1,
                              num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=1 << 20,
                              bos_token_id=None, eos_token_id=None, pad_token_id=None)
            self._llama_lm = LlamaForCausalLM(cfg).eval()
        return self._llama_lm.to(device)

    @torch.no_grad()
    def position_ids(self, rule, *, device, **x):
        """POS-PREFILL, POS-DECODE, POS-LEFT-PAD, POS-PACKED from HF code (see module docstring)."""
        if rule in ("prefill", "decode"):
            B, T = x["batch"], x["seq_len"]
            C = x.get("cache_length", 0) if rule == "decode" else 0
            lm = self._lm(device)
            seen = []
            hook = lm.model.rotary_emb.register_forward_pre_hook(
                lambda mod, args, kwargs: seen.append(kwargs.get("position_ids", args[1] if len(args) > 1 else None)),
                with_kwargs=True)
            try:
                cfg = lm.config
                cache = _filled_cache(cfg, B, C, cfg.num_key_value_heads, cfg.head_dim, lm.dtype, device)
                lm.model(input_ids=torch.zeros(B, T, dtype=torch.long, device=device), cache=cache,
                         use_cache=cache is not None)
            finally:
                hook.remove()
            if len(seen) != 1 or seen[0] is None:
                raise AdapterError("hf-transformers: LlamaModel did not pass position_ids to rotary_emb")
            return seen[0].expand(B, T)  # HF broadcasts one row [1, T] over the batch
        if rule == "left_pad":
            mask, C = x["attention_mask"], x.get("cache_length", 0)
            B, L = mask.shape
            lm = self._lm(device)
            ids = torch.zeros(B, L, dtype=torch.long, device=device)
            full = lm._prepare_position_ids_for_generation(ids, {"attention_mask": mask})
            if C == 0:
                return full
            cfg = lm.config
            cache = _filled_cache(cfg, B, C, cfg.num_key_value_heads, cfg.head_dim, lm.dtype, device)
            # What GenerationMixin._prefill does when restarting from a cache with the full inputs.
            inputs = lm.prepare_inputs_for_generation(
                ids, next_sequence_length=L - cache.get_seq_length(), cache=cache, attention_mask=mask,
                position_ids=full)
            return inputs["position_ids"]
        if rule == "packed":
            cu = [int(v) for v in x["cu_seqlens"].tolist()]
            lengths = [b - a for a, b in zip(cu[:-1], cu[1:])]
            features = [{"input_ids": [0] * n} for n in lengths]
            batch = DataCollatorWithFlattening(return_tensors="pt")(features)
            return batch["position_ids"].to(device)
        raise Unsupported(f"position_ids rule {rule!r} is not wired in this adapter")
