"""Broken kernels of the call forms (issue 30): each bug a mixin over the torch port's prepared rotation
(``TorchRope``, ``TorchMRope``, ``TorchAxial``), each adapter made by :func:`_adapter` -- the name, the family
it breaks, the bug and, where it matters, the forms it declares (else the port's)."""

import torch
from posenc.adapters import Adapter, Unsupported
from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope
from posenc.adapters.torch_port.axial import TorchAxial
from posenc.adapters.torch_port.mrope import TorchMRope

_PORTS = {"rope": TorchRope, "mrope": TorchMRope, "axial": TorchAxial}


def _adapter(name: str, bug: type, family: str = "rope", **attrs) -> type:
    """A TorchAdapter whose ``family`` operation is the port's with ``bug`` mixed in."""
    prepared = type(f"{bug.__name__}{family.title()}", (bug, _PORTS[family]), {})

    def prepare(self, params, *, dtype, device):
        return prepared(params, DTYPES[dtype], device)
    return type(name, (TorchAdapter,), {"name": name, family: prepare, **attrs})


# ---- positions: offsets, int32, decode steps ---------------------------------------------------------------------
class _IgnoresOffsets:
    def apply_offsets(self, q, k, offsets):
        t = torch.arange(q.shape[2], dtype=offsets.dtype)
        return self.apply(q, k, torch.zeros_like(offsets)[:, None] + t)


class _OffsetTwice:
    def apply_offset(self, q, k, offset):  # the offset added to positions that already hold it
        t = torch.arange(q.shape[2]) + 2 * int(offset)
        return self.apply(q, k, t[None].expand(q.shape[0], -1))


class _OffsetScalesFromT:
    def apply_offset(self, q, k, offset):  # dynamic / LongRoPE frequencies from the call's T, not offset + T
        T = q.shape[2]
        self._update(torch.arange(T)[None])
        keep, self._update = self._update, lambda pid: None
        try:
            pos = int(offset) + torch.arange(T, dtype=torch.int64)
            return self.apply(q, k, pos.expand(q.shape[0], -1))
        finally:
            self._update = keep


class _StaleDecodeOffset:
    def apply_offset(self, q, k, offset):  # a decode step read at the cache length before this token was counted
        return super().apply_offset(q, k, offset - 1 if q.shape[2] == 1 else offset)  # (mlx-lm issue 1699's kind)


class _FirstCallFrequencies:
    """The frequencies of the prepared object's first call kept for every later one (dynamic NTK, LongRoPE: a
    decode step past the prefill's length uses the prefill's), in one form's method alone."""
    _kept = None

    def _frozen(self, call):
        if self._kept is None:
            out = call()
            self._kept = self._inv_freq
            return out
        keep, self._update = self._update, lambda pid: setattr(self, "_inv_freq", self._kept)
        try:
            return call()
        finally:
            self._update = keep


class _RowOffsetsFirstCall(_FirstCallFrequencies):
    def apply_offsets(self, q, k, offsets):
        return self._frozen(lambda: super(_RowOffsetsFirstCall, self).apply_offsets(q, k, offsets))


class _InplaceFirstCall(_FirstCallFrequencies):
    def apply_(self, q, k, position_ids):
        return self._frozen(lambda: super(_InplaceFirstCall, self).apply_(q, k, position_ids))


class _DecodeOffByOne:
    def apply(self, q, k, position_ids):  # a single-token call (a decode step) rotated at position + 1
        return super().apply(q, k, position_ids + 1 if q.shape[2] == 1 else position_ids)


class _IgnoresPositions:
    def apply(self, q, k, position_ids):  # angles from arange(T): position_ids ignored
        t = torch.arange(q.shape[2], dtype=torch.int64).expand(q.shape[0], -1)
        return super().apply(q, k, t)


def _int32_as(transform):
    """A bug of int32 positions alone: ``transform(position_ids)`` before the port's apply."""
    class _Int32Bug:
        def apply(self, q, k, position_ids):
            return super().apply(q, k, transform(position_ids) if position_ids.dtype == torch.int32 else position_ids)
    return _Int32Bug


_Int16Positions = _int32_as(lambda p: p.to(torch.int16))  # an index type too narrow: positions wrap at 32768
_Int32Low20Bits = _int32_as(lambda p: p & ((1 << 20) - 1))  # positions packed in 20 bits
_Int32Low21Bits = _int32_as(lambda p: p & ((1 << 21) - 1))
# a flat cos/sin table index pos * 1024 computed in int32: wraps past 2**21
_Int32IndexWraps = _int32_as(lambda p: torch.div(p * 1024, 1024, rounding_mode="floor"))

