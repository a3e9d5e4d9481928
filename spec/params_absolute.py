"""Parameter models of the absolute and bias families: sinusoids, learned position tables, ALiBi, T5
(re-exported by :mod:`posenc.spec.models`, where every parameter model is found by name)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from .document import _Strict

SinusoidVariant = Literal["vaswani", "t2t", "fairseq", "whisper"]
SinusoidOrder = Literal["sin_first", "cos_first"]
SinusoidUnits = Literal["radians", "turns"]
AlibiForm = Literal["causal", "symmetric", "bloom", "mpt"]


class SinusoidalParams(_Strict):
    """Sinusoidal absolute table (clauses SIN-*).

    ``variant``: ``vaswani`` (frequencies ``base^(-2i/D)``, SIN-VASWANI-INTERLEAVED / -CONCAT, in
    ``layout``); the h - 1 divisor family ``base^(-i/(h-1))``, h = D // 2, all ``[sin | cos]``
    (``layout`` must be ``concat``): ``t2t`` (tensor2tensor ``get_timing_signal_1d``: odd D
    appends a zero column, D = 2 clamps the divisor to 1; SIN-T2T), ``fairseq`` (the t2t table
    with row ``padding_idx`` zeroed, positions ``cumsum(mask) * mask + padding_idx``; D = 2 is
    :class:`~posenc.spec.errors.DegenerateWidth`; SIN-FAIRSEQ-POSITIONS), ``whisper`` (t2t
    frequencies; odd D and D = 2 are DegenerateWidth; SIN-WHISPER).  Degenerate widths are
    valid parameters: the operations raise the named error, so an implementation can be
    checked for it.  ``padding_idx`` is required by (and only allowed for) ``fairseq``.

    Options of every variant (spec 0.5.0): ``order`` ``cos_first`` puts the cos block before the sin
    block of a ``[sin | cos]`` table, each block keeping its columns, a zero column staying last
    (SIN-ORDER-COS-FIRST: MusicGen, audiocraft, moshi); it needs ``layout`` ``concat`` (no source
    interleaves cos first: refused for ``interleaved``).  ``units`` ``turns``: the angle is ``2π · p ·
    w`` (``p · w`` counts full turns; SIN-UNITS-TURNS).  ``scale`` multiplies every table entry
    (SIN-OUTPUT-SCALE: x-transformers' and cramming's scaled sinusoids, initialised to ``D ** -0.5``);
    fairseq's row ``padding_idx`` stays zero.  The defaults (``sin_first``, ``radians``, 1.0) are the
    tables of the clauses above, unchanged.
    """

    dim: int = Field(gt=0, description="Model width D")
    layout: Literal["interleaved", "concat"] = "interleaved"
    base: float = Field(10000.0, gt=1)
    variant: SinusoidVariant = Field("vaswani", description="vaswani (2i/D) or the h-1 divisor rules t2t, "
                                                            "fairseq, whisper")
    padding_idx: Optional[int] = Field(None, ge=0, description="fairseq: the pad id; its row is zero")
    order: SinusoidOrder = Field("sin_first", description="which block of a [sin | cos] table comes first "
                                                          "(cos_first: [cos | sin]; layout concat only)")
    units: SinusoidUnits = Field("radians", description="radians: angle p * w; turns: angle 2 pi * p * w")
    scale: float = Field(1.0, gt=0, allow_inf_nan=False, description="multiplies every table entry")

    @model_validator(mode="after")
    def _check(self) -> "SinusoidalParams":
        if self.variant != "vaswani" and self.layout != "concat":
            raise ValueError(f"variant {self.variant!r} lays out [sin | cos]: layout must be 'concat'")
        if self.variant == "fairseq" and self.padding_idx is None:
            raise ValueError("variant 'fairseq' needs padding_idx (M2M100 / fairseq: the pad id, 1)")
        if self.variant != "fairseq" and self.padding_idx is not None:
            raise ValueError(f"padding_idx does not apply to variant {self.variant!r}")
        if self.order == "cos_first" and self.layout != "concat":
            raise ValueError("order 'cos_first' swaps the blocks of a [sin | cos] table: layout must be 'concat' "
                             "(no implementation interleaves cos first, with cos in the even columns)")
        return self

    @property
    def h_minus_1(self) -> bool:
        """Whether the frequencies use the h - 1 divisor (t2t, fairseq, whisper)."""
        return self.variant != "vaswani"


class GPT2EmbeddingParams(_Strict):
    """GPT-2 input embeddings ``wte[input_ids] + wpe[position_ids]`` (LEARNED-GPT2-*)."""

    vocab_size: int = Field(gt=0)
    n_positions: int = Field(gt=0)
    n_embd: int = Field(gt=0)


class BertEmbeddingParams(_Strict):
    """BERT input embeddings: word + token_type + position, then LayerNorm (LEARNED-BERT-*)."""

    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(gt=0)
    type_vocab_size: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    layer_norm_eps: float = Field(1e-12, gt=0)


class OPTEmbeddingParams(_Strict):
    """OPT learned positions: ``max_position_embeddings + 2`` rows (LEARNED-OPT-*)."""

    max_position_embeddings: int = Field(gt=0)
    hidden_size: int = Field(gt=0)

    @property
    def num_rows(self) -> int:
        return self.max_position_embeddings + 2


class RobertaEmbeddingParams(_Strict):
    """RoBERTa input embeddings: BERT's sum and LayerNorm, padding-aware rows (LEARNED-ROBERTA-*).

    roberta-base: ``max_position_embeddings`` 514 (= 512 + 2), ``type_vocab_size`` 1,
    ``layer_norm_eps`` 1e-5, ``padding_idx`` (``pad_token_id``) 1.  RobertaConfig's defaults
    are BERT's (512, 2, 1e-12): do not take real values from them.
    """

    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(514, gt=0)
    type_vocab_size: int = Field(1, gt=0)
    hidden_size: int = Field(768, gt=0)
    layer_norm_eps: float = Field(1e-5, gt=0)
    padding_idx: int = Field(1, ge=0)

    @model_validator(mode="after")
    def _check(self) -> "RobertaEmbeddingParams":
        if self.padding_idx >= self.max_position_embeddings:
            raise ValueError(f"padding_idx {self.padding_idx} is not a row of the {self.max_position_embeddings}-row table")
        return self


class BartEmbeddingParams(_Strict):
    """BART learned positions: ``max_position_embeddings + 2`` rows, row = position + 2 (LEARNED-BART-*)."""

    max_position_embeddings: int = Field(1024, gt=0)
    hidden_size: int = Field(768, gt=0)

    @property
    def num_rows(self) -> int:
        return self.max_position_embeddings + 2


class LookupParams(_Strict):
    """A plain learned table lookup (LEARNED-ROW-RANGE)."""

    num_rows: int = Field(gt=0)
    dim: int = Field(gt=0)


class AlibiParams(_Strict):
    """ALiBi slopes and bias (clauses ALIBI-*).

    ``num_heads`` any positive count (non-powers of two interleave the slopes of the next power
    of two, ALIBI-SLOPES); ``alibi_bias_max`` the 8 of ``2^(-8k/n)`` (MPT's name, MptConfig
    default 8); ``form`` which bias to build: ``causal`` (-m(i-j), ALIBI-CAUSAL), ``symmetric``
    (-m|i-j|, ALIBI-SYMMETRIC), ``bloom`` (m pos_j from cumsum(mask), ALIBI-BLOOM), ``mpt``
    (m(j-(L-1)), ALIBI-MPT).  The slopes do not depend on the form.
    """

    num_heads: int = Field(gt=0)
    alibi_bias_max: float = Field(8.0, gt=0)
    form: AlibiForm = "causal"


class T5Params(_Strict):
    """T5 relative position buckets and bias (clauses T5-*); T5Config defaults 32 / 128.

    ``bidirectional`` True for the encoder (and encoder-style self-attention), False for the
    decoder's causal self-attention (``is_decoder``).  Bidirectional buckets halve
    ``num_buckets`` with a floor (transformers ``num_buckets //= 2``): an odd count is allowed and
    its last bucket is never read.  The exact range (half the, possibly halved, buckets) must be
    at least 1 and below ``max_distance``.
    """

    num_buckets: int = Field(32, ge=2)
    max_distance: int = Field(128, gt=0)
    bidirectional: bool = True

    @model_validator(mode="after")
    def _check(self) -> "T5Params":
        n = self.num_buckets
        if self.bidirectional:
            n //= 2  # floor, as transformers' _relative_position_bucket (odd counts allowed)
        if n // 2 < 1:
            raise ValueError(f"num_buckets {self.num_buckets} leaves no exact bucket")
        if self.max_distance <= n // 2:
            raise ValueError(f"max_distance {self.max_distance} must exceed the exact range {n // 2}")
        return self
