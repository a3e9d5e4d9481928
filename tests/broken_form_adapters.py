import torch
from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope


class _IgnoresOffsets(TorchRope):
    def apply_offsets(self, q, k, offsets):
        t = torch.arange(q.shape[2], dtype=offsets.dtype)
        return self.apply(q, k, torch.zeros_like(offsets)[:, None] + t)


class IgnoresOffsets(TorchAdapter):
    name = "broken-ignores-offsets"

    def rope(self, params, *, dtype, device):
        return _IgnoresOffsets(params, DTYPES[dtype], device)


class _ReadsAsHeadMajor(TorchRope):
    def apply_token_major(self, q, k, position_ids):  # [B, T, H, D] read as [B, H, T, D] (a view taken as contiguous)
        B, T, H, D = q.shape
        q2, k2 = self.apply(q.reshape(B, H, T, D), k.reshape(B, k.shape[2], T, D), position_ids)
        return q2.reshape(B, T, H, D), k2.reshape(B, T, k.shape[2], D)


class ReadsAsHeadMajor(TorchAdapter):
    name = "broken-token-major-read-as-head-major"

    def rope(self, params, *, dtype, device):
        return _ReadsAsHeadMajor(params, DTYPES[dtype], device)


class _Int16Positions(TorchRope):
    def apply(self, q, k, position_ids):  # an index type too narrow: positions wrap at 32768
        if position_ids.dtype == torch.int32:
            position_ids = position_ids.to(torch.int16)
        return super().apply(q, k, position_ids)


class Int32ReadAsInt16(TorchAdapter):
    name = "broken-int32-positions-as-int16"

    def rope(self, params, *, dtype, device):
        return _Int16Positions(params, DTYPES[dtype], device)


class _PackedNoRestart(TorchRope):
    def apply_packed(self, q, k, cu_seqlens, offsets):  # positions run on across documents (Megatron-Core PR 5243's kind)
        pos = offsets[0] + torch.arange(q.shape[0])
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], pos[None])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)


class PackedNoRestart(TorchAdapter):
    name = "broken-packed-positions-run-on"

    def rope(self, params, *, dtype, device):
        return _PackedNoRestart(params, DTYPES[dtype], device)


class _WritesNextHead(TorchRope):
    def apply_(self, q, k, position_ids):  # the kernel's grid covers one head too many (SGLang issue 35096's kind)
        q2, k2 = self.apply(q, k, position_ids)
        q.copy_(q2)
        k.copy_(k2)
        B, H, T, D = q.shape
        wide = torch.as_strided(q, (B, H + 1, T, D), q.stride(), q.storage_offset())
        wide[:, H] = 0.0


class WritesNextHead(TorchAdapter):
    name = "broken-inplace-writes-next-head"

    def rope(self, params, *, dtype, device):
        return _WritesNextHead(params, DTYPES[dtype], device)


class _InplaceOnACopy(TorchRope):
    def apply_(self, q, k, position_ids):  # .contiguous() of a strided view is a copy: the writes never land
        q, k = q.contiguous(), k.contiguous()
        q2, k2 = self.apply(q, k, position_ids)
        q.copy_(q2)
        k.copy_(k2)


class InplaceOnACopy(TorchAdapter):
    name = "broken-inplace-on-a-copy"

    def rope(self, params, *, dtype, device):
        return _InplaceOnACopy(params, DTYPES[dtype], device)


class _ReadsStorageAsContiguous(TorchRope):
    def apply(self, q, k, position_ids):  # a kernel indexing the storage as if the view were contiguous
        if not q.is_contiguous():
            q = torch.as_strided(q, q.shape, torch.empty(q.shape).stride(), q.storage_offset())
            k = torch.as_strided(k, k.shape, torch.empty(k.shape).stride(), k.storage_offset())
        return super().apply(q, k, position_ids)


class ReadsStorageAsContiguous(TorchAdapter):
    name = "broken-strided-read-as-contiguous"

    def rope(self, params, *, dtype, device):
        return _ReadsStorageAsContiguous(params, DTYPES[dtype], device)


class _InplaceRebinds(TorchRope):
    def apply_(self, q, k, position_ids):  # rebinds the tensors it was handed: the caller's buffer never changes
        q2, k2 = self.apply(q, k, position_ids)
        q.set_(q2)
        k.data = k2


class InplaceRebinds(TorchAdapter):
    name = "broken-inplace-rebinds"

    def rope(self, params, *, dtype, device):
        return _InplaceRebinds(params, DTYPES[dtype], device)


class _OffsetTwice(TorchRope):
    def apply_offset(self, q, k, offset):  # the offset added to positions that already hold it
        t = torch.arange(q.shape[2]) + 2 * int(offset)
        return self.apply(q, k, t[None].expand(q.shape[0], -1))