IgnoresOffsets = _adapter("broken-ignores-offsets", _IgnoresOffsets)
OffsetTwice = _adapter("broken-offset-added-twice", _OffsetTwice)
OffsetScalesFromT = _adapter("broken-offset-scales-from-t", _OffsetScalesFromT, call_forms=("rope.apply_offset",))
StaleDecodeOffset = _adapter("broken-decode-offset-stale", _StaleDecodeOffset, call_forms=("rope.apply_offset",))
DecodeOffByOne = _adapter("broken-decode-off-by-one", _DecodeOffByOne)
RowOffsetsFirstCall = _adapter("broken-row-offsets-first-call-frequencies", _RowOffsetsFirstCall)
InplaceFirstCall = _adapter("broken-inplace-first-call-frequencies", _InplaceFirstCall)
IgnoresPositions = _adapter("broken-ignores-positions", _IgnoresPositions)
Int32ReadAsInt16 = _adapter("broken-int32-positions-as-int16", _Int16Positions)
Int32Low20Bits = _adapter("broken-int32-positions-in-20-bits", _Int32Low20Bits)
Int32Low21Bits = _adapter("broken-int32-low-21-bits", _Int32Low21Bits, call_forms=("rope.apply_int32",))
Int32IndexWraps = _adapter("broken-int32-index-wraps", _Int32IndexWraps, call_forms=("rope.apply_int32",))
MRopeInt32ReadAsInt16 = _adapter("broken-mrope-int32-positions-as-int16", _Int16Positions, "mrope")


# ---- layouts and buffers -----------------------------------------------------------------------------------------
class _ReadsAsHeadMajor:
    def apply_token_major(self, q, k, position_ids):  # [B, T, H, D] read as [B, H, T, D] (a view taken as contiguous)
        B, T, H, D = q.shape
        q2, k2 = self.apply(q.reshape(B, H, T, D), k.reshape(B, k.shape[2], T, D), position_ids)
        return q2.reshape(B, T, H, D), k2.reshape(B, T, k.shape[2], D)


class _ReadsStorageAsContiguous:
    def apply(self, q, k, position_ids):  # a kernel indexing the storage as if the view were contiguous
        if not q.is_contiguous():
            q = torch.as_strided(q, q.shape, torch.empty(q.shape).stride(), q.storage_offset())
            k = torch.as_strided(k, k.shape, torch.empty(k.shape).stride(), k.storage_offset())
        return super().apply(q, k, position_ids)


class _WritesNextHead:
    def apply_(self, q, k, position_ids):  # the kernel's grid covers one head too many (SGLang issue 35096's kind)
        super().apply_(q, k, position_ids)
        B, H, T, D = q.shape
        wide = torch.as_strided(q, (B, H + 1, T, D), q.stride(), q.storage_offset())
        wide[:, H] = 0.0


class _InplaceOnACopy:
    def apply_(self, q, k, position_ids):  # .contiguous() of a strided view is a copy: the writes never land
        q, k = q.contiguous(), k.contiguous()
        q2, k2 = self.apply(q, k, position_ids)
        q.copy_(q2)
        k.copy_(k2)


class _InplaceRebinds:
    def apply_(self, q, k, position_ids):  # rebinds the tensors it was handed: the caller's buffer never changes
        q2, k2 = self.apply(q, k, position_ids)
        q.set_(q2)
        k.data = k2


class _WrongAtHead80:
    def apply(self, q, k, position_ids):  # a special-cased kernel for head 80 that writes q's dims in reverse order
        q2, k2 = super().apply(q, k, position_ids)
        return (q2.flip(-1), k2) if q.shape[-1] == 80 else (q2, k2)


class _TokenPositionsReadTokenMajor:
    def apply_tokens(self, q, k, positions):  # [3, N] read as the [N, 3] buffer the kernel expects
        return super().apply_tokens(q, k, positions.reshape(-1, positions.shape[0]).T)


ReadsAsHeadMajor = _adapter("broken-token-major-read-as-head-major", _ReadsAsHeadMajor)
ReadsStorageAsContiguous = _adapter("broken-strided-read-as-contiguous", _ReadsStorageAsContiguous)
WritesNextHead = _adapter("broken-inplace-writes-next-head", _WritesNextHead)
InplaceOnACopy = _adapter("broken-inplace-on-a-copy", _InplaceOnACopy)
InplaceRebinds = _adapter("broken-inplace-rebinds", _InplaceRebinds)
WrongAtHead80 = _adapter("broken-at-head-80", _WrongAtHead80)
MRopeTokenPositionsTransposed = _adapter("broken-mrope-token-positions-transposed", _TokenPositionsReadTokenMajor,
                                         "mrope")
