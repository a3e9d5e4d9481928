"""Adapters for tests/test_table_dtype.py (ROPE-TABLE-DTYPE): the torch port with float32 tables beside
half-precision q and k (conforming, as FlashInfer, TransformerEngine and torchtune), one that declares them
but gives the activation dtype, and two that round the tables to bfloat16 beside float32 q and k."""
import torch

from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope
from posenc.adapters.torch_port.rope import Ops as _RopeOps
from posenc.spec.shapes import table_dtype


class _Float32Tables(TorchRope):
    def __init__(self, params, dtype, device, tables):
        super().__init__(params, dtype, device)
        self.tables = tables

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)  # float32 angles and tables
        return c.to(self.tables), s.to(self.tables)


class _TablesAs:
    """A prepared M-RoPE / axial object whose cos_sin hands its tables in ``dt``."""

    def __init__(self, inner, dt):
        self._inner, self._dt = inner, dt

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def cos_sin(self, position_ids):
        c, s = self._inner.cos_sin(position_ids)
        return c.to(self._dt), s.to(self._dt)


class Float32Tables(TorchAdapter):
    """The torch port with a float32 cos/sin cache beside bfloat16 / float16 q and k."""
    name = "torch-float32-tables"
    table_dtype = "float32"

    def rope(self, params, *, dtype, device):
        return _Float32Tables(params, DTYPES[dtype], device, DTYPES[table_dtype(self, dtype)])

    def mrope(self, params, *, dtype, device):
        return _TablesAs(super().mrope(params, dtype=dtype, device=device), DTYPES[table_dtype(self, dtype)])

    def axial(self, params, *, dtype, device):
        return _TablesAs(super().axial(params, dtype=dtype, device=device), DTYPES[table_dtype(self, dtype)])

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        assert cos.dtype == DTYPES[table_dtype(self, str(q.dtype).removeprefix("torch."))], cos.dtype
        return _RopeOps.rope_apply_with_cos_sin(self, q, k, cos, sin, params)


class DeclaresFloat32GivesActivation(TorchAdapter):
    """Declares float32 tables, hands the activation dtype: a contract error naming the policy."""
    name = "torch-declares-float32-tables"
    table_dtype = "float32"


class BadPolicy(TorchAdapter):
    name = "torch-bad-table-policy"
    table_dtype = "bfloat16"


def _bf16(x):
    return x.to(torch.bfloat16).to(x.dtype)


class _NarrowTables(TorchRope):
    def _cos_sin(self, position_ids):  # the cache cast down to bfloat16 once, read by a float32 computation
        c, s = super()._cos_sin(position_ids)
        return _bf16(c), _bf16(s)


class NarrowTables(TorchAdapter):
    """cos/sin rounded to bfloat16 beside float32 / float64 q and k (DIV-ROPE-TABLE-NARROWER)."""
    name = "torch-bf16-tables"

    def rope(self, params, *, dtype, device):
        return _NarrowTables(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        return _RopeOps.rope_apply_with_cos_sin(self, q, k, _bf16(cos), _bf16(sin), params)


class UndeclaredFloat32(TorchAdapter):
    """Hands float32 tables at bfloat16 without declaring them: told to declare table_dtype."""
    name = "torch-undeclared-float32-tables"

    def rope(self, params, *, dtype, device):
        return _Float32Tables(params, DTYPES[dtype], device, torch.float32)
