"""A user adapter with call forms: a varlen RoPE kernel in the layout vLLM and flash-attn call it -- tokens
[N, H, D] with a position each, and a packed buffer of documents (cu_seqlens, per-document offsets) --
checked through those forms as well as the kit's own [B, H, T, D] call:

    pytest conformance --adapter docs/example_forms_adapter.py -k "rope-" --dtype float32

Every golden of rope.apply runs three ways (test IDs ``<case>``, ``<case>~tokens``, ``<case>~packed``); the
other forms (offsets, token-major, strided, in place, int32) are reported unsupported: not declared."""
import numpy as np
import torch

from posenc.adapters import Adapter, Unsupported

DT = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
      "float16": torch.float16, "int64": torch.int64, "int32": torch.int32}


class VarlenRope:
    def __init__(self, p, dtype):
        if set(p.model_dump(exclude_defaults=True)) - {"head_dim", "rope_theta"}:
            raise Unsupported("this kernel does plain full-width half pairing only")
        self.dtype = dtype
        self.w = p.rope_theta ** -(torch.arange(0, p.head_dim, 2, dtype=torch.float64) / p.head_dim)

    def apply_tokens(self, q, k, positions):  # q [N, H, D], positions [N]: the kernel itself
        phi = positions[:, None].double() * self.w
        c, s = torch.cos(phi)[:, None], torch.sin(phi)[:, None]  # [N, 1, D/2]

        def rot(x):
            x1, x2 = x.double().chunk(2, dim=-1)
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(self.dtype)
        return rot(q), rot(k)

    def apply_packed(self, q, k, cu_seqlens, offsets):  # document d: tokens cu[d] .. cu[d+1] at offsets[d] + t
        cu = cu_seqlens.long()
        doc = torch.searchsorted(cu, torch.arange(q.shape[0]), right=True) - 1
        return self.apply_tokens(q, k, offsets[doc] + torch.arange(q.shape[0]) - cu[doc])

    def apply(self, q, k, position_ids):  # the kit's [B, H, T, D] call, through the same kernel
        b, h, t, d = q.shape
        q2, k2 = self.apply_tokens(q.transpose(1, 2).reshape(b * t, h, d),
                                   k.transpose(1, 2).reshape(b * t, k.shape[1], d), position_ids.reshape(-1))
        return q2.reshape(b, t, h, d).transpose(1, 2), k2.reshape(b, t, k.shape[1], d).transpose(1, 2)


class VarlenAdapter(Adapter):
    name, framework = "my-varlen-rope", "torch"
    call_forms = ("rope.apply_tokens", "rope.apply_packed")  # the forms it serves besides rope.apply
    versions = lambda self: {"torch": torch.__version__}  # noqa: E731
    from_numpy = lambda self, a, dtype, device: torch.from_numpy(np.ascontiguousarray(a)).to(DT[dtype])  # noqa: E731
    to_numpy = lambda self, x: x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()  # noqa: E731
    dtype_of = lambda self, x: str(x.dtype).removeprefix("torch.")  # noqa: E731
    rope = lambda self, params, *, dtype, device: VarlenRope(params, DT[dtype])  # noqa: E731


ADAPTER = VarlenAdapter
