"""The call forms of rope.apply (spec rope.yaml ``form_of: rope.apply``, clause ROPE-CALL-FORM): one offset or
per-row offsets, int32 positions, tokens with a position each, the token-major layout, a packed buffer, strided
views and an in-place write -- and those of them M-RoPE and axial RoPE have (:func:`layout_forms`).  Each
converts a case of its primary into its form and back; the registry derives the form's reference from the
primary's, so the primary's goldens judge every form."""

from __future__ import annotations

import zlib

import numpy as np

from . import call_form, mutant, storage_read_as_contiguous
from ._common import run


def _row_offsets_primary(p, x):
    t = np.shape(x["q"])[2]
    off = np.asarray(x["offsets"], np.int64).reshape(-1)
    return {"q": x["q"], "k": x["k"], "position_ids": off[:, None] + np.arange(t, dtype=np.int64)}


def _offset_primary(p, x):
    t = np.shape(x["q"])[2]
    b = np.shape(x["q"])[0]
    return {"q": x["q"], "k": x["k"], "position_ids": np.broadcast_to(int(x["offset"]) + np.arange(t, dtype=np.int64), (b, t)).copy()}


@call_form("rope.apply_offset", "rope.apply", to_primary=_offset_primary, reads=("position_ids",))
def rope_apply_offset(p, x):
    """rope.apply's positions as ``offset + t`` for every row (a cache length: rotary-embedding-torch's and
    MLX's ``offset``): only where every row is the same run of consecutive positions."""
    off = _consecutive(np.asarray(x["position_ids"], np.int64))
    if isinstance(off, str):
        return off + ": no offset form"
    if off.size and (off != off[0]).any():
        return f"rows start at {sorted(set(off.tolist()))[:4]}: no single offset"
    return {"q": x["q"], "k": x["k"], "offset": np.int64(off[0] if off.size else 0)}


def _tokens_primary(p, x):
    """Tokens [N, H, D] at positions [N] (M-RoPE's and axial's [A, N]) as one row [1, H, N, D] at [1, N] ([A, 1,
    N]): a rotation is token by token, the rows the tokens came from do not change it (dynamic NTK's length is
    the largest position either way)."""
    return {"q": np.swapaxes(np.asarray(x["q"]), 0, 1)[None], "k": np.swapaxes(np.asarray(x["k"]), 0, 1)[None],
            "position_ids": np.asarray(x["positions"], np.int64)[..., None, :]}


def _tokens_to_rows(p, x, out: dict, primary=None) -> dict:
    """[N, H, D] outputs as the rows [B, H, T, D] of the primary's inputs (one row where none are given)."""
    return _unpack(out, np.shape(primary["position_ids"])[-2] if primary is not None else 1)


@call_form("rope.apply_tokens", "rope.apply", to_primary=_tokens_primary, outputs_to_primary=_tokens_to_rows,
           outputs_to_form=lambda p, x, out: _pack(out))
def rope_apply_tokens(p, x):
    """rope.apply's rows as tokens ``[B * T, H, D]``, each with its position (vLLM's, SGLang's and FlashInfer's
    ``positions`` / ``pos_ids``; M-RoPE's and axial's ``[A, B * T]``: vLLM's ``MRotaryEmbedding``): every case
    has this form."""
    if x.get("q") is None:
        return {}
    pid = np.asarray(x["position_ids"], np.int64)
    return {**_pack({"q": x["q"], "k": x["k"]}), "positions": pid.reshape(*pid.shape[:-2], -1)}


@call_form("rope.apply_row_offsets", "rope.apply", to_primary=_row_offsets_primary, reads=("position_ids",))
def rope_apply_row_offsets(p, x):
    """rope.apply's positions as ``offsets[b] + t``: only rows of consecutive positions (a kernel given an
    offset never sees a gap, a repeat or a padded row's own numbering)."""
    off = _consecutive(np.asarray(x["position_ids"], np.int64))
    return off + ": no offset form" if isinstance(off, str) else {"q": x["q"], "k": x["k"], "offsets": off}


def _swap(p, x, out: dict, primary=None) -> dict:
    """q and k between [B, H, T, D] and [B, T, H, D] (the same swap both ways); scalars as they are."""
    return {n: (np.swapaxes(v, 1, 2) if n in ("q", "k") and np.ndim(v) == 4 else v) for n, v in out.items()}


