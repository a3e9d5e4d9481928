"""The model adapter contract: a whole model under the scenarios of spec family ``model`` (MODEL-*).

Where an operation adapter (:class:`posenc.adapters.Adapter`) carves one encoding out of an
implementation, a *model adapter* builds a small model of an architecture with seeded random
weights and lets the kit call it the way users do -- a prefill, decode steps through a KV cache, a
padded or packed batch, ``inputs_embeds``, ``generate`` -- while *probes* report what each layer's
positional encoding received and produced.  ``pytest conformance --model NAME`` runs every scenario
that applies; docs/model-adapter.md is the user's guide, docs/example_model_adapter.py a complete
adapter of a hand-written decoder.

Attributes (read once at the start; a raising or ill-typed one is a usage error):

``name``               the name in reports (``hf:llama``, ``my-decoder``)
``framework``          ``torch``, ``jax``, ...
``architecture``       what the model is (transformers' ``model_type`` for the hf:* adapters)
``kind``               ``decoder`` (causal LM), ``encoder`` (bidirectional) or ``encoder-decoder``
``vocab_size``         token ids are drawn from ``[3, vocab_size)``, never ``pad_token_id``
``pad_token_id``       the id padded slots hold (``None``: 0)
``reserved_token_ids`` ids the scenarios never draw for text (an image placeholder, a vision start
                       token) and ``generate`` never chooses (those, and an EOS that generating
                       exactly ``max_new_tokens`` forbids): its tokens are checked to be the argmax
                       of its step logits over the other ids
``capabilities``       what ``forward`` and the model can do: ``cache``, ``position_ids``,
                       ``inputs_embeds``, ``generate``, ``static_cache``, ``attention_mask``,
                       ``images``, ``cu_seqlens``
                       (:data:`posenc.harness.model_run.CAPABILITIES`); a scenario that needs one
                       the model lacks is *unsupported*, with that reason
``probes``             which probe kinds the model reports (below)
``max_positions``      the positions the model takes, ``0 .. max_positions - 1`` (its context: a learned
                       table's rows, a precomputed rotation table's length), or ``None`` where it declares
                       no limit; no scenario feeds a position beyond it (MODEL-POSITION-SHIFT's far positions
                       stop at its last ``T``); at least 64
``num_layers``         the number of attention layers (the decoder's), or ``None``; with it, every layer that
                       rotates (its index below it, not a NoPE layer) must report a rope probe
``attn_implementations`` the attention implementations it can build (``("default",)`` for one);
                       ``attn_extra``: others ``--attn`` may name (not run by default)
``devices``, ``dtypes`` as for operation adapters

Methods:

``versions() -> {library: version}``
``encodings() -> {name: params}``  the spec's parameter models of the model's positional encoding,
    named as :func:`posenc.hf.config.params_from_hf_config` names them: ``{"rope":
    RopeParams}`` (and ``"nope": NopeParams`` where some layers have none), ``{"embeddings":
    GPT2EmbeddingParams | OPTEmbeddingParams | ...}``, ``{"alibi": AlibiParams}``, ... -- the
    oracle applies these at the positions each scenario's rule gives
``build(*, dtype, device, attn_implementation, seed) -> model``  a model with seeded random weights

The built model:

``forward(input_ids=None, *, inputs_embeds=None, attention_mask=None, position_ids=None, cache=None,
use_cache=False) -> (logits, cache)``  one forward pass.  Inputs are NumPy arrays: ``input_ids``
    int64 ``[B, T]``; ``attention_mask`` int64 0/1 ``[B, S]`` over the cached and the new tokens
    (``S = cache length + T``); ``position_ids`` int64 ``[B, T]``; ``inputs_embeds`` float ``[B, T,
    E]`` as :meth:`embed` returned them.  ``logits``: ``[B, T, V]`` (NumPy or a framework tensor);
    ``cache``: opaque, handed back on the next call (``None`` where ``use_cache`` is false and
    no cache was given).
``embed(input_ids) -> [B, T, E]``  the token embeddings ``forward`` would compute (``inputs_embeds``)
``new_cache(kind, *, batch, max_length)``  an empty cache: ``dynamic`` or ``static`` (allocated
    for ``max_length`` tokens)
``generate(input_ids, *, attention_mask, max_new_tokens, use_cache) -> (sequences, logits)``  greedy;
    ``sequences`` int ``[B, T + N]``, ``logits`` ``[B, N, V]`` of each step (before any processor)
``probes(all_passes=False) -> list``  what the last call captured: the probes of its one forward
    pass (a list of dicts), or with ``all_passes`` (after ``generate``) a list per forward pass
``image(grid_thw) -> dict``  (capability ``images``, M-RoPE models) an image of a ``(t, h, w)`` patch
    grid: ``pixel_values``, ``image_grid_thw`` (the model's row for it), ``image_token_id`` and
    ``grid`` (the merged ``(t, h, w)`` the language model sees: one image token per merged patch);
    ``forward`` and ``generate`` then take ``pixel_values``, ``image_grid_thw`` ``[N, 3]`` and
    ``mm_token_type_ids`` ``[B, T]`` (1 at image tokens) as keyword arguments, and ``forward``'s
    ``position_ids`` may be M-RoPE's int64 ``[3, B, T]`` (t, h, w; MODEL-MROPE-PACKED)
``float64_twin() -> model``  (optional) the same weights, as rounded to this model's dtype, and the same
    code, computing in float64: a fresh built model whose calls leave this one alone.  A run below
    float64 then has the twin's logit pairs judged as well, under the float64 bound (spec/model.yaml
    ``logits_bound``), beside its own under ``K_LOGITS[dtype]``.  May raise :class:`Unsupported` (the
    model cannot compute in float64).
``cu_seqlens``  (capability ``cu_seqlens``) MODEL-PACKED also hands ``forward`` the packed row's
    document boundaries, int32 ``[N + 1]`` from 0 (flash-attn varlen), beside ``position_ids``

Probe kinds (each a dict; arrays NumPy or tensors, in the model's dtype):

``rope``       required of a RoPE model (and M-RoPE), per layer that rotates: ``{"kind": "rope",
               "layer": i, "q_in", "k_in", "q_out", "k_out"}``, ``[B, H, T, D]`` before and after
               the rotation (D: the width the rotation sees, MLA's rope part)
``table``      required of a model with an absolute position table (learned or sinusoidal), once
               per forward pass: ``{"kind": "table", "rows": int [B, T], "output": [B, T, E]}``, the
               table rows the tokens' positions selected and what the lookup returned; ``"table":
               [N, E]`` (optional) lets the kit check the gather itself
``bias``       required of ALiBi and T5: ``{"kind": "bias", "layer": i, "bias": [B or 1, H, Tq, Tk]}``,
               the positional bias added to the attention logits
``attention``  optional: ``{"kind": "attention", "layer": i, "q": [B, Hq, Tq, D], "k": [B, Hk, Tk, D],
               "mask": [B or 1, 1, Tq, Tk] (bool, True = may attend; or additive float),
               "scaling": float, "probs": [B, Hq, Tq, Tk] (optional: eager implementations)}``, the
               inputs of the attention's softmax (k: every key, the cached ones too).  Without it
               the attention-mass checks of MODEL-PACKED and of padding are unsupported (the
               logits checks still run).

A required probe that is absent makes the scenario's oracle check unsupported (reported with
the reason); the oracle-free logits checks still run, so a model without probes is checked on
its logits alone.  Anything a model cannot do raises :class:`Unsupported`.
"""

