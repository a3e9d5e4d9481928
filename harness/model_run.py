"""The model-level harness: drive a built model through a scenario and record what it shows.

A *scenario* (one MODEL-* clause of spec/model.yaml, registered by the ``model`` family with
:func:`posenc.families.scenario`) is a driver ``run(r: Run)``: it calls a built model the way its
clause describes (a prefill, decode steps through a cache, a padded or packed batch, generate) and
records through :class:`Run`, for every forward pass, the positions the clause's rule gives
(``positions``: int ``[B, T]``; the slots compared, ``valid``), the probes the model captured, and
the pairs of logits the clause says are equal.  The driver runs where the model lives (the adapter's
worker process, :mod:`posenc.conformance.isolation`); what it records is plain data (NumPy arrays,
numbers, strings, lists and dicts), judged in the kit's process by :mod:`posenc.harness.model_judge`.

:class:`Facts` is what a judged run showed -- the positions recovered from the probes of every
forward pass, the attention mass that crosses documents or reaches pads -- the input of the
model-level mutants (:func:`posenc.families.model_mutant`).

Primary sources: transformers 5.24 ``generation/utils.py`` (``_prepare_position_ids_for_generation``,
``_update_model_kwargs_for_generation``), ``tests/generation/test_utils.py`` and
``tests/test_modeling_common.py`` (the equivalences each clause cites).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from posenc.reference import position_ids as pos
from posenc.spec.errors import AdapterError, PosencError, Unsupported, exception_text

#: What a model is, for a scenario's applicability: a causal decoder (GPT-2, Llama), a bidirectional
#: encoder (BERT), or an encoder-decoder (T5, BART, Whisper: the scenarios drive the decoder).
MODEL_KINDS = ("decoder", "encoder", "encoder-decoder")
#: Capabilities a model adapter may declare (``ModelAdapter.capabilities``); a scenario that needs
#: one the model lacks is *unsupported* (with this reason), never passed.
CAPABILITIES = {
    "cache": "forward takes and returns a KV cache",
    "position_ids": "forward takes explicit position_ids",
    "inputs_embeds": "forward takes inputs_embeds (and embed(input_ids) gives them)",
    "generate": "generate(...) decodes greedily, with and without a cache",
    "static_cache": "new_cache('static', ...) gives a pre-allocated cache",
    "attention_mask": "forward takes an attention_mask (padding)",
    "images": "image(grid_thw) gives an image's inputs, and forward / generate read them (M-RoPE models)",
    "cu_seqlens": "forward takes cu_seqlens, a packed row's document boundaries (flash-attn varlen)",
}
#: The model kinds whose (decoder's) tokens are causal: what decode, cache and generate scenarios drive.
CAUSAL = ("decoder", "encoder-decoder")


@dataclass(frozen=True)
class Scenario:
    """One MODEL-* clause as a driver.

    ``run(r)``: calls the model through :class:`Run`; ``kinds``: the model kinds it applies to
    (else ``n/a``); ``needs``: capabilities it needs (else unsupported); ``applies(info)``: the
    reason it does not apply to this model (``n/a``), or ``None``; ``implies``: the encoding-level
    clauses its position rule uses (POS-*), named in the test ID; ``unchecked``: what goes unchecked where
    the scenario is unsupported (said with the reason: a model matrix cell that is not a pass says why)."""

    clause: str
    name: str
    run: Callable = field(compare=False)
    kinds: tuple[str, ...] = ("decoder",)
    #: ``"a|b"``: either capability will do
    needs: tuple[str, ...] = ()
    applies: Optional[Callable] = field(default=None, compare=False)
    implies: tuple[str, ...] = ()
    unchecked: str = ""

    def not_applicable(self, info: dict) -> Optional[str]:
        """Why this scenario is ``n/a`` for a model (``info``: the adapter's description), or None."""
        if info["kind"] not in self.kinds:
            article = "an" if info["kind"].startswith("e") else "a"
            return f"{self.clause} applies to {' and '.join(self.kinds)} models; {info['architecture']} is {article} {info['kind']}"
        return self.applies(info) if self.applies else None

    def missing(self, info: dict) -> list[str]:
        """The capabilities this scenario needs that the model does not declare (an ``"a|b"`` need: when
        it declares neither)."""
        return [c for c in self.needs if not any(x in info["capabilities"] for x in c.split("|"))]


# ---- the driver ---------------------------------------------------------------------------------


class Run:
    """One scenario's run on a built model (``model``: what ``ModelAdapter.build`` returned).

    Records ``calls`` (one per forward pass: label, expected ``positions`` ``[B, T]``, ``valid``
    ``[B, T]``, ``cache_length``, the ``attention_mask`` passed, ``probes``, ``documents`` for a
    packed row, ``static`` (the allocated length of a static cache in use), ``step`` (a generate
    run's pass index), ``mrope`` (M-RoPE's ``[3, B, T]`` positions), ``image`` (the pass fed an
    image), ``finite`` (its logits were) and ``finite_real`` (they were at its real tokens)) and
    ``pairs`` (logits the clause says are equal: ``a``, ``b`` ``[n, V]`` and the ``where`` of each
    of the n rows).  Everything is plain data for the wire."""

    def __init__(self, model, info: dict, seed: int = 0):
        self.model, self.info = model, info
        self.rng = np.random.default_rng(seed)
        self.calls: list[dict] = []
        self.pairs: list[dict] = []
        self.changes: list[dict] = []  # logits that must differ (Run.changed)
        self.notes: list[str] = []  # checks the model cannot take (Run.unchecked)
        self.refusals: list[dict] = []  # passes the model must refuse (Run.refused)
        self.static_capacity = 0  # the allocated length of the static cache in use (0: none)

    # inputs
    def tokens(self, batch: int, length: int) -> np.ndarray:
        """Seeded token ids ``[batch, length]`` (int64), never the pad token."""
        vocab, pad = int(self.info["vocab_size"]), self.info.get("pad_token_id")
        low = 3 if vocab > 16 else 0  # clear of the usual pad / bos / eos ids
        avoid = np.array(sorted(set(self.info.get("reserved_token_ids") or ()) | ({int(pad)} if pad is not None
                                                                                   else set())), np.int64)
        ids = self.rng.integers(low, vocab, size=(batch, length), dtype=np.int64)
        while avoid.size and np.isin(ids, avoid).any():  # redraw the reserved ones (model_info leaves room)
            hit = np.isin(ids, avoid)
            ids[hit] = self.rng.integers(0 if low >= vocab - avoid.size else low, vocab, size=int(hit.sum()))
        return ids

    def padded(self, rows: list[np.ndarray], side: str = "left") -> tuple[np.ndarray, np.ndarray]:
        """Rows of different lengths padded into one batch with the pad token: ``(ids, mask)``."""
        pad = self.info.get("pad_token_id")
        pad = 0 if pad is None else int(pad)
        n = max(len(r) for r in rows)
        ids = np.full((len(rows), n), pad, np.int64)
        mask = np.zeros((len(rows), n), np.int64)
        for b, r in enumerate(rows):
            sl = slice(n - len(r), n) if side == "left" else slice(0, len(r))
            ids[b, sl], mask[b, sl] = r, 1
        return ids, mask

    # model calls
    def forward(self, label: str, *, positions: np.ndarray, valid: Optional[np.ndarray] = None,
                cache_length: int = 0, documents: Optional[list] = None, mrope: Optional[np.ndarray] = None,
                keep: Optional[tuple] = None, **kwargs):
        """One forward pass; ``positions``: what the clause says each token's encoding sees (``mrope``:
        M-RoPE's ``[3, B, T]``, its temporal axis being ``positions``).  Other keyword arguments go to
        the model (``input_ids``, ..., an image's ``pixel_values``, ``image_grid_thw``,
        ``mm_token_type_ids``).  Returns ``(logits float64 [B, T, V], cache)``.  ``keep``: the probe kinds
        kept (the others, large, dropped: a long cache's attention)."""
        positions = np.array(positions, np.int64)  # the rule's, kept apart from what the model is handed
        out, _ = self._call(label, positions, kwargs)
        return self._recorded(label, positions, out, kwargs, valid, cache_length, keep, documents=documents,
                              mrope=mrope)

    def refused(self, label: str, *, positions: np.ndarray, limit: int, cache_length: int = 0, **kwargs) -> None:
        """A forward pass the model must refuse: it feeds ``positions`` past the ``limit`` the model declares
        (``max_positions``), and a model that returns logits wrapped or clamped them (recorded, every position
        judged: its probes then say which positions it used); an exception is the refusal the clause asks for."""
        positions = np.array(positions, np.int64)
        out, raised = self._call(label, positions, kwargs, refusing=True)
        if raised is not None:
            self.refusals.append({"label": label, "raised": f"{type(raised).__name__}: {exception_text(raised)}"})
            return
        self._recorded(label, positions, out, kwargs, None, cache_length)
        self.refusals.append({"label": label, "raised": None, "limit": int(limit), "text": (
            f"{label}: positions up to {int(positions.max())}, past the model's last position {limit - 1} "
            f"(max_positions {limit}), gave logits instead of an error (a model that declares its last position "
            "raises past it: a wrapped or clamped position encodes another token's)")})

    def _call(self, label: str, positions: np.ndarray, kwargs: dict, refusing: bool = False):
        """The model's ``forward`` on copies of ``kwargs``, compared with them afterwards: ``(output, None)``; an
        exception it raised named with the pass (an ``AdapterError``), or, ``refusing``, ``(None, exception)``."""
        handed = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        try:
            out = self.model.forward(**handed)
        except (Unsupported, PosencError):
            raise
        except (Exception, SystemExit, GeneratorExit) as e:  # noqa: BLE001 - the model's, named with the pass
            if refusing and isinstance(e, Exception):  # the refusal asked for, whatever its type
                return None, e
            top = int(positions.max()) if positions.size else 0
            hint = ("; a model that takes fewer positions declares max_positions" if top >= 64 and
                    self.info.get("max_positions") is None else "")
            raise AdapterError(f"{label} (positions up to {top}): the model raised {type(e).__name__}: "
                               f"{exception_text(e)}{hint}") from e
        _unchanged(kwargs, handed, "forward")
        return out, None

    def _recorded(self, label: str, positions: np.ndarray, out, kwargs: dict, valid, cache_length: int,
                  keep: Optional[tuple] = None, **record):
        """A forward pass's output checked and recorded (its probes but those ``keep`` leaves out):
        ``(logits float64 [B, T, V], cache)``."""
        fed = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else kwargs.get("inputs_embeds")
        logits, cache = _unpack(out, "forward", tuple(np.shape(fed)[:2]), int(self.info["vocab_size"]))
        real = np.ones(logits.shape[:2], bool) if valid is None else np.broadcast_to(np.asarray(valid, bool), logits.shape[:2])
        probes = self.model.probes()
        if keep is not None and isinstance(probes, (list, tuple)):
            probes = [p for p in probes if not isinstance(p, dict) or p.get("kind") in keep]
        self._record(label, positions, valid, cache_length, kwargs.get("attention_mask"), probes,
                     static=self.static_capacity if kwargs.get("cache") is not None else 0,
                     image="pixel_values" in kwargs, finite=bool(np.isfinite(logits).all()),
                     finite_real=bool(np.isfinite(logits[real]).all()), **record)
        return logits, cache

    def embed(self, input_ids: np.ndarray) -> np.ndarray:
        """The model's token embeddings ``[B, T, E]`` of ``input_ids`` (``embed`` is handed a copy, which it
        must leave as it was)."""
        handed = np.array(input_ids, copy=True)
        out = self.model.embed(handed)
        _unchanged({"input_ids": input_ids}, {"input_ids": handed}, "embed")
        emb = np.array(as_array(out), copy=True)
        if emb.ndim != 3 or emb.shape[:2] != input_ids.shape or emb.dtype.kind != "f":
            raise AdapterError(f"embed(): the embeddings must be a floating [B, T, E] with B, T = "
                               f"{list(input_ids.shape)}, got {emb.dtype} of shape {list(emb.shape)}")
        return emb

    def new_cache(self, kind: str = "dynamic", *, batch: int, max_length: int):
        """A new cache of ``kind`` (``dynamic`` or ``static``, allocated for ``max_length`` tokens)."""
        self.static_capacity = max_length if kind == "static" else 0
        return self.model.new_cache(kind, batch=batch, max_length=max_length)

    def generate(self, label: str, input_ids: np.ndarray, attention_mask: Optional[np.ndarray], max_new_tokens: int,
                 use_cache: bool, mrope: Optional[np.ndarray] = None, **extra) -> tuple[np.ndarray, np.ndarray]:
        """Greedy generation; returns ``(sequences int [B, T + N], step logits float64 [B, N, V])``.
        ``attention_mask`` None: the model is handed none (rows of one length, every token real).
        Every forward pass it made is recorded, its expected positions read from the full
        sequence's mask (``cumsum - 1`` at real tokens) at the tokens that pass fed; with ``mrope``
        (the prompt's ``[3, B, T]``), M-RoPE's: the prompt's, then the largest + 1 + step on every axis.
        ``extra`` goes to the model (an image's inputs)."""
        given = {"input_ids": input_ids, "attention_mask": attention_mask, **extra}
        handed = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in given.items()}
        rest = {k: v for k, v in handed.items() if k not in ("input_ids", "attention_mask")}
        out = self.model.generate(handed["input_ids"], attention_mask=handed["attention_mask"],
                                  max_new_tokens=max_new_tokens, use_cache=use_cache, **rest)
        _unchanged(given, handed, "generate")  # the copies it was handed, compared with the kit's
        if not (isinstance(out, tuple) and len(out) == 2):
            raise AdapterError(f"generate() must return (sequences, step logits), got {type(out).__name__}")
        seqs, logits = np.asarray(as_array(out[0])), as_array(out[1]).astype(np.float64)
        b, t = input_ids.shape
        if seqs.ndim != 2 or seqs.shape[0] != b or seqs.shape[1] < t + max_new_tokens or \
                not np.array_equal(seqs[:, seqs.shape[1] - max_new_tokens - t:seqs.shape[1] - max_new_tokens], input_ids):
            raise AdapterError(f"generate(): sequences must be [B, T + {max_new_tokens}] holding the prompt then the "
                               f"new tokens (B, T = {b}, {t}), got shape {list(seqs.shape)}")
        vocab = int(self.info["vocab_size"])
        if logits.ndim != 3 or logits.shape != (b, max_new_tokens, vocab):
            raise AdapterError(f"generate(): step logits must be [B, {max_new_tokens}, {vocab}] (V: vocab_size), got "
                               f"{list(logits.shape)}")
        seqs = seqs.astype(np.int64)
        passes = self.model.probes(all_passes=True)
        if not isinstance(passes, (list, tuple)) or not all(isinstance(p, (list, tuple)) for p in passes):
            raise AdapterError("probes(all_passes=True) must return a list with one list of probes per forward pass")
        if len(passes) != max_new_tokens:
            raise AdapterError(f"generate(): probes(all_passes=True) lists {len(passes)} forward passes, but greedy "
                               f"generation of {max_new_tokens} tokens makes {max_new_tokens} (one per step logits)")
        lead = seqs.shape[1] - max_new_tokens - t  # tokens generate put before the prompt (a decoder start token)
        if lead and self.info["kind"] == "decoder":
            raise AdapterError(f"generate(): sequences hold {lead} token(s) before the prompt; a decoder's must be "
                               "the prompt then the new tokens (only an encoder-decoder's start with a decoder start "
                               "token)")
        _greedy(seqs[:, -max_new_tokens:], logits, self.info.get("reserved_token_ids") or ())
        given_mask = np.ones((b, t), np.int64) if attention_mask is None else attention_mask
        full_mask = np.concatenate([np.ones((b, max(lead, 0)), np.int64), given_mask,
                                    np.ones((b, max_new_tokens), np.int64)], axis=1)
        t += max(lead, 0)
        full_pos, full_valid = pos.left_pad(full_mask)
        full3 = None
        if mrope is not None:
            nxt = mrope.max(axis=(0, 2))[:, None] + 1 + np.arange(max_new_tokens)[None]  # [B, N]
            full3 = np.concatenate([mrope, np.broadcast_to(nxt, (3, *nxt.shape))], axis=-1)
            full_pos = full3[0]
        for i, probes in enumerate(passes):
            end = t + i  # pass i (0: the prompt) ends before token t + i
            n = _pass_length(probes, end)
            sl = slice(end - n, end)
            self._record(f"{label}: forward pass {i}", full_pos[:, sl], full_valid[:, sl], end - n,
                         None if attention_mask is None else full_mask[:, :end], probes, step=i, mrope=None if full3 is None else full3[..., sl],
                         image=i == 0 and "pixel_values" in extra or (not use_cache and "pixel_values" in extra),
                         finite=bool(np.isfinite(logits[:, i]).all()), finite_real=bool(np.isfinite(logits[:, i]).all()))
        return seqs, logits

    def _record(self, label, positions, valid, cache_length, mask, probes, documents=None, static=0, step=None,
                mrope=None, image=False, finite=True, finite_real=True):
        positions = np.asarray(positions, np.int64)
        self.calls.append({
            "label": label, "positions": positions,
            "valid": np.ones(positions.shape[-2:], bool) if valid is None else np.asarray(valid, bool),
            "cache_length": int(cache_length),
            "attention_mask": None if mask is None else np.asarray(mask, np.int64),
            "documents": documents, "static": int(static), "step": step,
            "mrope": None if mrope is None else np.asarray(mrope, np.int64), "image": bool(image),
            "finite": finite, "finite_real": finite_real, "probes": _plain_probes(probes)})

    def same(self, label: str, a: np.ndarray, b: np.ndarray, where: list[str]) -> None:
        """Record that logits ``a`` and ``b`` (``[n, V]``, the n rows named by ``where``) must be equal."""
        self.pairs.append({"label": label, "a": np.asarray(a, np.float64), "b": np.asarray(b, np.float64),
                           "where": list(where)})

    def changed(self, label: str, a: np.ndarray, b: np.ndarray, where: list[str]) -> None:
        """Record that logits ``a`` and ``b`` (``[n, V]``) must differ, row by row, by more than the logits
        bound: the positions fed differ in a way the clause says the model sees (a relative position
        changed), so equal logits mean the encoding was not used."""
        self.changes.append({"label": label, "a": np.asarray(a, np.float64), "b": np.asarray(b, np.float64),
                             "where": list(where)})

    def unchecked(self, what: str) -> None:
        """Record a check of the clause the model cannot take (said in the run's "checked without" notes)."""
        self.notes.append(what)

    def same_steps(self, label: str, a: tuple, b: tuple, rows: list[int], steps_of: str = "step") -> None:
        """Record that two greedy generations (``(sequences [B, T + N], logits [B, N, V])`` each, rows
        ``rows`` of ``a`` against rows 0.. of ``b``) agree step by step: their logits are compared up
        to and including each row's first step whose chosen token differs (after it the two
        continue from different tokens, which a near tie at that step allows)."""
        (sa, la), (sb, lb) = a, b
        n = la.shape[1]
        xs, ys, where = [], [], []
        for j, row in enumerate(rows):
            ta, tb = sa[row, -n:], sb[j, -n:]
            diff = np.flatnonzero(ta != tb)
            last = int(diff[0]) if diff.size else n - 1
            for s in range(last + 1):
                xs.append(la[row, s])
                ys.append(lb[j, s])
                where.append(f"row {row} {steps_of} {s}")
        self.same(label, np.stack(xs), np.stack(ys), where)

    def trace(self) -> dict:
        return {"calls": self.calls, "pairs": self.pairs, "changes": self.changes, "unchecked": self.notes,
                "refusals": self.refusals}