class OffsetTwice(TorchAdapter):
    name = "broken-offset-added-twice"

    def rope(self, params, *, dtype, device):
        return _OffsetTwice(params, DTYPES[dtype], device)


class _DocumentsOfTheFirstLength(TorchRope):
    def apply_packed(self, q, k, cu_seqlens, offsets):  # every document as long as the first
        n = int(cu_seqlens[1] - cu_seqlens[0])
        pos = torch.cat([o + torch.arange(n) for o in offsets])[: q.shape[0]]
        pos = torch.cat([pos, pos[-1:].expand(q.shape[0] - pos.shape[0])]) if pos.shape[0] < q.shape[0] else pos
        q2, k2 = self.apply(q.transpose(0, 1)[None], k.transpose(0, 1)[None], pos[None])
        return q2[0].transpose(0, 1), k2[0].transpose(0, 1)


class DocumentsOfTheFirstLength(TorchAdapter):
    name = "broken-packed-documents-of-the-first-length"

    def rope(self, params, *, dtype, device):
        return _DocumentsOfTheFirstLength(params, DTYPES[dtype], device)


class _Int32Low20Bits(TorchRope):
    def apply(self, q, k, position_ids):  # an int32 kernel that packs positions in 20 bits
        if position_ids.dtype == torch.int32:
            position_ids = position_ids & ((1 << 20) - 1)
        return super().apply(q, k, position_ids)


class Int32Low20Bits(TorchAdapter):
    name = "broken-int32-positions-in-20-bits"

    def rope(self, params, *, dtype, device):
        return _Int32Low20Bits(params, DTYPES[dtype], device)


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


class _DecodeOffByOne(TorchRope):
    def apply(self, q, k, position_ids):  # a single-token call (a decode step) rotated at position + 1
        return super().apply(q, k, position_ids + 1 if q.shape[2] == 1 else position_ids)


class DecodeOffByOne(TorchAdapter):
    name = "broken-decode-off-by-one"

    def rope(self, params, *, dtype, device):
        return _DecodeOffByOne(params, DTYPES[dtype], device)


class _StaleDecodeOffset(TorchRope):
    def apply_offset(self, q, k, offset):  # a decode step read at the cache length before this token was counted
        return super().apply_offset(q, k, offset - 1 if q.shape[2] == 1 else offset)  # (mlx-lm issue 1699's kind)


class StaleDecodeOffset(TorchAdapter):
    name = "broken-decode-offset-stale"
    call_forms = ("rope.apply_offset",)

    def rope(self, params, *, dtype, device):
        return _StaleDecodeOffset(params, DTYPES[dtype], device)


class _PackedScaledUnsupported(TorchRope):
    def apply_packed(self, q, k, cu_seqlens, offsets):  # a varlen kernel without a path for scaled or partial RoPE
        if self.p.rope_type != "default" or self.p.rdim != self.p.head_dim:
            from posenc.adapters import Unsupported
            raise Unsupported("the varlen kernel has only full-width default RoPE")
        return super().apply_packed(q, k, cu_seqlens, offsets)


class PackedScaledUnsupported(TorchAdapter):
    name = "varlen-kernel-default-rope-only"

    def rope(self, params, *, dtype, device):
        return _PackedScaledUnsupported(params, DTYPES[dtype], device)


class _Int32Low21Bits(TorchRope):
    def apply(self, q, k, position_ids):  # an int32 kernel that keeps 21 bits of each position
        if position_ids.dtype == torch.int32:
            position_ids = position_ids & ((1 << 21) - 1)
        return super().apply(q, k, position_ids)


class Int32Low21Bits(TorchAdapter):
    name = "broken-int32-low-21-bits"
    call_forms = ("rope.apply_int32",)

    def rope(self, params, *, dtype, device):
        return _Int32Low21Bits(params, DTYPES[dtype], device)


class _Int32IndexWraps(TorchRope):
    def apply(self, q, k, position_ids):  # a flat cos/sin table index pos * 1024 computed in int32: wraps past 2**21
        if position_ids.dtype == torch.int32:
            position_ids = torch.div(position_ids * 1024, 1024, rounding_mode="floor")
        return super().apply(q, k, position_ids)


class Int32IndexWraps(TorchAdapter):
    name = "broken-int32-index-wraps"
    call_forms = ("rope.apply_int32",)

    def rope(self, params, *, dtype, device):
        return _Int32IndexWraps(params, DTYPES[dtype], device)


class _OffsetScalesFromT(TorchRope):
    def apply_offset(self, q, k, offset):  # dynamic / LongRoPE frequencies from the call's T, not offset + T
        T = q.shape[2]
        self._update(torch.arange(T)[None])
        keep, self._update = self._update, lambda pid: None
        try:
            pos = int(offset) + torch.arange(T, dtype=torch.int64)
            return self.apply(q, k, pos.expand(q.shape[0], -1))
        finally:
            self._update = keep


