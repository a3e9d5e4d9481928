"""The ``torchtune`` adapter: a thin wrapper around torchtune's own positional modules.

Every number this adapter returns is computed by torchtune 0.6.1 on torch.  The wrapper builds
the library's modules from the spec's parameter models, transposes between the canonical
``[B, H, T, D]`` layout and torchtune's ``[b, s, n_h, h_d]``, passes ``position_ids`` as
torchtune's ``input_pos [b, s]`` and reads the library's own buffers; it never imports
``posenc.reference`` and never re-implements what the library computes.  What torchtune cannot
express raises :class:`~posenc.adapters.base.Unsupported` with the reason.

Which torchtune code backs each operation (paths under ``torchtune/``):

=====================================  =====================================================
``rope`` interleaved, rope_type        ``modules/position_embeddings.py``:
default                                ``RotaryPositionalEmbeddings(dim, max_seq_len, base)``
                                       (Llama 2/3, Mistral, Gemma builders)
``rope`` interleaved, rope_type        ``models/llama3_1/_position_embeddings.py``:
llama3                                 ``Llama3ScaledRoPE(dim, max_seq_len, base, scale_factor,
                                       low_freq_factor, high_freq_factor, old_context_len)``;
                                       ``base`` is passed explicitly (its default is 10000,
                                       not Llama 3's 500000)
``rope`` half, rope_type default       ``models/qwen2/_positional_embeddings.py``:
                                       ``Qwen2RotaryPositionalEmbeddings`` (cos/sin cast to the
                                       activation dtype); variant ``PHI3_ADAPTER``:
                                       ``models/phi3/_position_embeddings.py``:
                                       ``Phi3RotaryPositionalEmbeddings`` (float32 cos/sin, the
                                       product promoted to float32)
``RopeOp.inv_freq``                    the module's ``theta`` buffer (float32; Llama 3: after
                                       ``apply_scaling``), attention factor 1
``RopeOp.cos_sin``                     rows ``input_pos`` of the module's ``cache`` buffer
                                       (interleaved modules: ``[n, D/2, (cos, sin)]``; Qwen2 /
                                       Phi-3: ``[n, cos(cat(a, a)) | sin(cat(a, a))]``,
                                       de-duplicated), float32 as the cache holds them
                                       (``table_dtype``; the requested dtype at float32 / float64)
``RopeOp.apply``                       the module's ``forward(x, input_pos=position_ids)`` on
                                       q and k separately, as ``MultiHeadAttention`` calls it
``t5_buckets`` (bidirectional)         ``models/t5/_encoder.py``: the
                                       ``relative_position_to_bucket`` buffer of
                                       ``T5EncoderRelativePositionBias`` (rel = key - query)
``t5_bias`` (bidirectional)            ``T5EncoderRelativePositionBias.forward()`` with the
                                       given table in ``embedding``; rows ``cache_length ..
                                       cache_length + Tq - 1`` and the first Tk columns of its
                                       ``[1, H, L, L]`` output
=====================================  =====================================================

Caches: torchtune precomputes cos/sin for ``max_seq_len`` positions and indexes the cache with
``input_pos`` (no range check, no automatic growth although the docstrings promise it).  The
module is built with torchtune's default ``max_seq_len`` 4096 (Llama 3.1 builders use the
config's length), and the wrapper calls the module's own ``build_rope_cache(n)`` whenever a
call needs more rows -- what a model configured with a longer ``max_seq_len`` holds.  Like a model, the
adapter builds a module once per set of construction arguments and reuses it (``_module``: at most 16 modules, and
besides the one in use at most 1 GiB of cache; kept by the adapter instance, one per run).

Dtype policy (ROPE-PRECISION): torchtune's recipes build models under
``set_default_dtype(dtype)``; the rotary modules ignore the default dtype (``theta`` and the
cache are explicitly float32, checked at bf16/f16/f64), so the modules are built as is.
Activations reach ``forward`` in the requested dtype: the interleaved modules upcast x to float32,
rotate with the float32 cache and cast back (``type_as``) -- float64 activations are therefore
rotated in float32 --; Qwen2 casts cos/sin to the activation dtype and rotates in it; Phi-3
multiplies with the float32 cache (promoting to float32) and casts back.

Not expressible (``Unsupported``): partial rotary (every torchtune rotary module rotates the
whole last dimension; no torchtune builder has a pass-through tail); an attention factor (no
module scales cos/sin); rope_types other than default and llama3, and llama3 with half
pairing (``Llama3ScaledRoPE`` pairs interleaved); rotation with given cos/sin (no torchtune
function takes them); causal T5 buckets (torchtune has the T5 encoder only).  inv_freq and
cos/sin do not depend on the pairing: a half-pairing case reads them from the interleaved
module of its rope_type.  Devices: ``cpu``, and ``cuda`` when present.
"""