@call_form("rope.apply_token_major", "rope.apply", to_primary=lambda p, x: _swap(p, None, x), outputs_to_primary=_swap,
           outputs_to_form=_swap)
def rope_apply_token_major(p, x):
    """rope.apply's q and k as ``[B, T, H, D]``, the layout flash-attn's and vLLM's kernels take."""
    return _swap(p, None, x)


@call_form("rope.apply_int32", "rope.apply", to_primary=lambda p, x: dict(x), reads=("position_ids",))
def rope_apply_int32(p, x):
    """rope.apply's position_ids as int32 (the kit hands them so: the operation's input kind); positions past
    int32's range have no such form."""
    pid = np.asarray(x["position_ids"], np.int64)
    if pid.size and (pid.max() > np.iinfo(np.int32).max or pid.min() < np.iinfo(np.int32).min):
        return f"positions up to {int(pid.max())} do not fit int32"
    return dict(x)


def _consecutive(pid: np.ndarray):
    """Row b's offset where every row is ``offset + t``, else a reason (no offset form for it)."""
    off = pid[:, 0]
    bad = np.flatnonzero((pid != off[:, None] + np.arange(pid.shape[1])).any(axis=1))
    return off if not bad.size else f"row {int(bad[0])}'s positions are not offset + t ({pid[bad[0]][:6].tolist()}...)"


def _packed_primary(p, x):
    """A packed buffer's documents as one row ``[1, H, N, D]`` of its tokens at their positions (document d's
    ``offsets[d] + t``): any ``cu_seqlens``, documents of any lengths."""
    cu = np.asarray(x["cu_seqlens"], np.int64)
    off = np.asarray(x["offsets"], np.int64)
    pid = np.concatenate([o + np.arange(n, dtype=np.int64) for o, n in zip(off, np.diff(cu))] or [np.zeros(0, np.int64)])
    return {"q": np.swapaxes(np.asarray(x["q"]), 0, 1)[None], "k": np.swapaxes(np.asarray(x["k"]), 0, 1)[None],
            "position_ids": pid[None]}


