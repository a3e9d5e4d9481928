"""The ``keras-hub-*`` adapters: thin wrappers around the real keras-hub position layers.

Every number these adapters return is computed by keras-hub (0.32.0) on Keras 3 under one
backend per process: ``keras-hub-tensorflow``, ``keras-hub-jax`` and ``keras-hub-torch``.  The
wrappers only build the layers from the spec's parameter models (the layer's own constructor
arguments), copy given weights into the layer's variables, pass tensors in the requested
dtype (layer dtype policy = requested dtype; inputs never upcast), move axes between the
canonical layouts and the layer's, and convert outputs to the canonical form.  They never
import ``posenc.reference`` and never compute what the layer computes; what a layer cannot
express raises :class:`~posenc.adapters.base.Unsupported` with the reason.

Which keras-hub code backs each operation (paths under ``keras_hub/src/``):

=====================================  ========================================================
``rope`` (half pairing)                ``layers/modeling/rotary_embedding.py``:
                                       ``RotaryEmbedding(max_wavelength=rope_theta, rope_type,
                                       scaling_factor, ..., sequence_axis=2)`` called on q / k
                                       ``[B, H, T, D]`` with ``positions=position_ids`` (the layer
                                       moves its own axes); ``inv_freq`` is its
                                       ``_get_inverse_freq(rotary_dim)``, ``cos_sin`` its
                                       ``_compute_cos_sin_embedding`` (``cat(c, c)``, de-duplicated)
rope_type default / linear             ``rope_type="linear"``, ``scaling_factor`` 1 / factor
                                       (SCALE-LINEAR)
rope_type dynamic                      ``rope_type="dynamic"``, ``scaling_factor=factor``: a static
                                       ``inv_freq / factor^(d/(d-2))`` (the layer has no length,
                                       no ``max_position_embeddings``, no policy)
rope_type yarn                         ``rope_type="yarn"``, ``scaling_factor=factor``,
                                       ``beta_fast``, ``beta_slow``, ``original_max_position_
                                       embeddings``, ``truncate`` (only the fields the spec sets;
                                       the layer's defaults 32 / 1 / True are the spec's)
rope_type llama3                       ``models/llama/llama_rotary_embedding.py``:
                                       ``LlamaRotaryEmbedding`` (a RotaryEmbedding subclass;
                                       ``frequency_adjustment_factor`` = factor,
                                       ``pretraining_sequence_length`` = original)
rope_type proportional                 ``models/gemma4/gemma4_attention.py``:
                                       ``Gemma4TextAttention._apply_rope`` (its ``rope_layer`` is a
                                       RotaryEmbedding with ``denominator_dim=head_dim``) on
                                       ``[B, T, H, D]``
call forms (ROPE-CALL-FORM)            ``rope.apply_offset``: the layer's ``start_index`` (positions
                                       ``arange(T) + start_index`` in float32); ``rope.apply_token_
                                       major``: a layer built with its default ``sequence_axis=1``
                                       on ``[B, T, H, D]`` (Gemma 4: ``_apply_rope`` as it is);
                                       ``rope.apply_int32``: int32 ``positions``
partial rotary (ROPE-PARTIAL)          the first ``rotary_dim`` dims through the layer, the tail
                                       concatenated back, as ``models/gpt_neo_x/
                                       gpt_neo_x_attention.py`` (``GPTNeoXAttention.call``) does
``rope_apply_with_cos_sin`` (half)     ``RotaryEmbedding._apply_rotary_pos_emb`` with
                                       ``cat(c, c)`` (the layout its cos/sin have)
``sinusoidal`` vaswani interleaved     ``layers/modeling/sine_position_encoding.py``:
                                       ``SinePositionEncoding(max_wavelength=base)`` with
                                       ``positions=position_ids``
``lookup``                             ``layers/modeling/position_embedding.py``:
                                       ``PositionEmbedding(sequence_length=N)``, its
                                       ``position_embeddings`` variable assigned the table, called
                                       with ``positions=rows`` (``ops.take``)
``gpt2_embeddings``                    ``layers/modeling/token_and_position_embedding.py``:
                                       ``TokenAndPositionEmbedding`` (token ``wte``, position
                                       ``wpe``) with ``start_index=cache_length`` or
                                       ``positions=position_ids``
``position_ids`` prefill / decode      ``RotaryEmbedding._compute_positions`` (``arange(T) +
                                       start_index`` in float32, the rows every keras-hub RoPE
                                       model rotates by), cast to int64
``alibi_slopes``                       ``layers/modeling/alibi_bias.py``: ``AlibiBias`` on zero
                                       scores ``[1, H, 1, 2]``: the bias at key 0 is ``-m``
``alibi_bias`` mpt                     ``AlibiBias(alibi_bias_max)`` on zero scores
                                       ``[1, H, Tq, Tk]``: ``m (j - (Tk - 1))`` on every row
=====================================  ========================================================

Dtype policy (ROPE-PRECISION, SIN-PRECISION): whatever keras-hub does at the layer's dtype
policy.  RotaryEmbedding computes ``inv_freq``, positions and angles in float32 and casts
cos/sin to the compute dtype before rotating (the YaRN factor ``0.1 ln s + 1`` is computed in
the compute dtype); SinePositionEncoding computes positions, frequencies and angles in the
compute dtype (bfloat16 / float16 angles); AlibiBias casts its Python-float slopes and the key
offsets to the compute dtype.  float64 runs on every backend (JAX with ``jax_enable_x64``, set by
the adapter before Keras is imported: without it JAX silently computes float64 in float32).

Learned rows (LEARNED-ROW-RANGE) are gathered by keras-hub's ``ops.take`` with no range check of
the wrapper's own: row -1 wraps to the last row on every backend, JAX returns NaN rows past the
end, torch raises ``IndexError``, and TensorFlow's gather raises ``InvalidArgumentError``
("indices[..] = N is not in [0, N)"), which the wrapper re-raises as ``IndexError`` (the
clause's error type) -- the only exception it translates.

Not wrapped or not expressible (each raises :class:`Unsupported` with the reason): interleaved
pairing, an explicit ``attention_factor``, YaRN ``mscale`` / ``mscale_all_dim`` or a derived
factor, LongRoPE, the proportional ``inv_freq`` / ``cos_sin``, sinusoid variants other than
Vaswani interleaved and sinusoid angles in turns or an output scale (SIN-UNITS-TURNS,
SIN-OUTPUT-SCALE: SinePositionEncoding has neither), BERT / RoBERTa / BART / OPT embeddings and rules, left-padded and packed
position ids, ALiBi forms other than MPT's, T5, M-RoPE, NoPE and the YaRN softmax scale.

Backend: fixed per process.  ``KERAS_BACKEND`` is set right before the first ``import keras``
(adapter objects are cheap; Keras is imported on first use); if Keras is already imported with
another backend, :class:`~posenc.spec.errors.UsageError` names both.  Devices: ``cpu`` (every
operation runs under ``keras.device("cpu:0")``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

import numpy as np

from posenc.spec.errors import AdapterError, UsageError
from posenc.spec.tolerance import EPS

from .base import Adapter, Unsupported, for_rotation, forms_unsupported, positive_rotation_only
from .reference_adapter import NP_DTYPES

BACKENDS = ("tensorflow", "jax", "torch")
#: ``GPTNeoXAttention.call`` slices the rotary part and concatenates the pass-through tail.
NEOX_SOURCE = "keras_hub/src/models/gpt_neo_x/gpt_neo_x_attention.py (GPTNeoXAttention.call)"


def import_keras(backend: str):
    """Keras under ``backend``: set ``KERAS_BACKEND`` right before the first ``import keras``.

    Raises :class:`UsageError` when Keras is already imported with another backend (the
    backend is fixed per process).  For JAX, ``jax_enable_x64`` is switched on first, so that
    float64 tensors stay float64.
    """
    if backend not in BACKENDS:
        raise UsageError(f"unknown Keras backend {backend!r}; choose from {', '.join(BACKENDS)}")
    loaded = sys.modules.get("keras")
    if loaded is not None:
        have = loaded.backend.backend()
        if have != backend:
            raise UsageError(
                f"keras is already imported with backend {have!r}, but adapter 'keras-hub-{backend}' needs "
                f"backend {backend!r}: the Keras backend is fixed per process (run one keras-hub adapter per "
                f"process, e.g. pytest conformance --adapter keras-hub-{backend})")
    if backend == "jax":
        import jax
        jax.config.update("jax_enable_x64", True)
    if loaded is None:
        os.environ["KERAS_BACKEND"] = backend
    import keras
    importlib.import_module("keras_hub")  # the wrapped library: an ImportError here is a failure

    if keras.backend.backend() != backend:  # e.g. a keras.json that overrides the variable
        raise UsageError(f"keras imported with backend {keras.backend.backend()!r} although "
                         f"KERAS_BACKEND={backend!r} was set")
    return keras


def _dedup_half(full, what: str, ops):
    """keras-hub's cos/sin are ``cat(c, c)`` ``[..., r]`` (``stack((freq, freq), -2)`` reshaped):
    return ``c`` ``[..., r/2]`` after checking that both halves hold the same values.  The same
    angle may come back a few ulps apart in the two halves (TensorFlow's vectorised ``sin`` / ``cos``
    rounds a lane differently from the scalar tail; found by the generated cases at head_dim 10), so
    "the same" is within 8 ulps of the dtype, and never less than float32's: the layer computes its
    angles and cos / sin in float32 at every dtype, float64 included (found by the generated cases at
    head_dim 6, theta 148, float64); a layout that is not ``cat(c, c)`` differs by far more."""
    h = full.shape[-1] // 2
    first, second = full[..., :h], full[..., h:]
    raw = np.asarray(ops.convert_to_numpy(first))
    a, b = raw.astype(np.float64), np.asarray(ops.convert_to_numpy(second)).astype(np.float64)
    eps = max(EPS.get(str(raw.dtype), EPS["float32"]), EPS["float32"])  # bfloat16: an ml_dtypes type, no np.finfo
    if a.shape != b.shape or not np.all(np.abs(a - b) <= 8 * eps * np.maximum(1.0, np.abs(a))):
        raise AdapterError(f"keras-hub: RotaryEmbedding {what} is not cat(c, c); its halves differ")
    return first


# --------------------------------------------------------------------------------------------
# RoPE
# --------------------------------------------------------------------------------------------


INTERLEAVED = ("keras-hub RotaryEmbedding pairs dims (i, i + d/2) only: _apply_rotary_pos_emb splits the feature axis "
               "into halves and rotates by [-x2, x1]; it has no interleaved (2i, 2i+1) pairing")


def _check_rope(p) -> None:
    """Raise :class:`Unsupported` for what keras-hub's RoPE layers cannot express."""
    if p.pairing != "half":
        raise Unsupported(INTERLEAVED)
    # Gemma4TextAttention sizes its share from rope_partial_rotary_factor; RotaryEmbedding takes no fraction,
    # and its linear scaling_factor divides the frequencies, not the positions
    forms_unsupported(p, "keras-hub RotaryEmbedding", fraction=p.rope_type == "proportional")
    t = p.rope_type
    if p.attention_factor is not None:
        if t == "yarn":
            raise Unsupported("keras-hub RotaryEmbedding's yarn always multiplies cos/sin by its own "
                              "0.1 ln(scaling_factor) + 1; it has no argument for an explicit attention_factor")
        raise Unsupported(f"keras-hub RotaryEmbedding has no attention-factor argument (rope_type {t!r}): cos and sin "
                          "are scaled only by rope_type 'yarn''s fixed 0.1 ln(scaling_factor) + 1")
    if t == "yarn":
        if p.factor is None:
            raise Unsupported("keras-hub RotaryEmbedding's yarn takes scaling_factor explicitly and has no "
                              "max_position_embeddings argument to derive the factor from (SCALE-YARN-FACTOR)")
        if p.mscale is not None or p.mscale_all_dim is not None:
            raise Unsupported("keras-hub RotaryEmbedding's yarn has no mscale / mscale_all_dim arguments: its cos/sin "
                              "factor is always 0.1 ln(scaling_factor) + 1")
    if t == "longrope":
        raise Unsupported("keras-hub RotaryEmbedding implements rope_type linear, dynamic and yarn only; LongRoPE "
                          "exists only as models/phi3 Phi3SuScaledRotaryEmbedding, which takes 1-D positions and "
                          "switches factors on start_index + seq_len (not wrapped)")
    if t == "proportional" and p.partial_rotary_factor is None:
        raw = int(p.rdim / p.head_dim * p.head_dim)  # Gemma4TextAttention.__init__'s rotary_dim rule
        if max(2, raw - raw % 2) != p.rdim:
            raise Unsupported(f"Gemma4TextAttention sizes the rotated share as int(partial_rotary_factor * head_dim) "
                              f"rounded down to even; rotary_dim {p.rdim} of head_dim {p.head_dim} is not expressible")


