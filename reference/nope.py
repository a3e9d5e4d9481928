"""NoPE (no positional encoding), NumPy reference: clauses NOPE-IDENTITY and NOPE-LAYER-FLAGS.

Primary sources: HF transformers 5.24 ``models/smollm3/configuration_smollm3.py::SmolLM3Config``
(``no_rope_layers``: 1 = the layer uses RoPE, 0 = NoPE; default
``int((i + 1) % no_rope_layer_interval != 0)``), ``models/smollm3/modeling_smollm3.py::
SmolLM3Attention.forward`` (``if self.use_rope: apply_rotary_pos_emb``), and
``models/llama4/configuration_llama4.py::Llama4TextConfig`` (the same default rule).

Shapes and dtypes: flags int64 ``[num_hidden_layers]``; q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]``
returned as they are.
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import NopeParams


def layer_flags(params: NopeParams) -> np.ndarray:
    """NOPE-LAYER-FLAGS: int64 ``[num_hidden_layers]``, 1 where the layer uses RoPE, 0 where NoPE.

    ``no_rope_layers`` when given (its first num_hidden_layers entries), else
    ``(i + 1) % no_rope_layer_interval != 0``: with interval 4 layers 3, 7, 11, ... are NoPE.
    """
    n = params.num_hidden_layers
    if params.no_rope_layers is not None:
        return np.asarray(params.no_rope_layers[:n], np.int64)
    i = np.arange(n, dtype=np.int64)
    return ((i + 1) % params.no_rope_layer_interval != 0).astype(np.int64)


def apply(q, k, layer_idx: int, params: NopeParams) -> tuple[np.ndarray, np.ndarray]:
    """NOPE-IDENTITY: a NoPE layer returns q and k unchanged (bit-identical; positions unused).

    Raises ``ValueError`` if ``layer_idx`` is not a NoPE layer under ``params`` (or out of range).
    """
    flags = layer_flags(params)
    if not 0 <= layer_idx < len(flags):
        raise ValueError(f"NOPE-IDENTITY: layer_idx {layer_idx} is not a layer of {len(flags)}")
    if flags[layer_idx] != 0:
        raise ValueError(f"NOPE-IDENTITY: layer {layer_idx} uses RoPE (flag 1), not NoPE")
    return np.asarray(q).copy(), np.asarray(k).copy()