def _documents(off: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """``(cu_seqlens, offsets)`` for rows at ``off`` of ``t`` tokens each, every even row of two tokens or more
    split in two documents (the second at its own offset: a chunked prefill's), so documents are of unequal
    lengths wherever a case has them -- a kernel that takes every document's length from the first fails."""
    lengths, offsets = [], []
    for b, o in enumerate(off.tolist()):
        cut = 1 + (b // 2) % (t - 1) if t >= 2 and b % 2 == 0 else t
        for start, n in ((0, cut), (cut, t - cut)):
            if n:
                lengths.append(n)
                offsets.append(o + start)
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64), np.asarray(offsets, np.int64)


@call_form("rope.apply_packed", "rope.apply", to_primary=_packed_primary, reads=("position_ids",),
           outputs_to_primary=_tokens_to_rows, outputs_to_form=lambda p, x, out: _pack(out))
def rope_apply_packed(p, x):
    """rope.apply's rows as documents of one packed buffer (flash-attn varlen, vLLM, SGLang): each row of
    consecutive positions is a document at its offset, its tokens in order, every even row of two tokens or
    more split in two documents (:func:`_documents`)."""
    off = _consecutive(np.asarray(x["position_ids"], np.int64))
    if isinstance(off, str):
        return off + ": no packed form"
    t = np.shape(x["position_ids"])[1]
    cu, doc_off = _documents(off, t)
    if x.get("q") is None:
        return {"offsets": doc_off}
    return {**_pack({"q": x["q"], "k": x["k"]}), "cu_seqlens": cu, "offsets": doc_off}


def _pack(out: dict) -> dict:
    """Rows [B, H, T, D] as a packed buffer [B * T, H, D] (scalars as they are)."""
    return {n: (np.swapaxes(v, 1, 2).reshape(-1, v.shape[1], v.shape[3]) if n in ("q", "k") and np.ndim(v) == 4 else v)
            for n, v in out.items()}


def _unpack(out: dict, b: int) -> dict:
    """A packed buffer [B * T, H, D] as ``b`` rows [B, H, T, D] (:func:`_pack`'s inverse; scalars as they are)."""
    return {n: (np.swapaxes(np.reshape(v, (b, -1, *np.shape(v)[1:])), 1, 2) if n in ("q", "k") and np.ndim(v) == 3 else v)
            for n, v in out.items()}


@call_form("rope.apply_inplace", "rope.apply", to_primary=lambda p, x: dict(x))
def rope_apply_inplace(p, x):
    """rope.apply written into q and k in place: the kit hands them as views into guarded buffers (a
    neighbouring head, token and slice of the head around each) and fails a write outside them."""
    return dict(x)


@call_form("rope.apply_strided", "rope.apply", to_primary=lambda p, x: dict(x))
def rope_apply_strided(p, x):
    """rope.apply on q and k handed as strided views (the kit's guarded buffers): a kernel that reads them as
    contiguous reads the neighbouring elements (llama.cpp PR 14580's kind)."""
    return dict(x)


def layout_forms(primary: str) -> None:
    """Register the call forms of rotation ``primary`` (``mrope.apply``, ``axial.apply``: q, k ``[B, H, T, D]``,
    position_ids ``[A, B, T]``) that keep each token's positions as they are -- tokens ``[N, H, D]`` at positions
    ``[A, N]``, the token-major layout, int32 positions, strided views and an in-place write -- with rope.apply's
    conversions.  The offset and packed forms are rope.apply's alone: M-RoPE's and axial's rows are not
    ``offset + t`` on every axis (an image's patches)."""
    for form, fn, kw in (
            ("tokens", rope_apply_tokens, dict(to_primary=_tokens_primary, outputs_to_primary=_tokens_to_rows,
                                               outputs_to_form=lambda p, x, out: _pack(out))),
            ("token_major", rope_apply_token_major, dict(to_primary=lambda p, x: _swap(p, None, x),
                                                         outputs_to_primary=_swap, outputs_to_form=_swap)),
            ("int32", rope_apply_int32, dict(to_primary=lambda p, x: dict(x), reads=("position_ids",))),
            ("inplace", rope_apply_inplace, dict(to_primary=lambda p, x: dict(x))),
            ("strided", rope_apply_strided, dict(to_primary=lambda p, x: dict(x)))):
        call_form(f"{primary}_{form}", primary, **kw)(fn)


def _fold(out: dict) -> dict:
    """q and k ``[B, H, T, D]`` as ``[B, T, H * D]`` (the heads folded into the hidden size); the rest as it is."""
    return {n: (np.swapaxes(v, 1, 2).reshape(v.shape[0], v.shape[2], -1) if n in ("q", "k") and np.ndim(v) == 4 else v)
            for n, v in out.items()}


def _unfold(p, x, out: dict, primary=None) -> dict:
    """:func:`_fold`'s inverse: ``[B, T, H * D]`` as ``[B, H, T, D]``, D the head (``params.head_dim``)."""
    return {n: (np.swapaxes(np.reshape(v, (*np.shape(v)[:2], -1, p.head_dim)), 1, 2)
                if n in ("q", "k") and np.ndim(v) == 3 else v) for n, v in out.items()}


@call_form("rope.apply_with_cos_sin_hidden", "rope.apply_with_cos_sin", to_primary=lambda p, x: _unfold(p, None, x),
           outputs_to_primary=_unfold, outputs_to_form=lambda p, x, out: _fold(out))
def rope_apply_with_cos_sin_hidden(p, x):
    """rope.apply_with_cos_sin's q and k as ``[B, T, H * D]`` (ONNX RotaryEmbedding's 3-D input, its
    ``num_heads`` attribute from ``H * D / head_dim``): every case has this form."""
    return _fold(x) if x.get("q") is not None else {}


def _gathered(p, x) -> dict:
    """The primary's inputs of the cache form: each token's cos and sin row ``cache[position_ids[b, t]]``."""
    pid = np.asarray(x["position_ids"], np.int64)
    return {"q": x["q"], "k": x["k"], "cos": np.asarray(x["cos_cache"])[pid], "sin": np.asarray(x["sin_cache"])[pid]}


#: The cache rows no token reads (row 0 and row P - 1, around the tokens' rows): a kernel one row off reads one
#: of them for one token, never past the cache.
UNREAD_ROW = (0.25, -0.5)


def _cache_rows(cos: np.ndarray) -> np.ndarray:
    """The cache row (1 .. n) of each of the n tokens of ``cos`` ``[B, T, R]`` (row-major): a permutation seeded by
    the values (the same case, the same rows), never the tokens' order, nor its reverse, where n >= 3."""
    n = int(np.prod(np.shape(cos)[:2]))
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(cos, np.float64).tobytes()))
    perm = rng.permutation(n)
    if n >= 3 and (np.array_equal(perm, np.arange(n)) or np.array_equal(perm, np.arange(n)[::-1])):
        perm = np.roll(np.arange(n), 1)
    return 1 + perm.astype(np.int64)