from __future__ import annotations

import importlib.metadata

import torch
from torch import nn
from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE
from torchtune.models.phi3._position_embeddings import Phi3RotaryPositionalEmbeddings
from torchtune.models.qwen2._positional_embeddings import Qwen2RotaryPositionalEmbeddings
from torchtune.models.t5._encoder import T5EncoderRelativePositionBias
from torchtune.modules import RotaryPositionalEmbeddings

from posenc.spec.errors import AdapterError, Unsupported
from posenc.spec.shapes import table_dtype as tables_at

from .base import Adapter, Unsupported, for_rotation, forms_unsupported
from .torch_adapter import DTYPES, TorchAdapter, torch_device_available

#: torchtune's default ``max_seq_len`` of every rotary module.
TORCHTUNE_MAX_SEQ_LEN = 4096
#: The most cache rows the wrapper builds: torchtune's cache holds every position up to ``max_seq_len``
#: (float32, ``[n, D/2, 2]``: 2**21 rows of a 128-wide head are 1 GiB); a case past it is unsupported,
#: not a memory crash (positions 2**24 would need 8 GiB, int32's largest 1 TiB).
TORCHTUNE_MAX_CACHE_ROWS = 2**21
#: The longest sequence the wrapper builds torchtune's T5 encoder bucket buffer for (int64 ``[L, L]``: 0.5 GiB
#: at 8208, the generated cases' longest distance 2 * 4096 + 8 included; distances 2**20 would need 8 TiB).
TORCHTUNE_MAX_T5_LENGTH = 2**13 + 16
#: How many built rotary modules an adapter keeps for the next prepared rope with the same arguments
#: (:meth:`TorchtuneAdapter._module`), and the most float32 cache bytes the kept ones other than the one just
#: handed out may hold (that one grows as its calls need, up to TORCHTUNE_MAX_CACHE_ROWS).
MODULES_KEPT = 16
MODULES_KEPT_BYTES = 2**30
#: The rope_types torchtune 0.6.1 implements (``Llama3ScaledRoPE`` for llama3).
_ROPE_TYPES = ("default", "llama3")


def _check_expressible(p) -> None:
    """Raise :class:`Unsupported` for RoPE parameters no torchtune module implements."""
    forms_unsupported(p, "torchtune 0.6.1")
    if p.rope_type not in _ROPE_TYPES:
        raise Unsupported(f"torchtune 0.6.1 has no rope_type {p.rope_type!r}: its rotary modules are plain RoPE "
                          "(RotaryPositionalEmbeddings, Qwen2/Phi-3 variants) and Llama3ScaledRoPE (llama3)")
    if p.rdim != p.head_dim:
        raise Unsupported(f"partial rotary (rotary_dim {p.rdim} of head_dim {p.head_dim}): every torchtune rotary "
                          "module rotates the whole last dimension of x; no torchtune builder has a pass-through tail")
    if p.attention_factor not in (None, 1.0):
        raise Unsupported(f"attention_factor {p.attention_factor:g}: no torchtune rotary module scales cos/sin")


