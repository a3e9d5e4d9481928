"""Helpers of the ``hf-transformers`` wrapper that several families share."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from posenc.spec.errors import AdapterError


#: The base every HF sinusoidal table and GPT-J's rotary table hard-code.
HF_FIXED_BASE = 10000.0


def _probe(dtype: torch.dtype, device) -> torch.Tensor:
    """An empty tensor: HF rotary modules read only ``x.dtype`` and ``x.device`` from it."""
    return torch.empty(0, dtype=dtype, device=device)


def _filled_cache(config, batch: int, cache_length: int, heads: int, head_dim: int,
                  dtype: torch.dtype, device) -> DynamicCache | None:
    """A ``DynamicCache`` holding ``cache_length`` dummy (zero) entries for every layer.

    The model then derives its default positions from ``cache.get_seq_length()`` itself.
    """
    if cache_length <= 0:
        return None
    cache = DynamicCache(config=config)
    z = torch.zeros(batch, heads, cache_length, head_dim, dtype=dtype, device=device)
    for layer in range(config.num_hidden_layers):
        cache.update(z, z, layer)
    return cache


def _dedup_half(full: torch.Tensor, what: str) -> torch.Tensor:
    """HF's ``[..., r]`` cos/sin is ``cat(c, c)``: return the first half ``c`` ``[..., r/2]``.

    Both halves are checked to be bit-identical, so the de-duplication loses nothing; if a
    future transformers changes the layout this raises instead of guessing.
    """
    h = full.shape[-1] // 2
    first, second = full[..., :h], full[..., h:]
    if not torch.equal(first, second):
        raise AdapterError(f"hf-transformers: HF {what} is not cat(c, c); its halves differ")
    return first
