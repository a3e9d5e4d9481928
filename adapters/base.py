"""The adapter contract: what an implementation under test provides.

An adapter is a small object with ``name``, ``framework``, supported ``devices`` and
``dtypes``, array conversion, and the *operations*.  Operations take native arrays plus the
spec's pydantic parameter models (``posenc.spec.models``) and return native arrays in the
canonical layout.  An operation the implementation cannot express raises
:class:`Unsupported` with a reason -- the only exception the suite turns into a (reported,
counted) skip.  Any other exception, an ``ImportError`` of a wrapped library included, is a
failure.

Canonical layouts: q/k ``[B, H, T, D]`` (q and k head counts may differ); ``position_ids``
int ``[B, T]``; RoPE cos/sin half width ``[B, T, rotary_dim/2]``; embeddings ``[B, T, E]``.
Float outputs must have exactly the requested dtype; integer outputs any integer dtype.  Outputs
are the adapter's own arrays (the type its ``from_numpy`` returns, or a class it shares with it),
never NumPy arrays from a non-NumPy adapter.  Inputs are private copies that an operation must
not modify: the kit checks them after every call (an in-place kernel must work on a copy).

Call forms (spec ``form_of``, clause ROPE-CALL-FORM, README "Call forms"): an adapter that lists
``rope.apply_tokens``, ``rope.apply_packed``, ... in ``call_forms`` gets every rope.apply golden through
those conventions as well: ``apply_offset(q, k, offset)``, ``apply_offsets(q, k, offsets)``, ``apply(q, k,
position_ids)`` with int32 positions, ``apply_tokens(q, k, positions)`` on ``[N, H, D]``,
``apply_token_major(q, k, position_ids)`` on ``[B, T, H, D]``, ``apply_packed(q, k, cu_seqlens, offsets)``,
``apply(q, k, position_ids)`` on strided views, and ``apply_(q, k, position_ids)``, which writes q and k
(views into guarded buffers) in place and returns nothing: the only operation that may write an input.
``mrope.apply_*`` and ``axial.apply_*`` (tokens at positions ``[A, N]``, token_major, int32, strided, inplace)
are the same calls on the prepared ``mrope`` / ``axial`` object; the adapter methods
``rope_apply_with_cos_sin_hidden(q, k, cos, sin, params)`` (``rope.apply_with_cos_sin_hidden``) take q, k
``[B, T, H * D]`` and cos/sin ``[B, T, R]``, ``rope_apply_with_cos_sin_cache(q, k, cos_cache, sin_cache,
position_ids, params)`` (``rope.apply_with_cos_sin_cache``) cos/sin caches ``[P, R]`` to gather at position_ids
``[B, T]``.  A form declared in ``call_forms`` whose method the adapter (or its prepared object) lacks fails.

Operations (all optional; the default raises :class:`Unsupported`).  The authoritative
declaration of each -- its calling convention, inputs, outputs and their shapes -- is the
operation table, ``operations`` in its family's spec file (``posenc spec show rope.apply``); an
operation of any registered family that an adapter does not define is unsupported.  The kit's
families:

=============================================  ===========================================
``rope(params, dtype=, device=)``              a prepared :class:`RopeOp` (state lives here);
                                               a missing ``inv_freq``/``cos_sin`` method on it
                                               is reported as unsupported
``rope_apply_with_cos_sin(q, k, cos, sin, p)`` rotate with given cos/sin (ONNX / flash level)
``sinusoidal(position_ids, params, dtype=, device=)``  ``[B, T, D]`` table rows
``fairseq_positions(input_ids, params, cache_length)``  fairseq / M2M100 rows ``[B, T]``:
                                               ``(cumsum(mask) + cache_length) * mask + padding_idx``
``fairseq_sinusoidal(params, dtype=, device=)``  callable ``(input_ids, cache_length=0)`` -> ``[B, T, D]``
                                               (params.variant 'fairseq'; row padding_idx is zero)
``lookup(table, rows)``                        ``table[rows]``; out-of-range rows must raise
``gpt2_embeddings(params, weights, ...)``      callable ``(input_ids, position_ids=None, cache_length=0)``
``bert_embeddings(params, weights, ...)``      callable ``(input_ids, token_type_ids=None, position_ids=None, cache_length=0)``
``roberta_positions(input_ids, params, cache_length)``  RoBERTa table rows ``[B, T]`` (from padding_idx + 1;
                                               pads: padding_idx)
``roberta_embeddings(params, weights, ...)``   callable ``(input_ids, token_type_ids=None, position_ids=None, cache_length=0)``
``bart_embeddings(params, weights, ...)``      callable ``(input_ids, attention_mask=None, cache_length=0)``;
                                               rows ``cache_length + arange(T) + 2``, the mask ignored
``opt_positions(attention_mask, cache_length)``  0-based positions ``[B, T]`` (padding: -1)
``opt_rows(positions)``                        table rows (position + 2)
``opt_embeddings(params, weights, ...)``       callable ``(attention_mask, cache_length=0)``
``position_ids(rule, device=, **inputs)``      rule and keyword inputs: ``prefill`` (batch, seq_len),
                                               ``decode`` (batch, seq_len, cache_length), ``left_pad``
                                               (attention_mask, cache_length), ``packed`` (cu_seqlens)
``alibi_slopes(params, dtype=, device=)``      ALiBi slopes ``[H]``, float32 or float64 (``float32+``)
``alibi_bias(params, dtype=, device=, **inputs)``  bias of ``params.form``: ``causal``, ``symmetric``,
                                               ``mpt`` take ``query_length``, ``key_length`` and
                                               return ``[H, Tq, Tk]``; ``bloom`` takes
                                               ``attention_mask [B, Tk]``, ``query_length`` and
                                               returns ``[B, H, Tq, Tk]``.  Queries are the last Tq
                                               of the Tk keys (bottom-right aligned); every query
                                               row is filled, also where a form is row-constant
``t5_buckets(relative_position, params)``      int buckets, same shape as ``relative_position``
                                               (key position minus query position)
``t5_bias(params, weights, dtype=, device=)``  callable ``(query_length, key_length, cache_length=0)``
                                               -> ``[H, Tq, Tk]``; weights ``table`` ``[num_buckets, H]``
``mrope(params, dtype=, device=)``             a prepared :class:`MRopeOp`: ``cos_sin(position_ids)``
                                               -> half-width ``[B, T, head_dim/2]`` cos, sin;
                                               ``apply(q, k, position_ids)``; position_ids
                                               ``[3, B, T]`` (temporal, height, width)
``axial(params, dtype=, device=)``            a prepared op (``AxialRopeParams``): ``cos_sin(position_ids)``
                                               -> per-pair ``[B, T, rdim/2]`` cos, sin (``rdim = num_axes
                                               * adim``, pairs in ``params.pairs`` order: ``(axis, j)``
                                               per pair, the axes' frequency vectors concatenated in
                                               ``axis_order`` (split, blocks, interleaved) or one of each
                                               axis in turn (alternate), ``spec.models.axial_pairs``);
                                               ``apply(q, k, position_ids)``; position_ids ``[A, B, T]``,
                                               each an arbitrary integer coordinate (up to 12345 in the
                                               goldens), not a grid: an API that builds a grid table
                                               serves them by its per-axis frequencies (coordinate times
                                               frequency), never a grid as large as the coordinates
``query_scale_apply(q, position_ids, params)``  q ``[B, H, T, D]`` times s(position_ids)
                                               (``QueryScaleParams``); the dtype is q's; k untouched
``layer_rope(params, dtype=, device=)``        a prepared op (``LayerRopeParams``): ``apply(q, k,
                                               position_ids, layer_idx)`` with the RoPE set of
                                               ``layer_types[layer_idx]`` (q, k unchanged where the
                                               type has none); ``posenc.adapters.layer_rope`` builds
                                               it over an adapter's own ``rope``
``nope_apply(q, k, position_ids, layer_idx, params)``  q, k of NoPE layer ``layer_idx`` (bit-identical)
``nope_layer_flags(params, device=)``          int ``[num_hidden_layers]``: 1 = the layer uses RoPE,
                                               0 = NoPE (HF ``no_rope_layers`` semantics)
``attention_probs(q, k, params)``              ``softmax(q k^T * scale)`` ``[B, Hq, Tq, Tk]`` over all keys
                                               (no mask) with the YaRN softmax scale of
                                               ``SoftmaxScaleParams`` (SCALE-YARN-SOFTMAX-SCALE); q
                                               ``[B, Hq, Tq, qk_head_dim]``, k ``[B, Hk, Tk, qk_head_dim]``
                                               (already position-encoded; query head h reads k head
                                               ``h // (Hq / Hk)``); output in q's dtype
=============================================  ===========================================

Inputs: float arrays arrive in the requested dtype via :meth:`Adapter.from_numpy`; integer
arrays (``position_ids``, ``input_ids``, ``rows``, ``attention_mask``, ``cu_seqlens``) as
int64; ``batch``, ``seq_len`` and ``cache_length`` as Python ints.  An ``attention_mask`` is
0/1 ``[B, cache_length + T]``: it covers the cached tokens too, and the operation returns the
last T columns.

Parameters are the pydantic models of :mod:`posenc.spec.models`: ``RopeParams`` (``head_dim``,
``rotary_dim`` -- None means head_dim; use the ``rdim`` property --, ``rope_theta``,
``pairing`` 'half' | 'interleaved' | 'deinterleave', ``rotation`` 'positive' | 'negative' -- pairs
turn by -phi, NanoChat; the tables are unchanged, ``sin_sign`` is -1 --, ``attention_factor``,
``rope_type``; an implementation that rotates one way only raises Unsupported for the other:
:func:`positive_rotation_only`, :func:`for_rotation`); ``SinusoidalParams``
(``dim``, ``layout`` 'interleaved' | 'concat', ``base``, ``variant`` 'vaswani' | 't2t' | 'fairseq' |
'whisper' -- the h-1 divisor variants are [sin | cos] --, ``padding_idx`` for fairseq; widths a
variant cannot build raise ``posenc.spec.errors.DegenerateWidth``; ``order`` 'sin_first' | 'cos_first'
-- [cos | sin] blocks, concat only --, ``units`` 'radians' | 'turns' -- angle 2π p w --, ``scale``
multiplying every entry: an implementation without an option raises Unsupported for its other values,
never ignores them); ``RobertaEmbeddingParams``
(``vocab_size``, ``max_position_embeddings`` 514, ``type_vocab_size`` 1, ``hidden_size``,
``layer_norm_eps`` 1e-5, ``padding_idx`` 1); ``BartEmbeddingParams`` (``max_position_embeddings``,
``hidden_size``; ``num_rows`` = ``max_position_embeddings + 2``); ``GPT2EmbeddingParams`` (``vocab_size``,
``n_positions``, ``n_embd``); ``BertEmbeddingParams`` (``vocab_size``,
``max_position_embeddings``, ``type_vocab_size``, ``hidden_size``, ``layer_norm_eps``);
``OPTEmbeddingParams`` (``max_position_embeddings``, ``hidden_size``; ``num_rows`` =
``max_position_embeddings + 2``); ``LookupParams`` (``num_rows``, ``dim``); ``AlibiParams``
(``num_heads``, ``alibi_bias_max`` default 8, ``form`` 'causal' | 'symmetric' | 'bloom' |
'mpt'); ``T5Params`` (``num_buckets`` 32, ``max_distance`` 128, ``bidirectional``);
``MRopeParams`` (``head_dim``, ``rope_theta``, ``mrope_section`` (3 ints summing to head_dim/2),
``layout`` 'contiguous' (Qwen2-VL) | 'interleaved' (Qwen3-VL), ``pairing`` 'half'; ``axes`` gives
each frequency's axis); ``NopeParams`` (``num_hidden_layers``, ``no_rope_layers`` None or 0/1 flags,
``no_rope_layer_interval`` 4); ``SoftmaxScaleParams`` (``rope``: a yarn ``RopeParams`` whose
``head_dim`` is the rope part, with ``mscale_all_dim`` set; ``qk_head_dim``: the full q/k width).

Weights are dicts of native arrays in the requested dtype: GPT-2 ``wte``, ``wpe``; BERT
``word_embeddings``, ``position_embeddings``, ``token_type_embeddings``,
``layer_norm_weight``, ``layer_norm_bias`` (RoBERTa: the same names); OPT and BART ``table``;
T5 ``table`` ``[num_buckets, H]``.
ALiBi and T5 lengths (``query_length``, ``key_length``, ``cache_length``) arrive as Python
ints, ``relative_position`` and the ALiBi ``attention_mask`` as int64 arrays.

Besides the operations, override ``versions()`` (the library versions results depend on;
expectation files are checked against them), ``device_available(device)`` when ``devices``
lists more than ``cpu``, and set ``notes`` (the dtype policy, shown in the report header).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Optional, Protocol

import numpy as np

from posenc.spec.errors import Unsupported
from posenc.spec.models import DTYPES


def _one_way(library: str) -> str:
    return (f"{library}: pairs turn by +phi only, no rotation by -phi (ROPE-ROTATION-NEGATIVE, "
            "NanoChat's rotate_half)")


def positive_rotation_only(params, library: str) -> None:
    """Raise :class:`Unsupported` for ``params.rotation`` negative: ``library`` turns every pair by
    +phi only and has no rotation by -phi (ROPE-ROTATION-NEGATIVE, NanoChat)."""
    if getattr(params, "rotation", "positive") != "positive":
        raise Unsupported(_one_way(library))


def forms_unsupported(params, library: str, *, fraction: bool = False, condense: bool = False) -> None:
    """Raise :class:`Unsupported` for a parameter form (spec 0.5.0) ``library`` has no argument for: a
    rotated width stated as a fraction (ROPE-ROTARY-FRACTION) unless ``fraction``, positions condensed
    before the angle (ROPE-CONDENSE) unless ``condense``.  A wrapper that sized the width or divided the
    positions itself would pass the library on what only the wrapper did."""
    if not fraction and getattr(params, "partial_rotary_factor", None) is not None:
        raise Unsupported(f"{library} takes the rotated width, not a fraction of the head: the width of "
                          f"partial_rotary_factor {params.partial_rotary_factor!r} would be the wrapper's sizing")
    if not condense and getattr(params, "condense_ratio", None) is not None:
        raise Unsupported(f"{library} has no condensing of positions (condense_ratio "
                          f"{params.condense_ratio!r}): dividing the positions would be the wrapper's")


class PositiveRotationRope:
    """A prepared RoPE operation of a library that rotates by +phi only, for a ``rotation:
    negative`` case: its tables (``inv_freq``, ``cos_sin``) are served as they are (the rotation
    does not change them, ROPE-ROTATION-NEGATIVE) and ``apply`` is unsupported."""

    def __init__(self, op, library: str):
        self._op, self._library = op, library

    def apply(self, q, k, position_ids):
        raise Unsupported(_one_way(self._library))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name.startswith("apply") and hasattr(self._op, name):  # rope.apply's call forms rotate as apply does
            def one_way(*args, **kwargs):
                raise Unsupported(_one_way(self._library))
            return one_way
        return getattr(self._op, name)  # a missing inv_freq / cos_sin stays missing (unsupported)


def for_rotation(op, params, library: str):
    """``op`` for a positive rotation, else the :class:`PositiveRotationRope` around it."""
    return op if getattr(params, "rotation", "positive") == "positive" else PositiveRotationRope(op, library)


class RopeOp(Protocol):
    """A prepared RoPE operation for one parameter set, dtype and device."""

    def inv_freq(self) -> tuple[Any, float]:
        """``(inv_freq [rotary_dim/2] float32 or float64, attention_factor)``."""

    def cos_sin(self, position_ids) -> tuple[Any, Any]:
        """``attention_factor * (cos, sin)`` of the angles, each ``[B, T, rotary_dim/2]``."""

    def apply(self, q, k, position_ids) -> tuple[Any, Any]:
        """End-to-end RoPE on q ``[B, Hq, T, D]`` and k ``[B, Hk, T, D]``."""


class MRopeOp(Protocol):
    """A prepared M-RoPE operation (MROPE-*) for one parameter set, dtype and device."""

    def cos_sin(self, position_ids) -> tuple[Any, Any]:
        """Recomposed half-width ``(cos, sin)`` ``[B, T, head_dim/2]`` from position_ids ``[3, B, T]``."""

    def apply(self, q, k, position_ids) -> tuple[Any, Any]:
        """M-RoPE on q ``[B, Hq, T, D]`` and k ``[B, Hk, T, D]``; position_ids ``[3, B, T]``."""


class Adapter:
    """Base class; subclasses override what they support.  See the module docstring."""

    name: str = "unnamed"
    framework: str = "unknown"
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = DTYPES
    #: RoPE dtype policy in words, shown in the report header.
    notes: str = ""
    #: Devices on which out-of-range rows may be sent to the adapter (LEARNED-ROW-RANGE probe):
    #: on CUDA an unchecked gather is a device-side assert that takes the whole process down.
    range_probe_devices: tuple[str, ...] = ("cpu",)
    #: Generated cases per operation and dtype when ``--posenc-examples`` is not given (None: the
    #: kit's default, 6).  A compile-bound adapter (XLA compiles every new shape, ~50 ms per
    #: primitive on a CPU) may lower it; the report header, the report and the matrix name it.
    generated_examples: Optional[int] = None
    #: The call forms it serves (spec operations with ``form_of``: ``rope.apply_row_offsets``, ``rope.apply_int32``,
    #: ``rope.apply_token_major``, ...): each golden of the primary operation is run through them too; a form not
    #: listed is reported unsupported, never called (an adapter written before forms existed stays as it was).
    call_forms: tuple[str, ...] = ()
    #: The dtype of the cos/sin tables it gives (rope.cos_sin, mrope / axial cos_sin) and gets
    #: (rope.apply_with_cos_sin's ``cos``, ``sin``) at bfloat16 and float16 activations (ROPE-TABLE-DTYPE):
    #: ``"activation"`` (the requested dtype, as transformers casts them) or ``"float32"`` (a float32 cache
    #: beside half-precision q and k: FlashInfer, TransformerEngine, torchtune).  Both conform and are judged
    #: by the activation dtype's tolerance; at float32 and float64 tables are in the activation dtype either way.
    table_dtype: str = "activation"

    def __getattr__(self, name: str):
        """An operation method of a registered family that this adapter does not define is
        unsupported (the operation table names every method; the defaults below document the
        kit's own)."""
        if any(name in k.__dict__ for k in type(self).__mro__):
            return object.__getattribute__(self, name)  # a property that raised: let its own error through
        if not name.startswith("_"):
            from posenc import registry
            from posenc.spec.errors import PosencError
            try:
                ops = registry.operations_by_method().get(name, [])
            except PosencError:
                ops = []
            # a call form the adapter declares (call_forms) served by an adapter method it does not define: a
            # failure naming the method, as for a prepared object's (a misspelt method never drops the form)
            forms = [o.name for o in ops if o.form_of is not None and o.name in (getattr(self, "call_forms", ()) or ())]
            if forms:
                def missing(*args, **kwargs):
                    from posenc.spec.errors import AdapterError
                    raise AdapterError(f"{self.name}: the adapter declares call form {forms[0]} (call_forms) but "
                                       f"defines no {name}() method")
                return missing
            if ops:
                def unsupported(*args, **kwargs):
                    raise Unsupported(f"adapter {self.name!r} does not implement {name}")
                return unsupported
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- environment -------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        """Library versions that results depend on, e.g. ``{'torch': '2.13.0'}``."""
        return {}

    def device_available(self, device: str) -> bool:
        return device == "cpu"

    # ---- arrays ------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype: str, device: str) -> Any:
        """Native array from NumPy.  ``dtype`` is a float dtype name or 'int64' / 'bool'."""
        raise NotImplementedError

    def to_numpy(self, x: Any) -> np.ndarray:
        """NumPy copy of a native array (bf16 as float32 is fine: values are exact)."""
        raise NotImplementedError

    def dtype_of(self, x: Any) -> str:
        """Canonical dtype name of a native array: 'float32', 'bfloat16', 'int64', ..."""
        raise NotImplementedError

    def device_of(self, x: Any) -> str:
        """Where a native array lives: 'cpu', 'cuda:0', ... (compared with ``--device``)."""
        return "cpu"

    # ---- operations --------------------------------------------------------------------
    def _unsupported(self, op: str):
        raise Unsupported(f"adapter {self.name!r} does not implement {op}")

    def rope(self, params, *, dtype: str, device: str) -> RopeOp:
        self._unsupported("rope")

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        self._unsupported("rope_apply_with_cos_sin")

    def sinusoidal(self, position_ids, params, *, dtype: str, device: str):
        self._unsupported("sinusoidal")

    def fairseq_positions(self, input_ids, params, cache_length: int):
        self._unsupported("fairseq_positions")

    def fairseq_sinusoidal(self, params, *, dtype: str, device: str) -> Callable:
        self._unsupported("fairseq_sinusoidal")

    def lookup(self, table, rows):
        self._unsupported("lookup")

    def gpt2_embeddings(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("gpt2_embeddings")

    def bert_embeddings(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("bert_embeddings")

    def roberta_positions(self, input_ids, params, cache_length: int):
        self._unsupported("roberta_positions")

    def roberta_embeddings(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("roberta_embeddings")

    def bart_embeddings(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("bart_embeddings")

    def opt_positions(self, attention_mask, cache_length: int):
        self._unsupported("opt_positions")

    def opt_rows(self, positions):
        self._unsupported("opt_rows")

    def opt_embeddings(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("opt_embeddings")

    def position_ids(self, rule: str, *, device: str, **inputs):
        self._unsupported(f"position_ids({rule})")

    def alibi_slopes(self, params, *, dtype: str, device: str):
        self._unsupported("alibi_slopes")

    def alibi_bias(self, params, *, dtype: str, device: str, **inputs):
        self._unsupported(f"alibi_bias({params.form})")

    def t5_buckets(self, relative_position, params):
        self._unsupported("t5_buckets")

    def t5_bias(self, params, weights, *, dtype: str, device: str) -> Callable:
        self._unsupported("t5_bias")

    def mrope(self, params, *, dtype: str, device: str) -> MRopeOp:
        self._unsupported("mrope")

    def nope_apply(self, q, k, position_ids, layer_idx: int, params):
        self._unsupported("nope_apply")

    def nope_layer_flags(self, params, *, device: str):
        self._unsupported("nope_layer_flags")

    def attention_probs(self, q, k, params):
        self._unsupported("attention_probs")


def roberta_from_bert(adapter: Adapter, params, weights, *, dtype: str, device: str) -> Callable:
    """RoBERTa embeddings as BERT embeddings read at RoBERTa rows (LEARNED-ROBERTA-POSITIONS):
    the composition the kit's own ports share; ``adapter`` provides ``bert_embeddings`` and
    ``roberta_positions``.  Wrappers of a real library use the library's own RoBERTa module."""
    bert = adapter.bert_embeddings(params, weights, dtype=dtype, device=device)

    def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
        if position_ids is None:
            position_ids = adapter.roberta_positions(input_ids, params, cache_length)
        return bert(input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
    return call


def int32_call_forms(call_forms: tuple[str, ...]) -> tuple[str, ...]:
    """The ``*_int32`` forms of ``call_forms`` (ROPE-CALL-FORM): positions of another dtype reaching the same
    kernels, served by both the eager and the compiled column of a port."""
    return tuple(f for f in call_forms if f.endswith("_int32"))


def compiled_call_forms(call_forms: tuple[str, ...]) -> tuple[str, ...]:
    """The call forms the compiled variant of an eager-first port (``tensorflow-function``) serves: the
    ``*_int32`` forms, which trace its compiled kernels with positions of another dtype.  The others
    (offsets, tokens, the token-major layout, packed buffers, the cos/sin caches) are the port's eager glue
    around the same kernels: they are checked in the eager column, and served again under compilation they
    would only retrace every kernel at new shapes, which the primary form's generated cases already do
    (ROPE-CALL-FORM; the matrix names the forms each column was checked in).  JAX is the other way round
    (``adapters/jax_adapter.py``): eagerly, every operation compiles at every new shape, so its forms are
    checked in ``jax-jit`` and its eager column keeps the int32 forms."""
    return int32_call_forms(call_forms)


def family_ports(package: str) -> tuple[type, ...]:
    """The ``Ops`` mixin classes of a port package, one module per spec family.

    A port (the kit's torch, jax or tensorflow one, or a wrapper) keeps each family's
    operations in ``<package>/<family>.py`` as a class ``Ops``; the adapter class is composed
    as ``class MyAdapter(*family_ports("my.port"), Adapter)``, so adding a family's port is a
    new file and no edit of the adapter.  Modules whose name starts with ``_`` (shared helpers)
    are skipped; the order is by module name (method names do not overlap across families).
    """
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        ops = getattr(importlib.import_module(f"{package}.{info.name}"), "Ops", None)
        if isinstance(ops, type):
            found.append(ops)
    return tuple(found)
