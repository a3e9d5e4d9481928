"""A user adapter: my own RoPE kernel, checked by the kit: pytest conformance --adapter docs/example_adapter.py -k rope"""
import numpy as np
import torch

from posenc.adapters import Adapter, Unsupported

DT = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
      "float16": torch.float16, "int64": torch.int64}


class MyRope:  # a prepared operation; it has no inv_freq() / cos_sin(): those are unsupported
    def __init__(self, p, dtype):
        self.p, self.dtype = p, dtype  # p.rdim is rotary_dim, or head_dim when rotary_dim is None
        self.w = p.rope_theta ** -(torch.arange(0, p.head_dim, 2, dtype=torch.float64) / p.head_dim)

    def apply(self, q, k, position_ids):
        p = self.p
        if set(p.model_dump(exclude_defaults=True)) - {"head_dim", "rope_theta"}:  # any other field set, a later spec's too
            raise Unsupported("my kernel does plain full-width half pairing only")
        phi = position_ids[..., None].double() * self.w          # angles in float64
        c, s = torch.cos(phi)[:, None], torch.sin(phi)[:, None]  # [B, 1, T, D/2]

        def rot(x):
            x1, x2 = x.double().chunk(2, dim=-1)
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(self.dtype)
        return rot(q), rot(k)


class MyAdapter(Adapter):
    name, framework = "my-rope", "torch"
    versions = lambda self: {"torch": torch.__version__}  # noqa: E731 - the header and expectation files show it
    from_numpy = lambda self, a, dtype, device: torch.from_numpy(np.ascontiguousarray(a)).to(DT[dtype])  # noqa: E731
    to_numpy = lambda self, x: x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()  # noqa: E731
    dtype_of = lambda self, x: str(x.dtype).removeprefix("torch.")  # noqa: E731
    rope = lambda self, params, *, dtype, device: MyRope(params, DT[dtype])  # noqa: E731


ADAPTER = MyAdapter