class _KerasRope:
    """A prepared RoPE operation: one keras-hub layer for one parameter set and dtype.

    ``apply`` takes q ``[B, Hq, T, D]``, k ``[B, Hk, T, D]`` and ``position_ids [B, T]`` (int64)
    and returns them rotated in the requested dtype (ROPE-PAIR-HALF, ROPE-ANGLE, ROPE-PARTIAL,
    SCALE-*).  The layer is stateless: keras-hub has no per-call or growing scaling state.
    """

    def __init__(self, ad: "KerasHubAdapter", params, dtype: str):
        self.ad, self.p, self.dtype = ad, params, dtype
        self.keras = ad.keras
        self._token_major = None  # the layer built with its default sequence_axis=1 (the token-major form)
        from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding

        p = params
        self.gemma = None
        if p.rope_type == "proportional":
            from keras_hub.src.models.gemma4.gemma4_attention import Gemma4TextAttention

            with ad.scope():
                attn = Gemma4TextAttention(
                    head_dim=p.head_dim, num_query_heads=1, num_key_value_heads=1,
                    rope_wavelength=float(p.rope_theta), rope_scaling_factor=float(p.factor or 1.0),
                    rope_partial_rotary_factor=(p.partial_rotary_factor if p.partial_rotary_factor is not None
                                                else p.rdim / p.head_dim), dtype=dtype)
                attn.build((None, None, 8))  # creates rope_layer (and tiny projections, unused)
            if attn.rotary_dim != p.rdim or attn.rope_layer.denominator_dim != p.head_dim:
                raise AdapterError(f"keras-hub: Gemma4TextAttention built rotary_dim {attn.rotary_dim} / denominator "
                                   f"{attn.rope_layer.denominator_dim}, expected {p.rdim} / {p.head_dim}")
            self.gemma, self.layer = attn, attn.rope_layer
            return
        common = dict(max_wavelength=float(p.rope_theta), feature_axis=-1, dtype=dtype)
        if p.rope_type == "llama3":
            from keras_hub.src.models.llama.llama_rotary_embedding import LlamaRotaryEmbedding

            def make(sequence_axis):
                return LlamaRotaryEmbedding(
                    frequency_adjustment_factor=float(p.factor), low_freq_factor=float(p.low_freq_factor),
                    high_freq_factor=float(p.high_freq_factor),
                    pretraining_sequence_length=int(p.original_max_position_embeddings), sequence_axis=sequence_axis,
                    **common)
            self._make, self.layer = make, make(2)
            return
        kw: dict = {"rope_type": "linear", "scaling_factor": 1.0}
        if p.rope_type in ("linear", "dynamic"):
            kw = {"rope_type": p.rope_type, "scaling_factor": float(p.factor)}
        elif p.rope_type == "yarn":
            kw = {"rope_type": "yarn", "scaling_factor": float(p.factor),
                  "original_max_position_embeddings": int(p.original_max_position_embeddings)}
            for name in ("beta_fast", "beta_slow"):
                if getattr(p, name) is not None:
                    kw[name] = float(getattr(p, name))
            if p.truncate is not None:
                kw["truncate"] = bool(p.truncate)
        self._make = lambda sequence_axis: RotaryEmbedding(**kw, sequence_axis=sequence_axis, **common)
        self.layer = self._make(2)

    # -- the prepared operations ------------------------------------------------------------
    def inv_freq(self):
        """ROPE-INV-FREQ, SCALE-*: the layer's float32 ``_get_inverse_freq(rotary_dim)``; the
        attention factor is read from the layer's own cos at position 0 (``cos(0) * factor``)."""
        if self.gemma is not None:
            raise Unsupported("keras-hub's proportional RoPE (Gemma4TextAttention._apply_rope) rotates the share "
                              "and passes the rest through: it never forms head_dim/2 frequencies (no zeros past "
                              "the share), so there is no such inv_freq to return")
        with self.ad.scope():
            w = self.layer._get_inverse_freq(self.p.rdim)
            c, _ = self._cos_sin(self.ad.from_numpy(np.zeros((1, 1), np.int64), "int64", "cpu"))
        return w, float(self.keras.ops.convert_to_numpy(self.keras.ops.cast(c[0, 0, 0], "float64")))

    def _cos_sin(self, position_ids):
        B, T = position_ids.shape
        probe = self.keras.ops.zeros((B, T, self.p.rdim), dtype=self.dtype)  # only its shape is read
        return self.layer._compute_cos_sin_embedding(probe, positions=position_ids)

    def cos_sin(self, position_ids):
        """ROPE-ANGLE, SCALE-*: ``_compute_cos_sin_embedding`` (cast to the compute dtype, yarn's
        factor applied), de-duplicated from ``cat(c, c)`` to ``[B, T, rotary_dim/2]``."""
        if self.gemma is not None:
            raise Unsupported("keras-hub's proportional RoPE (Gemma4TextAttention._apply_rope) never forms the "
                              "head_dim/2 cos/sin (the pass-through pairs are concatenated, not rotated by angle 0)")
        with self.ad.scope():
            c, s = self._cos_sin(position_ids)
            ops = self.keras.ops
            return _dedup_half(c, "cos", ops), _dedup_half(s, "sin", ops)

    def _rotate(self, x, position_ids, start_index=0, token_major: bool = False):
        """x rotated by the layer at ``positions=position_ids`` or, where None, at ``start_index + t`` (the layer's
        ``start_index``); x ``[B, H, T, D]``, or ``[B, T, H, D]`` where ``token_major`` (the layer built with
        its default ``sequence_axis=1``; Gemma 4's attention takes that layout itself)."""
        ops, r = self.keras.ops, self.p.rdim
        if self.gemma is not None:  # Gemma 4 works on [B, T, H, D]
            if token_major:
                return self.gemma._apply_rope(x, start_index, positions=position_ids)
            y = self.gemma._apply_rope(ops.transpose(x, (0, 2, 1, 3)), start_index, positions=position_ids)
            return ops.transpose(y, (0, 2, 1, 3))
        layer = self.layer
        if token_major:
            if self._token_major is None:
                self._token_major = self._make(1)
            layer = self._token_major
        if r == self.p.head_dim:
            return layer(x, start_index=start_index, positions=position_ids)
        # GPT-NeoX (NEOX_SOURCE): rotate x[..., :r], concatenate the untouched tail
        return ops.concatenate((layer(x[..., :r], start_index=start_index, positions=position_ids), x[..., r:]),
                               axis=-1)

    def apply(self, q, k, position_ids):
        """End-to-end RoPE: the layer's call on q and k (its own axis moves, sequence_axis=2)."""
        with self.ad.scope():
            return self._rotate(q, position_ids), self._rotate(k, position_ids)

    def apply_token_major(self, q, k, position_ids):
        """rope.apply_token_major: q, k ``[B, T, H, D]``, the layer's own default layout (``sequence_axis=1``)."""
        with self.ad.scope():
            return self._rotate(q, position_ids, token_major=True), self._rotate(k, position_ids, token_major=True)

    def apply_offset(self, q, k, offset: int):
        """rope.apply_offset: the layer's ``start_index=offset`` (positions ``arange(T) + start_index``, which it
        forms in float32: ``_compute_positions``)."""
        with self.ad.scope():
            return self._rotate(q, None, start_index=offset), self._rotate(k, None, start_index=offset)