def _pass_length(probes: list, end: int) -> int:
    """How many tokens a generate forward pass fed (read from its probes; ``end`` when none tells)."""
    for p in probes:
        for key in ("q_in", "rows", "q", "bias"):
            if key in p:
                return int(np.shape(p[key])[-2] if key != "rows" else np.shape(p[key])[-1])
    return end


def _greedy(new: np.ndarray, logits: np.ndarray, reserved) -> None:
    """Greedy generation's tokens are its step logits' argmax (over the ids it may choose: not the
    reserved ones), a tie allowed: the logits are what the tokens were chosen from."""
    v = logits.shape[-1]
    if ((new < 0) | (new >= v)).any():
        raise AdapterError(f"generate(): new token ids must be in [0, {v}) (vocab_size), got {new.min()} .. {new.max()}")
    allowed = np.ones(v, bool)
    allowed[[int(r) for r in reserved if 0 <= int(r) < v]] = False
    top = np.where(allowed, logits, -np.inf).max(axis=-1)  # [B, N]
    chosen = np.take_along_axis(logits, new[..., None], axis=-1)[..., 0]
    bad = ~((chosen >= top) | (np.isnan(top) | np.isnan(chosen)))
    if bad.any():
        b, s = map(int, np.argwhere(bad)[0])
        raise AdapterError(f"generate(): row {b} step {s} chose token {int(new[b, s])} (logit {chosen[b, s]:.6g}), but "
                           f"its step logits' largest is {top[b, s]:.6g}: greedy tokens must be the argmax of the step "
                           "logits returned")