class _TorchtuneRope:
    """A prepared torchtune rotary module (see the module docstring for the dispatch).

    ``apply`` takes q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` and position_ids int64 ``[B, T]``
    and returns q, k in their dtype; ``cos_sin`` returns ``[B, T, D/2]`` in ``table_dtype`` (the
    cache's float32 at bfloat16 / float16, the requested dtype otherwise: ROPE-TABLE-DTYPE);
    ``inv_freq`` the float32 ``theta`` buffer ``[D/2]`` and 1.0.
    """

    def __init__(self, module: nn.Module, params, dtype: torch.dtype, half: bool, apply_pairing: bool,
                 table_dtype: torch.dtype):
        self.m, self.p, self.dtype, self.half, self.apply_pairing = module, params, dtype, half, apply_pairing
        self.table_dtype = table_dtype

    def _grow(self, position_ids) -> None:
        """Make the cache cover every position, with torchtune's own ``build_rope_cache``."""
        if position_ids.numel() and int(position_ids.min()) < 0:  # torch would read the cache from its end
            raise Unsupported(f"position {int(position_ids.min())}: torchtune indexes its cache with input_pos, and a "
                              "negative one reads a row from the cache's end, which depends on how many rows were built")
        need = int(position_ids.max()) + 1 if position_ids.numel() else 1
        if need > TORCHTUNE_MAX_CACHE_ROWS:
            raise Unsupported(f"position {need - 1}: torchtune's rotary modules read a precomputed cache of every "
                              f"position up to max_seq_len, and the wrapper builds at most {TORCHTUNE_MAX_CACHE_ROWS} "
                              f"rows (a cache of {need} rows would take {need * self.p.head_dim * 4 / 2**30:.1f} GiB)")
        if need > self.m.cache.shape[0]:
            self.m.build_rope_cache(need)

    def inv_freq(self):
        """ROPE-INV-FREQ, SCALE-LLAMA3: the module's float32 ``theta`` buffer (a copy: the module serves later
        cases of the run, ``TorchtuneAdapter._module``)."""
        return self.m.theta.clone(), 1.0

    @torch.no_grad()
    def cos_sin(self, position_ids):
        """ROPE-ANGLE: the module's cache rows at ``position_ids``, as its forward reads them."""
        self._grow(position_ids)
        rows = self.m.cache[position_ids]
        if self.half:  # Qwen2 / Phi-3: [cos(cat(a, a)) | sin(cat(a, a))]
            d = rows.shape[-1] // 2
            cos, sin = rows[..., :d], rows[..., d:]
            h = d // 2
            if not (torch.equal(cos[..., :h], cos[..., h:]) and torch.equal(sin[..., :h], sin[..., h:])):
                raise AdapterError("torchtune: the Qwen2/Phi-3 rope cache is not cat(a, a); its halves differ")
            cos, sin = cos[..., :h], sin[..., :h]
        else:  # [n, D/2, (cos, sin)]
            cos, sin = rows[..., 0], rows[..., 1]
        return cos.to(self.table_dtype), sin.to(self.table_dtype)  # float32 at bf16 / f16 (table_dtype)

    @torch.no_grad()
    def apply(self, q, k, position_ids):
        """ROPE-PAIR-INTERLEAVED / ROPE-PAIR-HALF, ROPE-ANGLE: the module's forward on ``[b, s, n_h, h_d]``."""
        if not self.apply_pairing:
            raise Unsupported(f"{self.p.pairing} pairing with rope_type {self.p.rope_type!r}: torchtune's "
                              f"{type(self.m).__name__} pairs interleaved (x[2i], x[2i+1]) and writes them back in "
                              "place; torchtune has no module with that layout for this rope_type")
        self._grow(position_ids)
        return tuple(self.m(x.transpose(1, 2), input_pos=position_ids).transpose(1, 2) for x in (q, k))

    @torch.no_grad()
    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: the module's forward on q, k ``[b, s, n_h, h_d]`` with ``input_pos``, as a
        torchtune attention layer calls it."""
        if not self.apply_pairing:
            return self.apply(q, k, position_ids)  # its Unsupported, with the reason
        self._grow(position_ids)
        return tuple(self.m(x, input_pos=position_ids) for x in (q, k))


class TorchtuneAdapter(Adapter):
    """torchtune 0.6.1's RoPE modules and T5 encoder bias (see the module docstring)."""

    name = "torchtune"
    #: rope.apply with int32 positions (``input_pos`` indexes the cache) and on ``[b, s, n_h, h_d]``, its own layout
    call_forms = ("rope.apply_int32", "rope.apply_token_major")
    #: the modules' cache is a float32 buffer whatever the activations; cos_sin hands its rows as they are
    #: (ROPE-TABLE-DTYPE), cast only to float64 at float64
    table_dtype = "float32"
    framework = "torch"
    devices = ("cpu", "cuda")
    notes = ("torchtune 0.6.1: float32 theta and cos/sin cache; interleaved modules rotate in float32 "
             "and cast back; half pairing by Qwen2's module (cos/sin cast to the activation dtype)")
    #: The torchtune module for half pairing (rope_type default).
    half_module: type = Qwen2RotaryPositionalEmbeddings

    from_numpy = TorchAdapter.from_numpy
    to_numpy = TorchAdapter.to_numpy
    dtype_of = TorchAdapter.dtype_of
    device_of = TorchAdapter.device_of

    def versions(self):
        return {"torch": torch.__version__, "torchtune": importlib.metadata.version("torchtune")}

    def device_available(self, device):
        return torch_device_available(device)

    # ---- RoPE ------------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        """ROPE-*, SCALE-LLAMA3: the torchtune module for the pairing and rope_type."""
        _check_expressible(params)
        D, theta = params.head_dim, float(params.rope_theta)
        if params.rope_type == "llama3":
            cls, kw = Llama3ScaledRoPE, dict(scale_factor=float(params.factor),
                                             low_freq_factor=float(params.low_freq_factor),
                                             high_freq_factor=float(params.high_freq_factor),
                                             old_context_len=int(params.original_max_position_embeddings))
            half, applies = False, params.pairing == "interleaved"
        elif params.pairing == "half":
            cls, kw, half, applies = self.half_module, {}, True, True
        else:
            cls, kw, half, applies = RotaryPositionalEmbeddings, {}, False, params.pairing == "interleaved"
        m = self._module(cls, device, dim=D, base=theta, **kw)
        if m.theta.shape[-1] * 2 != D:
            raise AdapterError(f"torchtune: {type(m).__name__} built {m.theta.shape[-1]} frequencies, "
                               f"expected {D // 2}")
        r = _TorchtuneRope(m, params, DTYPES[dtype], half, applies, DTYPES[tables_at(self, dtype)])
        return for_rotation(r, params, "torchtune's rotary modules")

    def _module(self, cls: type, device: str, **kw) -> nn.Module:
        """``cls(max_seq_len=TORCHTUNE_MAX_SEQ_LEN, **kw)`` on ``device``: the one this adapter built with these
        arguments, if it still holds it (:data:`MODULES_KEPT`), else a new one.

        A model builds its rotary module once and calls it at every layer and step; built per prepared rope,
        torchtune's cache of 2**20 positions (``rope-offset-past-2-20``) took four fifths of this column's time.
        Sharing is sound because torchtune's forward reads the module and never writes it, and a cache row
        does not depend on how many rows were built (``build_rope_cache(n)``: row p from p alone), so a
        module grown by one case gives the next the values a fresh one would.  The modules are kept on the
        adapter instance: one run (a library patched between runs gets new modules).
        """
        key = (cls, str(device), tuple(sorted(kw.items())))
        kept = self.__dict__.setdefault("_modules", {})
        m = kept.pop(key, None)
        if m is None:
            with torch.device(device):
                m = cls(max_seq_len=TORCHTUNE_MAX_SEQ_LEN, **kw)
        kept[key] = m  # most recently used last
        while len(kept) > MODULES_KEPT:  # the cheapest to build again (fewest cache rows) goes first
            del kept[min(list(kept)[:-1], key=lambda k: kept[k].cache.shape[0])]
        while sum(v.cache.numel() for v in list(kept.values())[:-1]) * 4 > MODULES_KEPT_BYTES:
            del kept[next(iter(kept))]  # over the memory bound: the least recently used goes
        return m

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        raise Unsupported("torchtune has no rotation with given cos/sin: its rotary modules read only their own "
                          "precomputed cache (forward(x, input_pos=...))")

    # ---- T5 (encoder only) -----------------------------------------------------------------
    @staticmethod
    def _t5_encoder_only(params) -> None:
        if not params.bidirectional:
            raise Unsupported("causal (decoder) T5 buckets / bias: torchtune 0.6.1 implements the T5 encoder only "
                              "(_calc_birectional_rel_pos_to_bucket; 'not the decoder (unidirectional)')")

    @torch.no_grad()
    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL: ``T5EncoderRelativePositionBias.relative_position_to_bucket``.

        The buffer holds the bucket of ``key - query`` for queries and keys ``0 .. L - 1``; with
        ``L = max|rel| + 1`` row 0 gives every ``rel >= 0`` (column rel) and column 0 every
        ``rel <= 0`` (row -rel).  int64, same shape as ``relative_position``.
        """
        self._t5_encoder_only(params)
        rel = relative_position
        L = int(rel.abs().max()) + 1 if rel.numel() else 1
        if L > TORCHTUNE_MAX_T5_LENGTH:
            raise Unsupported(f"relative position {L - 1}: torchtune's T5 encoder reads its buckets from an [L, L] buffer "
                              f"built for max_seq_len L, and the wrapper builds it for at most {TORCHTUNE_MAX_T5_LENGTH} "
                              f"tokens (L = {L} would take {L * L * 8 / 2**30:.3g} GiB)")
        m = T5EncoderRelativePositionBias(params.num_buckets, params.max_distance, num_heads=1, max_seq_len=L)
        table = m.relative_position_to_bucket.to(rel.device)
        return torch.where(rel >= 0, table[0, rel.clamp(min=0)], table[(-rel).clamp(min=0), 0])

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS (bidirectional): ``T5EncoderRelativePositionBias.forward()`` -> ``[H, Tq, Tk]``.

        torchtune builds the bias over its whole ``max_seq_len`` square (queries and keys at
        ``0 .. L - 1``); the module is built with ``L = max(Tk, cache_length + Tq)`` and the
        rows of the queries (at ``cache_length + i``) and the first Tk keys are returned.
        """
        self._t5_encoder_only(params)
        table = weights["table"]
        nb, H = table.shape

        @torch.no_grad()
        def call(query_length, key_length, cache_length=0):
            L = max(key_length, cache_length + query_length, 1)
            m = T5EncoderRelativePositionBias(nb, params.max_distance, num_heads=H, max_seq_len=L)
            m = m.to(device=table.device, dtype=table.dtype)
            m.embedding.weight.copy_(table)
            return m()[0, :, cache_length:cache_length + query_length, :key_length]
        return call


class TorchtunePhi3Adapter(TorchtuneAdapter):
    """The torchtune adapter with Phi-3's half-pairing module (``Phi3RotaryPositionalEmbeddings``)."""

    name = "torchtune-phi3"
    notes = ("torchtune 0.6.1: float32 theta and cos/sin cache; interleaved modules rotate in float32 "
             "and cast back; half pairing by Phi-3's module (float32 cos/sin, promoted product)")
    half_module = Phi3RotaryPositionalEmbeddings


ADAPTER = TorchtuneAdapter
PHI3_ADAPTER = TorchtunePhi3Adapter