MRopeReadsAsHeadMajor = _adapter("broken-mrope-token-major-read-as-head-major", _ReadsAsHeadMajor, "mrope")
AxialReadsStorageAsContiguous = _adapter("broken-axial-strided-read-as-contiguous", _ReadsStorageAsContiguous, "axial")
AxialWritesNextHead = _adapter("broken-axial-inplace-writes-next-head", _WritesNextHead, "axial")


# ---- packed documents --------------------------------------------------------------------------------------------
class _PackedNoRestart:
    def apply_packed(self, q, k, cu_seqlens, offsets):  # positions run on across documents (Megatron-Core PR 5243's kind)
        pos = offsets[0] + torch.arange(q.shape[0])
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], pos[None])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)


class _DocumentsOfTheFirstLength:
    def apply_packed(self, q, k, cu_seqlens, offsets):  # every document as long as the first
        n = int(cu_seqlens[1] - cu_seqlens[0])
        pos = torch.cat([o + torch.arange(n) for o in offsets])[: q.shape[0]]
        pos = torch.cat([pos, pos[-1:].expand(q.shape[0] - pos.shape[0])]) if pos.shape[0] < q.shape[0] else pos
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], pos[None])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)


class _PackedScaledUnsupported:
    def apply_packed(self, q, k, cu_seqlens, offsets):  # a varlen kernel without a path for scaled or partial RoPE
        if self.p.rope_type != "default" or self.p.rdim != self.p.head_dim:
            raise Unsupported("the varlen kernel has only full-width default RoPE")
        return super().apply_packed(q, k, cu_seqlens, offsets)


PackedNoRestart = _adapter("broken-packed-positions-run-on", _PackedNoRestart)
# serving the packed form alone: the generated examples it can take go through it often
PackedOnlyNoRestart = _adapter("broken-packed-only-positions-run-on", _PackedNoRestart, call_forms=("rope.apply_packed",))
DocumentsOfTheFirstLength = _adapter("broken-packed-documents-of-the-first-length", _DocumentsOfTheFirstLength)
PackedScaledUnsupported = _adapter("varlen-kernel-default-rope-only", _PackedScaledUnsupported)


# ---- declarations --------------------------------------------------------------------------------------------------
class _OnlyApply:
    def __init__(self, params, dtype, device):
        self._r = TorchRope(params, dtype, device)

    def apply(self, q, k, position_ids):
        return self._r.apply(q, k, position_ids)


class DeclaresFormsItLacks(TorchAdapter):
    name = "broken-declares-forms-it-lacks"
    call_forms = ("rope.apply_packed",)

    def rope(self, params, *, dtype, device):
        return _OnlyApply(params, DTYPES[dtype], device)


class DeclaresCacheFormItLacks(Adapter):  # torch arrays; the cache form's method misspelt (..._caches)
    name, framework = "broken-declares-cache-form-it-lacks", "torch"
    call_forms = ("rope.apply_with_cos_sin_cache",)
    from_numpy, to_numpy = TorchAdapter.from_numpy, TorchAdapter.to_numpy
    dtype_of, device_of = TorchAdapter.dtype_of, TorchAdapter.device_of
    rope_apply_with_cos_sin = TorchAdapter.rope_apply_with_cos_sin
    rope_apply_with_cos_sin_caches = TorchAdapter.rope_apply_with_cos_sin_cache


# ---- the forms of rope.apply_with_cos_sin ---------------------------------------------------------------------------
class HiddenHeadsMinorFirst(TorchAdapter):
    name = "broken-hidden-heads-minor-first"

    def rope_apply_with_cos_sin_hidden(self, q, k, cos, sin, params):  # [B, T, H * D] split as [B, T, D, H]
        B, T, D = q.shape[0], q.shape[1], params.head_dim
        yq, yk = self.rope_apply_with_cos_sin(q.reshape(B, T, D, -1).permute(0, 3, 1, 2),
                                              k.reshape(B, T, D, -1).permute(0, 3, 1, 2), cos, sin, params)
        return yq.permute(0, 2, 3, 1).reshape(B, T, -1), yk.permute(0, 2, 3, 1).reshape(B, T, -1)


class CacheReadByTokenIndex(TorchAdapter):
    name = "broken-cache-read-by-token-index"

    def rope_apply_with_cos_sin_cache(self, q, k, cos_cache, sin_cache, position_ids, params):  # position_ids unread
        B, T = position_ids.shape
        rows = torch.arange(B * T).reshape(B, T)
        return self.rope_apply_with_cos_sin(q, k, cos_cache[rows], sin_cache[rows], params)
