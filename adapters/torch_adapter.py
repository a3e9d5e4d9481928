"""The ``torch`` adapter: the kit's own faithful PyTorch port of every operation.

Dtype policy (clauses ROPE-PRECISION / SIN-PRECISION, and M-RoPE alike): inverse frequencies are computed in
float64 and held in float32 (float64 for float64 activations); angles, cos/sin and the
rotation are computed in that precision and the result is rounded once to the activation
dtype (the Meta / torchtune policy).  Devices: ``cpu``, and ``cuda`` when present.  Rows and
positions are range-checked before any indexing, so an out-of-range index never reaches a GPU
kernel (clause LEARNED-ROW-RANGE).
"""

from __future__ import annotations

import numpy as np
import torch

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange  # noqa: F401 - re-exported, as before

from .base import Adapter, family_ports, roberta_from_bert  # noqa: F401

# Re-exported: wrappers, tests and user adapters import these from here.
from .torch_port._common import (DTYPES, check_rows, compute_dtype, padding_aware_positions, rotate,
                                 torch_device_available)
from .torch_port.alibi import alibi_slopes
from .torch_port.mrope import TorchMRope, mrope_axes
from .torch_port.nope import nope_layer_flags
from .torch_port.rope import TorchRope
from .torch_port.rope_scaling import attention_probs, scaled_inv_freq, softmax_scale
from .torch_port.t5 import t5_buckets

__all__ = ["ADAPTER", "DTYPES", "TorchAdapter", "TorchMRope", "TorchRope", "alibi_slopes", "attention_probs",
           "check_rows", "compute_dtype", "mrope_axes", "nope_layer_flags", "padding_aware_positions", "rotate",
           "scaled_inv_freq", "softmax_scale", "t5_buckets", "torch_device_available"]


class TorchAdapter(*family_ports("posenc.adapters.torch_port"), Adapter):
    """The kit's torch port: environment and arrays here, each family's operations in
    ``adapters/torch_port/<family>.py`` (an ``Ops`` mixin each)."""

    name = "torch"
    framework = "torch"
    devices = ("cpu", "cuda")
    range_probe_devices = ("cpu", "cuda")  # rows are checked before indexing
    notes = "kit's own port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype"
    call_forms = ("rope.apply_int32", "rope.apply_offset", "rope.apply_row_offsets", "rope.apply_tokens", "rope.apply_token_major", "rope.apply_packed",
                  "rope.apply_with_cos_sin_hidden", "rope.apply_with_cos_sin_cache",
                  "rope.apply_inplace", "rope.apply_strided",
                  *(f"{op}_{form}" for op in ("mrope.apply", "axial.apply")
                    for form in ("int32", "tokens", "token_major", "inplace", "strided")))

    def versions(self):
        return {"torch": torch.__version__}

    def device_available(self, device):
        return torch_device_available(device)

    def from_numpy(self, array, dtype, device):
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t.to(device=device, dtype=DTYPES[dtype])

    def to_numpy(self, x):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.to(torch.float32)
        return x.numpy()

    def dtype_of(self, x):
        return str(x.dtype).removeprefix("torch.")

    def device_of(self, x):
        return str(x.device)


ADAPTER = TorchAdapter
