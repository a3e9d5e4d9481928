"""RoPE parameter sets per layer type, NumPy float64 reference: clauses LAYERS-SETS and
LAYERS-NO-ROPE.

Layer ``layer_idx`` rotates q and k with the RoPE set of ``layer_types[layer_idx]``
(:meth:`~posenc.spec.models.LayerRopeParams.set_for`: full attention with ``full_rope_theta`` and
linear scaling by ``full_factor``, sliding attention with ``sliding_rope_theta`` unscaled) and
returns them unchanged where that type has no RoPE.  Primary sources (HF transformers 5.24):
``models/gemma3/modeling_gemma3.py::Gemma3RotaryEmbedding`` (one inv_freq per layer type,
``forward(x, position_ids, layer_type)``) and ``Gemma3Attention`` (``config.layer_types[layer_idx]``);
``models/cohere2/modeling_cohere2.py::Cohere2Attention.forward`` (RoPE on sliding layers only).

Shapes and dtypes: q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` float64; position_ids integer
``[B, T]``; ``layer_idx`` an int in ``[0, len(layer_types))`` (else ``ValueError``).
"""

from __future__ import annotations

import numpy as np

from posenc.spec.models import LayerRopeParams

from . import rope


def apply(q, k, position_ids, layer_idx: int, params: LayerRopeParams) -> tuple[np.ndarray, np.ndarray]:
    """LAYERS-SETS / LAYERS-NO-ROPE: ``(q', k')`` of layer ``layer_idx``, float64."""
    st = params.set_for(int(layer_idx))
    if st is None:
        return np.asarray(q, np.float64).copy(), np.asarray(k, np.float64).copy()
    return rope.apply(q, k, position_ids, st)