def as_array(x) -> np.ndarray:
    """A model's output as a NumPy array: NumPy, or a framework tensor (torch: bfloat16 and float16
    widened to float32)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch
        x = x.detach()
        if str(x.dtype) in ("torch.bfloat16", "torch.float16"):
            x = x.float()
        return x.cpu().numpy()
    if hasattr(x, "numpy"):  # tensorflow, jax
        return np.asarray(x.numpy() if callable(x.numpy) else x)
    return np.asarray(x)


def _unpack(out, what: str, shape: tuple[int, int], vocab: int):
    """``(logits float64 [B, T, V], cache)`` of a forward pass that fed ``shape`` = (B, T) tokens:
    every token's logits over the model's ``vocab_size``, or the adapter's error naming what differs."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise AdapterError(f"{what}() must return (logits, cache), got {type(out).__name__}")
    logits = as_array(out[0])
    if logits.ndim != 3 or logits.dtype.kind not in "fiu":
        raise AdapterError(f"{what}(): logits must be a numeric [B, T, V], got {logits.dtype} of shape {list(logits.shape)}")
    if logits.shape != (*shape, vocab):
        raise AdapterError(f"{what}(): logits of shape {list(logits.shape)}, but the pass fed [B, T] = {list(shape)} "
                           f"tokens of a vocabulary of {vocab} (vocab_size): [B, T, V] = {[*shape, vocab]} is required "
                           "(every token's logits, none dropped as logits_to_keep would; vocab_size the logits' width)")
    return logits.astype(np.float64), out[1]