@call_form("rope.apply_with_cos_sin_cache", "rope.apply_with_cos_sin", to_primary=_gathered)
def rope_apply_with_cos_sin_cache(p, x):
    """rope.apply_with_cos_sin's cos and sin as caches ``[P, R]`` gathered at ``position_ids [B, T]`` (ONNX
    RotaryEmbedding's ``position_ids`` input, vLLM's ``cos_sin_cache[positions]``): P = B * T + 2 rows, the B * T
    tokens' rows in an order drawn from the case's cos values (:func:`_cache_rows`) between two rows no token
    reads (:data:`UNREAD_ROW`), so a kernel that reads the cache by token index, from its end or a row off either
    way reads another token's angles.  Every case has this form."""
    if x.get("cos") is None:
        return {}
    cos, sin = np.asarray(x["cos"]), np.asarray(x["sin"])
    b, t, r = cos.shape
    n = b * t
    rows = _cache_rows(cos)
    cache = {}
    for name, a, fill in (("cos_cache", cos, UNREAD_ROW[0]), ("sin_cache", sin, UNREAD_ROW[1])):
        c = np.full((n + 2, r), fill, dtype=a.dtype)
        c[rows] = a.reshape(n, r)
        cache[name] = c
    return {"q": x["q"], "k": x["k"], **cache, "position_ids": rows.reshape(b, t)}


# ---- the call forms' own bugs (ROPE-CALL-FORM) -----------------------------------------------------------------


@mutant("rope_layout_misread", "rope.apply_token_major", "rope.apply_tokens", "rope.apply_packed",
        *(f"{p}_{f}" for p in ("mrope.apply", "axial.apply") for f in ("token_major", "tokens")))
def rope_layout_misread(op, p, x, dtype=None):
    """q and k read in the head-major order of their memory: a token-major ``[B, T, H, D]`` buffer indexed as
    ``[B, H, T, D]`` (tokens ``[N, H, D]`` as ``[H, N, D]``), rotated at the positions of that reading and
    written back the same way -- a kernel that takes another layout's strides (or a view as contiguous)."""
    def read(v):
        v = np.asarray(v)
        return np.swapaxes(v.reshape(v.shape[0], v.shape[2], v.shape[1], -1), 1, 2) if v.ndim == 4 else \
            np.swapaxes(v.reshape(v.shape[1], v.shape[0], -1), 0, 1)
    out = run(op, p, {**x, "q": read(x["q"]), "k": read(x["k"])})

    def write(v):  # the inverse of read: the mutant's rows written in the layout it took
        v = np.asarray(v)
        return np.swapaxes(v, 1, 2).reshape(v.shape) if v.ndim == 4 else np.swapaxes(v, 0, 1).reshape(v.shape)
    return {n: (write(v) if n in ("q", "k") else v) for n, v in out.items()}


@mutant("rope_strides_ignored", "rope.apply_strided", "mrope.apply_strided", "axial.apply_strided")
def rope_strides_ignored(op, p, x, dtype=None):
    """q and k read as if the strided views the kit hands were contiguous: consecutive elements of the buffer
    from the view's first one, margins and neighbouring heads included (llama.cpp PR 14580's kind)."""
    return run(op, p, {**x, "q": storage_read_as_contiguous(x["q"]), "k": storage_read_as_contiguous(x["k"])})


@mutant("rope_packed_no_restart", "rope.apply_packed")
def rope_packed_no_restart(op, p, x, dtype=None):
    """The packed buffer's positions run on across documents from the first document's offset instead of
    restarting at each document's own (Megatron-Core PR 5243's kind)."""
    cu = np.asarray(x["cu_seqlens"], np.int64)
    off = np.asarray(x["offsets"], np.int64)
    first = int(off[0]) if off.size else 0
    return run(op, p, {**x, "offsets": first + cu[:-1]})
