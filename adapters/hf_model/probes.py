"""Probes inside a transformers model: what each layer's positional encoding received and produced.

While :meth:`Recorder.capture` is active, the modeling modules' own functions are wrapped (and
restored afterwards, also on an exception):

* the rotation (``apply_rotary_pos_emb`` of the architecture's modeling module, its calling
  convention from :class:`~posenc.adapters.hf_model.architectures.Arch`): q and k in and out,
  ``[B, H, T, D]`` (single-tensor ``[B, T, H, R]`` calls transposed: GPT-J's k then q, Gemma 4's q
  then k);
* the attention functions (transformers' ``sdpa`` in ``ALL_ATTENTION_FUNCTIONS`` and each
  modeling module's ``eager_attention_forward``): q and k as the softmax sees them (every key,
  the cached ones too), the mask (``None`` when transformers lets sdpa apply causality itself) and
  the scaling; eager's own attention probabilities;
* an absolute position table module (``Arch.table``): a forward hook reads its output and finds
  the table row each output vector is (an exact gather, so the row whose values are equal).

The layer a record belongs to is set by a forward pre-hook on each decoder layer; a forward pass
starts at each call of the module that holds the layers (``generate`` makes one per step).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Optional

import torch

_SDPA_KEY = "sdpa"


def _f(x) -> torch.Tensor:
    """A detached copy (the model may reuse its buffers)."""
    return x.detach().clone()


class Recorder:
    def __init__(self, model, arch):
        self.model, self.arch = model, arch
        self.active = False
        self.passes: list[list[dict]] = []
        self.layer: Optional[int] = None
        self._hooks = []
        self._install()

    # ---- hooks that stay (inactive outside capture) ----------------------------------------
    def _install(self) -> None:
        root = self.model.get_decoder() if self.arch.kind == "encoder-decoder" else self.model
        stack, layers = _stack(root, _relative(self.arch.table, self.model, root))
        self._hooks.append(stack.register_forward_pre_hook(self._new_pass))
        self._hooks.append(stack.register_forward_hook(self._end_pass))
        for i, layer in enumerate(layers):
            self._hooks.append(layer.register_forward_pre_hook(lambda m, a, i=i: self._set_layer(i)))
        if self.arch.table:
            table = _attr(self.model, self.arch.table)
            self._hooks.append(table.register_forward_hook(self._table_hook))
        if self.arch.bias and self.arch.bias[1] != "t5":
            for m in self.model.modules():
                if type(m).__name__.endswith("Attention"):
                    self._hooks.append(m.register_forward_hook(self._bias_hook, with_kwargs=True))

    def _new_pass(self, module, args):
        if self.active:
            self.passes.append([])
            self.layer = None
            self.inside = True

    def _end_pass(self, module, args, output):
        self.inside = False

    inside = False  # within the stack's forward: a vision tower's attention and rotation are not recorded

    def _set_layer(self, i: int):
        if self.active:
            self.layer = i

    def _add(self, record: dict) -> None:
        if not self.active or not self.inside:
            return
        if not self.passes:
            self.passes.append([])
        self.passes[-1].append(record)

    def _table_hook(self, module, args, output):
        if not self.active:
            return
        weight = module.weight if isinstance(getattr(module, "weight", None), torch.Tensor) else module.weights
        out = output.detach()
        flat = out.reshape(-1, out.shape[-1])
        # the row of the table each output vector equals (a gather: exact)
        table = weight.detach().to(flat.dtype)
        idx = torch.cdist(flat.double(), table.double()).argmin(dim=-1)
        # an output that is no row of the table (a position added some other way, or none): -1
        exact = (flat == table[idx]).all(dim=-1)
        rows = torch.where(exact, idx, -1).reshape(out.shape[:-1])
        if rows.dim() == 1:
            rows = rows[None]
        self._add({"kind": "table", "rows": rows.to(torch.int64), "output": out.reshape(rows.shape + (out.shape[-1],)),
                   "table": weight.detach()})

    def _bias_hook(self, module, args, kwargs, output):
        """The positional bias an attention module added to its logits, ``[B or 1, H, Tq, Tk]``: the
        keyword argument ``Arch.bias`` names (BLOOM's ``alibi`` ``[B * H, 1, Tk]``; MPT's
        ``position_bias`` ``[H, 1, max_seq_len]``, of which the attention adds the last Tk columns)."""
        if not self.active:
            return
        name, form = self.arch.bias
        bias = kwargs.get(name)
        if bias is None:
            return
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        tq = hidden.shape[1]
        if form == "bloom":
            b = hidden.shape[0]
            bias = bias.reshape(b, -1, 1, bias.shape[-1])
        else:  # mpt: the attention slices the last key_length columns
            cache = kwargs.get("cache", kwargs.get("layer_past"))
            tk = cache.get_seq_length(module.layer_idx) if cache is not None else tq
            bias = bias[None, :, -1:, -tk:]
        self._add({"kind": "bias", "layer": self.layer, "bias": _f(bias.expand(*bias.shape[:2], tq, bias.shape[-1]))})

    # ---- wrapped functions -------------------------------------------------------------------
    def _rope_qk(self, fn):
        def wrapped(q, k, *args, **kwargs):
            q_out, k_out = fn(q, k, *args, **kwargs)
            self._add({"kind": "rope", "layer": self.layer, "q_in": _f(q), "k_in": _f(k), "q_out": _f(q_out),
                       "k_out": _f(k_out)})
            return q_out, k_out
        return wrapped

    def _rope_single(self, fn, first: str):
        """A rotation applied to one tensor at a time, ``[B, T, H, R]``, ``first`` (``k`` for GPT-J,
        ``q`` for Gemma 4) then the other, in each layer."""
        pending: dict[str, Any] = {}

        def wrapped(x, *args, **kwargs):
            out = fn(x, *args, **kwargs)
            if self.active:
                if "first" not in pending or pending.get("layer") != self.layer:
                    pending.clear()
                    pending.update(first=(x, out), layer=self.layer)
                else:
                    a, b = pending.pop("first"), (x, out)
                    (k_in, k_out), (q_in, q_out) = (a, b) if first == "k" else (b, a)
                    pending.clear()
                    t = lambda v: _f(v).transpose(1, 2)  # noqa: E731 - [B, T, H, R] -> [B, H, T, R]
                    self._add({"kind": "rope", "layer": self.layer, "q_in": t(q_in), "k_in": t(k_in),
                               "q_out": t(q_out), "k_out": t(k_out)})
            return out
        return wrapped

    def _attention(self, fn, eager: bool):
        def wrapped(module, query, key, value, attention_mask, *args, **kwargs):
            out = fn(module, query, key, value, attention_mask, *args, **kwargs)
            if self.active:
                scaling = kwargs.get("scaling", args[1] if len(args) > 1 else None)
                rec = {"kind": "attention", "layer": getattr(module, "layer_idx", self.layer), "q": _f(query),
                       "k": _f(key), "mask": None if attention_mask is None else _f(attention_mask),
                       "causal": bool(getattr(module, "is_causal", True)),
                       "scaling": float(scaling) if scaling is not None else float(query.shape[-1]) ** -0.5}
                if eager and isinstance(out, tuple) and len(out) > 1 and out[1] is not None:
                    rec["probs"] = _f(out[1])
                self._add(rec)
            return out
        return wrapped

    def _compute_bias(self, fn):
        """T5's ``compute_bias(query_length, key_length, device, past_seen_tokens)``: the bucketed bias
        ``[1, H, Tq, Tk]`` of the layer that holds the table, with the table and the query offset."""
        def wrapped(module, query_length, key_length, device=None, past_seen_tokens=0):
            out = fn(module, query_length, key_length, device, past_seen_tokens)
            if self.active and module.is_decoder == (self.arch.kind != "encoder"):
                self._add({"kind": "bias", "layer": self.layer, "bias": _f(out),
                           "table": _f(module.relative_attention_bias.weight), "past": int(past_seen_tokens)})
            return out
        return wrapped

    @contextlib.contextmanager
    def capture(self):
        """Record every forward pass made inside the block (``passes``)."""
        from transformers.modeling_utils import AttentionInterface
        self.passes, self.layer = [], None
        patches: list[tuple[Any, str, Any]] = []
        for mod in _modeling_modules(self.model):
            if self.arch.rope and hasattr(mod, self.arch.rope[0]):
                fn = getattr(mod, self.arch.rope[0])
                conv = self.arch.rope[1]
                wrapped = self._rope_qk(fn) if conv == "qk" else self._rope_single(fn, conv[-2])
                patches.append((mod, self.arch.rope[0], wrapped))
            if hasattr(mod, "eager_attention_forward"):
                patches.append((mod, "eager_attention_forward", self._attention(mod.eager_attention_forward, True)))
            if self.arch.bias and self.arch.bias[1] == "t5":
                for cls in {type(m) for m in self.model.modules() if hasattr(type(m), "compute_bias")
                            and type(m).__module__ == mod.__name__}:
                    patches.append((cls, "compute_bias", self._compute_bias(cls.compute_bias)))
        mapping = AttentionInterface._global_mapping
        saved = []
        try:
            for obj, name, new in patches:
                saved.append((obj, name, getattr(obj, name)))
                setattr(obj, name, new)
            sdpa = mapping[_SDPA_KEY]
            mapping[_SDPA_KEY] = self._attention(sdpa, False)
            saved.append((mapping, _SDPA_KEY, sdpa))
            self.active = True
            yield self
        finally:
            self.active = False
            for obj, name, old in reversed(saved):
                if obj is mapping:
                    mapping[name] = old
                else:
                    setattr(obj, name, old)


def _relative(path: Optional[str], model, root) -> Optional[str]:
    """``path`` (from ``model``) as a path from ``root``, a submodule of it (None where it is not under it)."""
    if path is None or root is model:
        return path
    names = {m: n for n, m in model.named_modules()}
    prefix = names.get(root, "")
    return path[len(prefix) + 1:] if prefix and path.startswith(prefix + ".") else None


def _attr(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _stack(model, table: Optional[str] = None) -> tuple:
    """``(stack, layers)``: the module whose forward is one forward pass -- the one that holds the
    model's blocks (the longest ModuleList; a vision-language model's: its language model's, however
    deep its vision tower), or where the position table sits outside it (BERT's embeddings beside
    its encoder), their closest common parent -- and the blocks."""
    lists = [(name, child) for name, m in model.named_modules() for _, child in m.named_children()
             if isinstance(child, torch.nn.ModuleList)]
    text = [(n, c) for n, c in lists if "language_model" in n.split(".")]
    best, owner = None, ""
    for name, child in text or lists:
        if best is None or len(child) > len(best):
            best, owner = child, name
    if table:
        a, b = owner.split(".") if owner else [], table.split(".")
        common = []
        for x, y in zip(a, b):
            if x != y:
                break
            common.append(x)
        owner = ".".join(common)
    return (_attr(model, owner) if owner else model), list(best or [])


def _modeling_modules(model) -> list:
    """The Python modules that define the model's classes (the modeling module, and those it
    imports classes from)."""
    names = {type(m).__module__ for m in model.modules()}
    return [sys.modules[n] for n in sorted(names) if n.startswith("transformers.models.") and n in sys.modules]