from __future__ import annotations

from typing import Any, Optional

from posenc.spec.models import DTYPES

from .base import Unsupported

#: The probe kinds of the contract (see the module docstring).
PROBE_KINDS = ("rope", "table", "bias", "attention")


class ModelAdapter:
    """Base class of model adapters (see the module docstring for the contract)."""

    name: str = "model"
    framework: str = "unknown"
    architecture: str = "unknown"
    kind: str = "decoder"
    vocab_size: int = 0
    pad_token_id: Any = None
    reserved_token_ids: tuple[int, ...] = ()
    max_positions: Optional[int] = None
    num_layers: Optional[int] = None
    capabilities: tuple[str, ...] = ()
    probes: tuple[str, ...] = ()
    attn_implementations: tuple[str, ...] = ("default",)
    attn_extra: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = DTYPES
    notes: str = ""

    def versions(self) -> dict[str, str]:
        return {}

    def device_available(self, device: str) -> bool:
        return device == "cpu"

    def encodings(self) -> dict[str, Any]:
        raise Unsupported(f"model adapter {self.name!r} does not describe its positional encoding (encodings())")

    def build(self, *, dtype: str, device: str, attn_implementation: str, seed: int = 0):
        raise Unsupported(f"model adapter {self.name!r} builds no model")

    def info(self) -> dict[str, Any]:
        """What a scenario needs to know of the model (plain data but the encodings' models)."""
        return {"name": self.name, "architecture": self.architecture, "kind": self.kind,
                "vocab_size": _int(self.vocab_size), "pad_token_id": _int(self.pad_token_id),
                "reserved_token_ids": tuple(_int(t) for t in self.reserved_token_ids),
                "max_positions": _int(self.max_positions), "num_layers": _int(self.num_layers),
                "capabilities": tuple(self.capabilities), "probes": tuple(self.probes),
                "encodings": self.encodings()}


def _int(x):
    """An integer field as a Python int where it is one (a NumPy integer too); anything else as given, for
    the run's check to refuse by name (a float is never truncated)."""
    import numbers
    return int(x) if isinstance(x, numbers.Integral) and not isinstance(x, bool) else x


__all__ = ["ModelAdapter", "PROBE_KINDS", "Unsupported"]