# --------------------------------------------------------------------------------------------
# The adapter
# --------------------------------------------------------------------------------------------

_NOT_IN_KERAS_HUB = {
    "fairseq_positions": "keras-hub has no fairseq / M2M100 sinusoidal positions (SinePositionEncoding has no "
                         "padding_idx and takes start_index or explicit positions only)",
    "fairseq_sinusoidal": "keras-hub has no fairseq / M2M100 sinusoidal layer (SinePositionEncoding builds Vaswani "
                          "interleaved sinusoids with no padding_idx row)",
    "bert_embeddings": "keras-hub has no BERT embeddings layer: BertBackbone composes its token, position "
                       "(PositionEmbedding), segment embeddings and LayerNormalization inline in its functional "
                       "graph, with no position_ids or cache_length input",
    "roberta_positions": "keras-hub has no RoBERTa position rule: RobertaBackbone's TokenAndPositionEmbedding reads "
                         "rows arange(T) (padding ignored) and its checkpoint converter drops HF's first "
                         "padding_idx + 1 rows (utils/transformers/convert_roberta.py)",
    "roberta_embeddings": "keras-hub has no RoBERTa embeddings layer taking HF's padding-aware rows: RobertaBackbone "
                          "reads rows arange(T) of a table without HF's first padding_idx + 1 rows "
                          "(utils/transformers/convert_roberta.py drops them)",
    "bart_embeddings": "keras-hub's BartBackbone uses PositionEmbedding rows arange(T) of a table without HF's +2 "
                       "offset rows (utils/transformers/convert_bart.py drops hf_tensor[:2]); no layer takes "
                       "the 1026-row table with its offset",
    "opt_positions": "keras-hub has no OPT position rule: OPTBackbone's TokenAndPositionEmbedding reads rows "
                     "arange(T), ignoring the attention mask",
    "opt_rows": "keras-hub has no OPT +2 row offset: OPTBackbone's PositionEmbedding is indexed from row 0",
    "opt_embeddings": "keras-hub has no OPT learned positional embedding with the mask rule and +2 offset "
                      "(OPTBackbone's TokenAndPositionEmbedding reads rows arange(T))",
    "t5_buckets": "not wrapped: keras-hub's T5 relative buckets live inside models/t5 T5MultiHeadAttention, "
                  "not among the position layers (layers/modeling) this adapter wraps",
    "t5_bias": "not wrapped: keras-hub's T5 relative bias lives inside models/t5 T5MultiHeadAttention, not among "
               "the position layers (layers/modeling) this adapter wraps",
    "mrope": "keras-hub's RotaryEmbedding takes one position per token; it has no multimodal (t, h, w) sections",
    "nope_apply": "not wrapped: keras-hub's NoPE layers live inside models/smollm3, not among the position layers "
                  "(layers/modeling) this adapter wraps",
    "nope_layer_flags": "not wrapped: keras-hub's NoPE flags live in models/smollm3's backbone config, not among the "
                        "position layers (layers/modeling) this adapter wraps",
    "attention_probs": "keras-hub's RotaryEmbedding has no softmax scale: the YaRN mscale correction of the "
                       "attention scale (DeepSeek MLA) exists in no keras-hub position layer",
}