def _unchanged(given: dict, handed: dict, what: str) -> None:
    """The model must not modify the arrays it is handed (they are copies: the kit's stay right, and
    an in-place write is the model's error, as in the operation suite)."""
    for k, v in given.items():
        if isinstance(v, np.ndarray) and not np.array_equal(v, handed[k], equal_nan=v.dtype.kind == "f"):
            raise AdapterError(f"{what}(): the model modified its input {k!r} in place (work on a copy)")


def _plain_probes(probes) -> list[dict]:
    """The probes of one forward pass as plain data (arrays as NumPy, float64 where floating);
    ``AdapterError`` when they are not a list of dicts."""
    if probes is None:
        return []
    if not isinstance(probes, (list, tuple)) or not all(isinstance(p, dict) for p in probes):
        raise AdapterError(f"probes() must return a list of dicts (one per probe), got "
                           f"{type(probes).__name__}" + (f" of {type(probes[0]).__name__}" if isinstance(probes, (list, tuple))
                                                         and probes else ""))
    out = []
    for i, p in enumerate(probes):
        d = {}
        for k, v in p.items():
            if not isinstance(k, str):
                raise AdapterError(f"probe {i} ({p.get('kind')!r}): its keys must be strings, got {type(k).__name__} "
                                   f"{k!r}")
            if k == "kind" and not isinstance(v, str):
                raise AdapterError(f"probe {i}: unknown probe kind {v!r} (a string: rope, table, bias, attention)")
            if isinstance(v, np.generic) and v.dtype.kind in "biuf":  # a NumPy scalar (a layer index as np.int64)
                v = v.item()
            if isinstance(v, (str, int, float, bool)) or v is None:
                d[k] = v
                continue
            try:  # a copy, whatever its dtype: a model may reuse its buffers on the next pass
                a = as_array(v)
            except Exception as e:  # noqa: BLE001 - what the model put there: named
                raise AdapterError(f"probe {i} ({p.get('kind')!r}): {k!r} is a {type(v).__name__} that is no array "
                                   f"({type(e).__name__}: {exception_text(e)})") from None
            if a.dtype.kind not in "biuf":
                raise AdapterError(f"probe {i} ({p.get('kind')!r}): {k!r} is an array of {a.dtype}: probes hold "
                                   "numbers (integer, floating or boolean arrays)")
            if a.ndim == 0:  # a 0-d tensor: a layer as torch.tensor(3), a scale
                d[k] = a.item()
            else:
                d[k] = a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else np.array(a, copy=True)
        out.append(d)
    return out


