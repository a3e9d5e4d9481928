"""A user model adapter: a hand-written RoPE decoder with a KV cache, checked as a whole model.
pytest conformance --model docs/example_model_adapter.py   (docs/model-adapter.md)"""
import torch

from posenc.adapters.model import ModelAdapter
from posenc.spec.models import RopeParams

V, E, H, D, L = 64, 32, 2, 16, 2  # vocabulary, width, heads, head width, layers
ROPE = RopeParams(head_dim=D, rope_theta=10000.0)  # half pairing


class TinyDecoder:
    def __init__(self, dtype):
        g = torch.Generator().manual_seed(0)
        w = lambda *s: (torch.randn(*s, generator=g) * 0.3).to(dtype)  # noqa: E731
        self.emb, self.out = w(V, E), w(E, V)
        self.qkv = [(w(E, H * D), w(E, H * D), w(E, H * D)) for _ in range(L)]
        self.inv = ROPE.rope_theta ** -(torch.arange(0, D, 2, dtype=torch.float64) / D)
        self.seen = []

    def rope(self, x, pos):  # x [B, H, T, D], pos [B, T]
        ang = pos[:, None, :, None].double() * self.inv
        c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)

    def forward(self, input_ids=None, *, inputs_embeds=None, attention_mask=None, position_ids=None, cache=None,
                use_cache=False):
        x = torch.as_tensor(inputs_embeds).to(self.emb.dtype) if inputs_embeds is not None else self.embed(input_ids)
        b, t, past = x.shape[0], x.shape[1], 0 if cache is None else cache[0][0].shape[2]
        keep = torch.ones(b, past + t, dtype=torch.bool) if attention_mask is None else torch.as_tensor(attention_mask) > 0
        pos = (torch.as_tensor(position_ids) if position_ids is not None  # else from the mask: left pads don't count
               else (keep.long().cumsum(-1) - 1).clamp(min=0)[:, past:])
        allowed = torch.ones(t, past + t, dtype=torch.bool).tril(past)[None, None] & keep[:, None, None, :]
        if past == 0:  # packed documents: positions restart at 0, attention stays inside each document
            doc = torch.cat([torch.zeros(b, 1, dtype=torch.long), (pos[:, 1:] != pos[:, :-1] + 1).long()], 1).cumsum(1)
            allowed = allowed & (doc[:, None, :, None] == doc[:, None, None, :])
        self.seen, new = [], []
        for i, (wq, wk, wv) in enumerate(self.qkv):
            q, k, v = ((x @ w).view(b, t, H, D).transpose(1, 2) for w in (wq, wk, wv))
            qr, kr = self.rope(q, pos), self.rope(k, pos)
            self.seen.append({"kind": "rope", "layer": i, "q_in": q, "k_in": k, "q_out": qr, "k_out": kr})
            if cache is not None:
                kr, v = torch.cat([cache[i][0], kr], 2), torch.cat([cache[i][1], v], 2)
            new.append((kr, v))
            att = (qr @ kr.transpose(-1, -2) / D ** 0.5).masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num()
            self.seen.append({"kind": "attention", "layer": i, "q": qr, "k": kr, "mask": allowed, "scaling": D ** -0.5,
                              "probs": att})
            x = x + (att @ v).transpose(1, 2).reshape(b, t, H * D)
        return x @ self.out, (new if use_cache or cache is not None else None)

    def embed(self, input_ids):
        return self.emb[torch.as_tensor(input_ids)]

    def probes(self, all_passes=False):
        return [self.seen] if all_passes else self.seen

    def float64_twin(self):  # optional: the same (rounded) weights in float64; its logit pairs are judged too
        twin = TinyDecoder(torch.float64)
        twin.emb, twin.out = self.emb.double(), self.out.double()
        twin.qkv = [tuple(m.double() for m in layer) for layer in self.qkv]
        return twin


class TinyModelAdapter(ModelAdapter):
    name, framework, architecture, kind, vocab_size, pad_token_id = "tiny-decoder", "torch", "tiny", "decoder", V, 0
    capabilities = ("cache", "position_ids", "inputs_embeds", "attention_mask")  # no generate, no static cache
    probes, dtypes, num_layers = ("rope", "attention"), ("float64", "float32"), L
    versions = lambda self: {"torch": torch.__version__}  # noqa: E731
    encodings = lambda self: {"rope": ROPE}  # noqa: E731

    def build(self, *, dtype, device, attn_implementation, seed=0):
        return TinyDecoder(getattr(torch, dtype))


MODEL = TinyModelAdapter