class KerasHubAdapter(Adapter):
    """keras-hub's position layers under one Keras backend (see the module docstring)."""

    devices = ("cpu",)
    #: the layer's other calls: ``start_index`` (one offset for every row), its default layout ``[B, T, H, D]``
    #: (``sequence_axis=1``), int32 ``positions``
    call_forms = ("rope.apply_offset", "rope.apply_token_major", "rope.apply_int32")

    def __init__(self, backend: str):
        if backend not in BACKENDS:
            raise UsageError(f"unknown Keras backend {backend!r}; choose from {', '.join(BACKENDS)}")
        self.backend = backend
        self.name = f"keras-hub-{backend}"
        self.framework = f"keras ({backend})"
        if backend == "jax":
            self.generated_examples = 2  # compile-bound, as the kit's jax adapters
        self.notes = ("keras-hub 0.32 RotaryEmbedding: float32 inv_freq, positions and angles, cos/sin cast to the "
                      "compute dtype before the rotation; SinePositionEncoding: angles in the compute dtype")
        self._keras = None

    # ---- environment -------------------------------------------------------------------
    @property
    def keras(self):
        if self._keras is None:
            self._keras = import_keras(self.backend)
        return self._keras

    def versions(self):
        keras = self.keras
        import keras_hub

        fw = importlib.import_module(self.backend)
        return {"keras-hub": keras_hub.__version__, "keras": keras.__version__, self.backend: fw.__version__}

    def scope(self):
        """Every operation runs under ``keras.device("cpu:0")`` (no silent GPU placement)."""
        return self.keras.device("cpu:0")

    # ---- arrays ------------------------------------------------------------------------
    def from_numpy(self, array, dtype, device):
        ops = self.keras.ops
        with self.scope():
            if self.backend == "jax":  # cast on the host, placed by device_put: convert_to_tensor and cast compile
                import jax  # per new shape (half of this column's compilations); the kit's inputs are exact in
                # every dtype, so the values are the same
                return jax.device_put(np.asarray(array).astype(NP_DTYPES[dtype]), jax.devices("cpu")[0])
            x = ops.convert_to_tensor(np.ascontiguousarray(array))
            return x if self.dtype_of(x) == dtype else ops.cast(x, dtype)

    def to_numpy(self, x):
        a = np.asarray(self.keras.ops.convert_to_numpy(x))
        return a.astype(np.float32) if a.dtype.name == "bfloat16" else a

    def dtype_of(self, x):
        return self.keras.backend.standardize_dtype(x.dtype)

    def device_of(self, x):
        if self.backend == "torch":
            return str(x.device)
        if self.backend == "jax":
            d = next(iter(x.devices()))
            return d.platform if d.platform == "cpu" else f"{d.platform}:{d.id}"
        name = x.device.rsplit("device:", 1)[-1].lower()  # TensorFlow: '/job:.../device:CPU:0'
        return "cpu" if name.startswith("cpu") else name

    # ---- RoPE ------------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        """ROPE-*, SCALE-*: a prepared keras-hub RoPE layer (see :class:`_KerasRope`)."""
        _check_rope(params)
        return for_rotation(_KerasRope(self, params, dtype), params, "keras-hub's RotaryEmbedding")

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        """ROPE-PAIR-HALF / ROPE-PARTIAL with given half-width cos/sin ``[B, T, r/2]``:
        ``RotaryEmbedding._apply_rotary_pos_emb`` on ``[B, H, T, r]`` with ``cat(c, c)[:, None]``."""
        positive_rotation_only(params, "keras-hub's RotaryEmbedding")
        if params.pairing != "half":
            raise Unsupported(INTERLEAVED)
        from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding

        ops, r = self.keras.ops, params.rdim
        if cos.shape[-1] * 2 != r:
            raise ValueError(f"cos has width {cos.shape[-1]}, expected rotary_dim/2 = {r // 2}")
        layer = RotaryEmbedding(dtype=self.dtype_of(q))
        with self.scope():
            c2 = ops.expand_dims(ops.concatenate((cos, cos), axis=-1), 1)
            s2 = ops.expand_dims(ops.concatenate((sin, sin), axis=-1), 1)

            def rot(x):
                y = layer._apply_rotary_pos_emb(x[..., :r], c2, s2)
                return y if r == x.shape[-1] else ops.concatenate((y, x[..., r:]), axis=-1)  # NEOX_SOURCE
            return rot(q), rot(k)

    # ---- sinusoidal ------------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        """SIN-VASWANI-INTERLEAVED: ``SinePositionEncoding(max_wavelength=base)`` with explicit
        ``positions`` ``[B, T]``; the input is a zero ``[B, T, D]`` tensor (only its shape is read)."""
        if params.variant != "vaswani":
            raise Unsupported(f"keras-hub SinePositionEncoding builds Vaswani frequencies max_wavelength^(-2 floor(j/2)"
                              f"/D) only; the h - 1 divisor variant {params.variant!r} is not expressible")
        if params.layout != "interleaved":
            raise Unsupported("keras-hub SinePositionEncoding interleaves the columns (even: sin, odd: cos); it has no "
                              "[sin | cos] concatenated layout")
        if params.units != "radians":
            raise Unsupported("keras-hub SinePositionEncoding takes its angles in radians (positions x timescales): "
                              f"units {params.units!r} (2π · p · w) is not expressible")
        if params.scale != 1.0:
            raise Unsupported(f"keras-hub SinePositionEncoding returns the plain table: an output scale "
                              f"({params.scale:g}) is not expressible")
        from keras_hub.src.layers.modeling.sine_position_encoding import SinePositionEncoding

        ops = self.keras.ops
        B, T = position_ids.shape
        with self.scope():
            layer = SinePositionEncoding(max_wavelength=float(params.base), dtype=dtype)
            return layer(ops.zeros((B, T, params.dim), dtype=dtype), positions=position_ids)

    # ---- learned ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _index_errors(self):
        """TensorFlow's gather reports an out-of-range row as ``InvalidArgumentError`` ("indices[..]
        = n is not in [0, N)"): re-raised as the ``IndexError`` the clause names, unchanged otherwise."""
        if self.backend != "tensorflow":
            yield
            return
        import tensorflow as tf

        try:
            yield
        except tf.errors.InvalidArgumentError as e:
            if "is not in [0," in str(e):
                raise IndexError(f"keras-hub PositionEmbedding (TensorFlow gather): {e.message}") from e
            raise

    def lookup(self, table, rows):
        """LEARNED-ROW-RANGE: ``PositionEmbedding`` holding ``table`` ``[N, E]``, called with
        ``positions=rows`` ``[B, T]`` (its ``ops.take``); returns ``[B, T, E]``."""
        from keras_hub.src.layers.modeling.position_embedding import PositionEmbedding

        ops = self.keras.ops
        (n, e), dtype = table.shape, self.dtype_of(table)
        B, T = rows.shape
        with self.scope(), self._index_errors():
            layer = PositionEmbedding(sequence_length=n, dtype=dtype)
            layer.build((None, n, e))
            layer.position_embeddings.assign(table)
            return layer(ops.zeros((B, T, e), dtype=dtype), positions=rows)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-GPT2-SUM, LEARNED-GPT2-POSITIONS: ``TokenAndPositionEmbedding`` with the given
        ``wte`` / ``wpe``; the callable passes ``start_index=cache_length`` (default positions,
        ``PositionEmbedding``'s slice) or ``positions=position_ids`` (its ``ops.take``)."""
        from keras_hub.src.layers.modeling.token_and_position_embedding import TokenAndPositionEmbedding

        with self.scope():
            emb = TokenAndPositionEmbedding(vocabulary_size=params.vocab_size, sequence_length=params.n_positions,
                                            embedding_dim=params.n_embd, dtype=dtype)
            emb.build((None, None))
            emb.token_embedding.embeddings.assign(weights["wte"])
            emb.position_embedding.position_embeddings.assign(weights["wpe"])

        def call(input_ids, position_ids=None, cache_length=0):
            with self.scope(), self._index_errors():
                return emb(input_ids, start_index=cache_length, positions=position_ids)
        return call

    # ---- position ids ----------------------------------------------------------------------
    def position_ids(self, rule, *, device, **x):
        """POS-PREFILL, POS-DECODE: ``RotaryEmbedding._compute_positions`` (float32 ``arange(T) +
        start_index``, one row for the batch) broadcast to ``[B, T]`` and cast to int64."""
        if rule not in ("prefill", "decode"):
            raise Unsupported(f"keras-hub position layers take start_index (arange(T) + start_index for every row) "
                              f"or explicit positions; no keras-hub layer builds the {rule!r} rule")
        from keras_hub.src.layers.modeling.rotary_embedding import RotaryEmbedding

        ops = self.keras.ops
        B, T = x["batch"], x["seq_len"]
        start = x.get("cache_length", 0) if rule == "decode" else 0
        with self.scope():
            pos = RotaryEmbedding()._compute_positions(ops.zeros((B, T, 2)), start_index=start)  # [T] float32
            return ops.broadcast_to(ops.cast(pos, "int64")[None, :], (B, T))

    # ---- ALiBi -----------------------------------------------------------------------------
    def _alibi(self, params, dtype, heads_shape):
        from keras_hub.src.layers.modeling.alibi_bias import AlibiBias

        ops = self.keras.ops
        layer = AlibiBias(alibi_bias_max=params.alibi_bias_max, dtype=dtype)
        return layer(ops.zeros(heads_shape, dtype=dtype))

    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES: ``AlibiBias`` (built in the requested dtype, as a model of that dtype
        builds it) on zero scores ``[1, H, 1, 2]`` gives ``m * (j - 1)``; the negated key-0 column is
        the slopes the layer holds, returned exactly as float32 (float64 for float64 runs): the
        layer casts its slopes to its compute dtype, so a bf16/f16 layer holds rounded slopes."""
        with self.scope():
            slopes = -self._alibi(params, dtype, (1, params.num_heads, 1, 2))[0, :, 0, 0]
            return self.keras.ops.cast(slopes, "float64" if dtype == "float64" else "float32")

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-MPT: ``AlibiBias(alibi_bias_max)`` on zero scores ``[1, H, Tq, Tk]``: the scores
        plus ``m (j - (Tk - 1))`` on every query row, returned as ``[H, Tq, Tk]``."""
        if params.form != "mpt":
            raise Unsupported(f"ALiBi form {params.form!r}: keras-hub AlibiBias adds only the row-constant "
                              "m (j - (Tk - 1)) (MPT form) for the key length of the scores; it has no "
                              + {"causal": "relative causal -m (i - j) table",
                                 "symmetric": "symmetric (encoder) -m |i - j| bias",
                                 "bloom": "attention-mask input (BLOOM's m pos_j from cumsum(mask) - 1)"}[params.form])
        with self.scope():
            return self._alibi(params, dtype, (1, params.num_heads, query_length, key_length))[0]


def _make_unsupported(op: str, reason: str):
    def method(self, *args, **kwargs):
        raise Unsupported(reason)
    method.__name__ = op
    method.__doc__ = f"Unsupported: {reason}."
    return method


for _op, _reason in _NOT_IN_KERAS_HUB.items():
    setattr(KerasHubAdapter, _op, _make_unsupported(_op, _reason))


#: ``keras-hub-tensorflow``: keras-hub on Keras' TensorFlow backend.
TENSORFLOW_ADAPTER = KerasHubAdapter("tensorflow")
#: ``keras-hub-jax``: keras-hub on Keras' JAX backend (``jax_enable_x64`` on).
JAX_ADAPTER = KerasHubAdapter("jax")
#: ``keras-hub-torch``: keras-hub on Keras' torch backend.
TORCH_ADAPTER = KerasHubAdapter("torch")