class OffsetScalesFromT(TorchAdapter):
    name = "broken-offset-scales-from-t"
    call_forms = ("rope.apply_offset",)

    def rope(self, params, *, dtype, device):
        return _OffsetScalesFromT(params, DTYPES[dtype], device)


class _IgnoresPositions(TorchRope):
    def apply(self, q, k, position_ids):  # angles from arange(T): position_ids ignored
        t = torch.arange(q.shape[2], dtype=torch.int64).expand(q.shape[0], -1)
        return super().apply(q, k, t)


class IgnoresPositions(TorchAdapter):
    name = "broken-ignores-positions"

    def rope(self, params, *, dtype, device):
        return _IgnoresPositions(params, DTYPES[dtype], device)


class _WrongAtHead80(TorchRope):
    def apply(self, q, k, position_ids):  # a special-cased kernel for head 80 that writes q's dims in reverse order
        q2, k2 = super().apply(q, k, position_ids)
        if q.shape[-1] == 80:
            return q2.flip(-1), k2
        return q2, k2


class WrongAtHead80(TorchAdapter):
    name = "broken-at-head-80"

    def rope(self, params, *, dtype, device):
        return _WrongAtHead80(params, DTYPES[dtype], device)


class PackedOnlyNoRestart(PackedNoRestart):
    """PackedNoRestart serving the packed form alone: the generated examples it can take go through it often."""
    name = "broken-packed-only-positions-run-on"
    call_forms = ("rope.apply_packed",)


# ---- the forms of mrope.apply and axial.apply ---------------------------------------------------------------------
from posenc.adapters.torch_port.axial import TorchAxial  # noqa: E402
from posenc.adapters.torch_port.mrope import TorchMRope  # noqa: E402


class _TokenPositionsReadTokenMajor(TorchMRope):
    def apply_tokens(self, q, k, positions):  # [3, N] read as the [N, 3] buffer the kernel expects
        return super().apply_tokens(q, k, positions.reshape(-1, positions.shape[0]).T)


class MRopeTokenPositionsTransposed(TorchAdapter):
    name = "broken-mrope-token-positions-transposed"

    def mrope(self, params, *, dtype, device):
        return _TokenPositionsReadTokenMajor(params, DTYPES[dtype], device)


class _MRopeReadsAsHeadMajor(TorchMRope):
    def apply_token_major(self, q, k, position_ids):  # [B, T, H, D] read as [B, H, T, D]
        B, T, H, D = q.shape
        q2, k2 = self.apply(q.reshape(B, H, T, D), k.reshape(B, k.shape[2], T, D), position_ids)
        return q2.reshape(B, T, H, D), k2.reshape(B, T, k.shape[2], D)


class MRopeReadsAsHeadMajor(TorchAdapter):
    name = "broken-mrope-token-major-read-as-head-major"

    def mrope(self, params, *, dtype, device):
        return _MRopeReadsAsHeadMajor(params, DTYPES[dtype], device)


class _MRopeInt16Positions(TorchMRope):
    def apply(self, q, k, position_ids):  # an index type too narrow: positions wrap at 32768
        if position_ids.dtype == torch.int32:
            position_ids = position_ids.to(torch.int16)
        return super().apply(q, k, position_ids)


class MRopeInt32ReadAsInt16(TorchAdapter):
    name = "broken-mrope-int32-positions-as-int16"

    def mrope(self, params, *, dtype, device):
        return _MRopeInt16Positions(params, DTYPES[dtype], device)


class _AxialReadsStorage(TorchAxial):
    def apply(self, q, k, position_ids):  # a kernel indexing the storage as if the view were contiguous
        if not q.is_contiguous():
            q = torch.as_strided(q, q.shape, torch.empty(q.shape).stride(), q.storage_offset())
            k = torch.as_strided(k, k.shape, torch.empty(k.shape).stride(), k.storage_offset())
        return super().apply(q, k, position_ids)


class AxialReadsStorageAsContiguous(TorchAdapter):
    name = "broken-axial-strided-read-as-contiguous"

    def axial(self, params, *, dtype, device):
        return _AxialReadsStorage(params, DTYPES[dtype], device)


class _AxialWritesNextHead(TorchAxial):
    def apply_(self, q, k, position_ids):  # the grid covers one head too many
        super().apply_(q, k, position_ids)
        B, H, T, D = k.shape
        wide = torch.as_strided(k, (B, H + 1, T, D), k.stride(), k.storage_offset())
        wide[:, H] = 0.0


class AxialWritesNextHead(TorchAdapter):
    name = "broken-axial-inplace-writes-next-head"

    def axial(self, params, *, dtype, device):
        return _AxialWritesNextHead(params, DTYPES[dtype], device)


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