# ---- facts -------------------------------------------------------------------------------------------


@dataclass
class Facts:
    """What a scenario's run showed, for the model-level mutants: per forward pass its record
    (``calls[i]``) and the positions its encoding used (``used[i]``: int ``[B, T]`` recovered from
    the probes, -1 where no position was encoded; ``None`` where no probe tells); the largest
    attention probability across packed documents and on padded keys (``None`` without an
    attention probe)."""

    calls: list[dict]
    used: list[Optional[np.ndarray]]
    #: per forward pass, which probe its ``used`` positions come from: ``rope`` (an unrotated token,
    #: -1, is also position 0), ``table`` or ``bias`` (-1: strictly no position)
    used_from: list[Optional[str]] = field(default_factory=list)
    cross_document: Optional[float] = None
    on_pads: Optional[float] = None
    extra: dict = field(default_factory=dict)

    def positions_are(self, rule: Callable[[dict], Optional[np.ndarray]]) -> Optional[bool]:
        """Whether every forward pass whose positions are known used ``rule(call)`` (compared at its
        valid tokens; -1, nothing encoded, also stands for position 0, which no rotation shows);
        ``None`` when the rule gives nothing that differs from the clause's positions in any of them
        (the bug has no visible form in this scenario)."""
        differs, seen = False, False
        sources = self.used_from or [None] * len(self.used)
        for call, used, src in zip(self.calls, self.used, sources):
            if used is None:
                continue
            want = rule(call)
            if want is None:
                want = call["positions"]
            want = np.asarray(want)
            if want.shape != used.shape:
                return False
            v = np.broadcast_to(call["valid"], used.shape)
            seen = True
            differs |= bool((want != call["positions"])[v].any())
            same = want == used
            if src == "rope":  # a rotation by 0 leaves q and k unchanged: -1 and 0 are one rotation
                same |= ((used == -1) & (want == 0)) | ((want == -1) & (used == 0))
            if not same[v].all():
                return False
        return True if seen and differs else None


def cached_real(call: dict) -> np.ndarray:
    """Per row, how many real tokens the cache held before this pass."""
    m, c = call["attention_mask"], call["cache_length"]
    b = call["positions"].shape[-2]
    if m is None or c == 0:
        return np.full(b, c, np.int64)
    return np.asarray(m)[:, :c].sum(axis=1).astype(np.int64)


def beyond_used(calls: list[dict], used: list, refusal: dict) -> str:
    """What a pass that should have raised (:meth:`Run.refused`) did with its positions past the limit, in words,
    where its probes tell (``used``: the positions recovered per pass): clamped to the last one, wrapped
    modulo the limit, or the positions themselves (an encoding computed past the declared end)."""
    for call, u in zip(calls, used):
        if call["label"] != refusal["label"] or u is None:
            continue
        p, limit = call["positions"], refusal["limit"]
        over = np.broadcast_to(p >= limit, u.shape)
        got, want = u[over], p[np.broadcast_to(over, p.shape)]
        got = np.where(got == -1, 0, got)  # -1: q and k unrotated, which is position 0's rotation
        for words, rule in (("clamped to the last position", np.minimum(want, limit - 1)),
                            (f"wrapped (position mod {limit})", want % limit),
                            ("encoded as any other position would be (an encoding past the declared end)", want)):
            if got.size and np.array_equal(got, rule):
                return f"; its probes show the positions past the end {words}: {', '.join(map(str, got[:6]))}"
        return f"; its probes show positions {', '.join(map(str, got[:6]))} there"
    return ""
