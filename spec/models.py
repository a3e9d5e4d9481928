"""Pydantic v2 models of the machine-readable specification.

Two kinds of model live here:

* the *document* models (:class:`Clause`, :class:`Divergence`, :class:`Operation`,
  :class:`FamilyFile`, defined in :mod:`posenc.spec.document`) that ``spec/*.yaml`` is
  validated against, and from which ``spec/schema.json`` is exported;
* the *parameter* models (:class:`RopeParams`, :class:`SinusoidalParams`, ...) that every
  operation, reference function and adapter receives.  Adapters translate these into their
  library's own API; they never receive loose dicts.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, Field, model_validator

from .params_absolute import (  # noqa: F401  (every parameter model is found here by name)
    AlibiForm,
    AlibiParams,
    BartEmbeddingParams,
    BertEmbeddingParams,
    GPT2EmbeddingParams,
    LookupParams,
    OPTEmbeddingParams,
    RobertaEmbeddingParams,
    SinusoidalParams,
    SinusoidVariant,
    T5Params,
)
from .document import (  # noqa: F401  (the document models are part of posenc.spec.models)
    CLAUSE_ID,
    DIVERGENCE_ID,
    FAMILY_NAME,
    Family,
    INVARIANTS,
    Invariant,
    ToleranceClass,
    Dtype,
    DTYPES,
    _Strict,
    Source,
    ParameterSpec,
    TensorSpec,
    Clause,
    Divergence,
    ARG_TOKEN,
    OperationInput,
    OperationOutput,
    Operation,
    FamilyFile,
)


# --------------------------------------------------------------------------------------------
# Parameter models: what operations receive.
# --------------------------------------------------------------------------------------------


def rotary_width(head_dim: int, fraction: float, proportional: bool = False) -> int:
    """ROPE-ROTARY-FRACTION: ``int(head_dim * fraction)``, the float64 product truncated toward zero
    (transformers ``modeling_rope_utils.py::_compute_default_rope_parameters``, vLLM ``get_rope``,
    LitGPT ``Config.__post_init__``: ``int(...)``; 100 x 0.29 = 28.999999999999996 gives 28); for
    proportional rope ``2 * int(fraction * head_dim // 2)`` (SCALE-PROPORTIONAL: transformers
    ``_compute_proportional_rope_parameters``), rounded down to even."""
    if proportional:
        return 2 * int(fraction * head_dim // 2)
    return int(head_dim * fraction)


RopeType = Literal["default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"]

#: For each rope_type: the scaling fields it requires, and the ones it accepts (HF 5.24
#: ``modeling_rope_utils.ROPE_INIT_FUNCTIONS``; ``default`` is each model's own rule).
ROPE_TYPE_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor", "max_position_embeddings"), ("dynamic_policy",)),
    "yarn": (("original_max_position_embeddings",),
             ("factor", "max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate")),
    "llama3": (("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"), ()),
    "longrope": (("short_factor", "long_factor", "original_max_position_embeddings"),
                 ("factor", "max_position_embeddings", "longrope_policy")),
    "proportional": ((), ("factor",)),
}
_SCALING_FIELDS = ("factor", "original_max_position_embeddings", "max_position_embeddings", "beta_fast",
                   "beta_slow", "mscale", "mscale_all_dim", "truncate", "low_freq_factor", "high_freq_factor",
                   "short_factor", "long_factor", "dynamic_policy", "longrope_policy")


class RopeParams(_Strict):
    """Rotary position embedding parameters (clauses ROPE-*, and SCALE-* for ``rope_type``).

    ``rotary_dim`` defaults to ``head_dim`` (no partial rotary); for ``proportional`` it is the
    rotated share of a head whose pairs still span ``head_dim`` (SCALE-PROPORTIONAL).
    ``partial_rotary_factor``: the rotated width as a fraction of ``head_dim`` instead (never both):
    ``int(head_dim * partial_rotary_factor)``, the float64 product truncated, as every library sizes it
    (ROPE-ROTARY-FRACTION: 100 x 0.29 gives 28); for ``proportional``
    ``2 * int(partial_rotary_factor * head_dim // 2)``, rounded down to even (SCALE-PROPORTIONAL).  A
    fraction giving an odd or zero width is refused (a ``ValueError`` naming the clause).
    ``condense_ratio``: positions divided by it before the angle, ``phi = (p / c) inv_freq``
    (ROPE-CONDENSE; LitGPT ``rope_condense_ratio``, Megatron-Core ``seq_len_interpolation_factor``);
    rope_type ``default`` only.
    ``rotation``: ``positive`` turns every pair by +phi (ROPE-PAIR-*); ``negative`` by -phi
    (ROPE-ROTATION-NEGATIVE: NanoChat's ``rotate_half`` returns ``cat(x2, -x1)``); the cos/sin
    tables are the same either way, only the rotations (``rope.apply``, ``rope.apply_with_cos_sin``)
    differ.
    ``attention_factor``: an explicit factor multiplying cos and sin; ``None`` means the
    rope_type's own rule (1 for default, linear, dynamic, llama3, proportional; SCALE-YARN-
    ATTENTION-FACTOR; SCALE-LONGROPE-ATTENTION-FACTOR).  The scaling fields follow HF's
    ``rope_parameters`` names; a field that does not apply to the rope_type is an error.
    """

    head_dim: int = Field(gt=0)
    rotary_dim: Optional[int] = Field(None, gt=0)
    partial_rotary_factor: Optional[float] = Field(
        None, gt=0, le=1, description="the rotated share of head_dim: width int(head_dim * f) in float64 "
                                      "(ROPE-ROTARY-FRACTION); exclusive with rotary_dim")
    condense_ratio: Optional[float] = Field(
        None, ge=1, description="positions divided by it before the angle (ROPE-CONDENSE); rope_type default")
    rope_theta: float = Field(10000.0, gt=0)
    pairing: Literal["half", "interleaved", "deinterleave"] = "half"
    rotation: Literal["positive", "negative"] = Field(
        "positive", description="the direction every pair turns: +phi (ROPE-PAIR-*) or -phi "
                                "(ROPE-ROTATION-NEGATIVE, NanoChat)")
    rope_type: RopeType = "default"
    attention_factor: Optional[float] = Field(None, gt=0)
    factor: Optional[float] = Field(None, gt=0)
    original_max_position_embeddings: Optional[int] = Field(None, gt=0)
    max_position_embeddings: Optional[int] = Field(None, gt=0)
    beta_fast: Optional[float] = Field(None, gt=0, description="yarn; default 32; must be > 0")
    beta_slow: Optional[float] = Field(None, gt=0, description="yarn; default 1; must be > 0")
    mscale: Optional[float] = Field(None, gt=0)
    mscale_all_dim: Optional[float] = Field(None, gt=0)
    truncate: Optional[bool] = Field(None, description="yarn; default true (floor/ceil the correction range)")
    low_freq_factor: Optional[float] = Field(None, gt=0)
    high_freq_factor: Optional[float] = Field(None, gt=0)
    short_factor: Optional[tuple[float, ...]] = None
    long_factor: Optional[tuple[float, ...]] = None
    dynamic_policy: Optional[Literal["per_call", "grow_until_reset"]] = Field(
        None, description="dynamic; per_call (SCALE-DYNAMIC-PER-CALL, default) or transformers' "
                          "grow_until_reset (SCALE-DYNAMIC-GROW)")
    longrope_policy: Optional[Literal["per_call", "at_init"]] = Field(
        None, description="longrope; per_call (default: long factors when the call's seq_len exceeds "
                          "original_max_position_embeddings) or at_init (long factors for every call when "
                          "max_position_embeddings exceeds original_max_position_embeddings); SCALE-LONGROPE-FACTORS")

    @model_validator(mode="after")
    def _check(self) -> "RopeParams":
        self._check_forms()
        r = self.rdim
        if r % 2:
            what = "rotary_dim" if self.rotary_dim is not None else "head_dim (the default rotary_dim)"
            raise ValueError(f"{what} must be even, got {r}")
        if r > self.head_dim:
            raise ValueError(f"rotary_dim {r} exceeds head_dim {self.head_dim}")
        if self.rope_type == "proportional" and self.head_dim % 2:
            raise ValueError(f"proportional rope pairs over head_dim, which must be even, got {self.head_dim}")
        required, optional = ROPE_TYPE_FIELDS[self.rope_type]
        for name in _SCALING_FIELDS:
            value = getattr(self, name)
            if name in required and value is None:
                raise ValueError(f"{name} is required for rope_type {self.rope_type!r}")
            if value is not None and name not in required and name not in optional:
                raise ValueError(f"{name} does not apply to rope_type {self.rope_type!r}")
        for name in ("short_factor", "long_factor"):
            v = getattr(self, name)
            if v is not None and len(v) != r // 2:
                raise ValueError(f"{name} must have rotary_dim/2 = {r // 2} entries, got {len(v)}")
            if v is not None and min(v) <= 0:
                raise ValueError(f"{name} entries must be > 0, got {min(v)}")
        if self.rope_type == "dynamic" and r <= 2:
            raise ValueError(f"dynamic rope needs rotary_dim > 2 (the exponent is d / (d - 2)), got {r}")
        if self.rope_type in ("yarn", "longrope") and self.factor is None and self.max_position_embeddings is None:
            raise ValueError(f"{self.rope_type} needs factor, or max_position_embeddings to derive it from")
        if self.longrope_policy == "at_init" and self.max_position_embeddings is None:
            raise ValueError("longrope_policy at_init selects the factors by max_position_embeddings, which is unset")
        if self.rope_type == "llama3" and self.high_freq_factor < self.low_freq_factor:
            raise ValueError("high_freq_factor must not be below low_freq_factor (equal: no blended band, "
                             "SCALE-LLAMA3)")
        return self

    def _check_forms(self) -> None:
        """The rotary fraction and the condensing ratio (ROPE-ROTARY-FRACTION, ROPE-CONDENSE)."""
        f = self.partial_rotary_factor
        if f is not None and self.rotary_dim is not None:
            raise ValueError(f"give rotary_dim ({self.rotary_dim}) or partial_rotary_factor ({f!r}), not both")
        if f is not None:
            w, rule = self.rdim, ("2 * int(f * head_dim // 2)" if self.rope_type == "proportional"
                                  else "int(head_dim * f)")
            if w == 0 or w % 2:
                raise ValueError(f"ROPE-ROTARY-FRACTION: partial_rotary_factor {f!r} of head_dim {self.head_dim} "
                                 f"gives the rotary width {rule} = {w}, which is {'zero' if w == 0 else 'odd'}: "
                                 f"the spec rotates an even width (transformers' GPT-NeoX would rotate "
                                 f"{w + 1 if w % 2 else 2} dims, its Phi raises, LitGPT's rotation is no rotation)")
        if self.condense_ratio is not None and self.rope_type != "default":
            raise ValueError(f"ROPE-CONDENSE: condense_ratio applies to rope_type 'default' (got "
                             f"{self.rope_type!r}: express the condensing as its factor)")

    @property
    def rdim(self) -> int:
        """The rotated width: ``rotary_dim``; else the width of ``partial_rotary_factor``
        (:func:`rotary_width`); else ``head_dim``."""
        if self.rotary_dim is not None:
            return self.rotary_dim
        if self.partial_rotary_factor is not None:
            return rotary_width(self.head_dim, self.partial_rotary_factor, self.rope_type == "proportional")
        return self.head_dim

    def with_width(self, head_dim: int | None = None, rotary_dim: int | None = None) -> "RopeParams":
        """A copy with ``head_dim`` (when given) and the rotated width ``rotary_dim`` (None: the whole
        head), the fraction cleared: the one way to change a set's widths (a copy that set only
        ``rotary_dim`` would keep a fraction that sizes the width again)."""
        update = {"rotary_dim": rotary_dim, "partial_rotary_factor": None}
        if head_dim is not None:
            update["head_dim"] = head_dim
        return self.model_copy(update=update)

    @property
    def pair_dim(self) -> int:
        """The width the pairs span: ``head_dim`` for proportional rope, else :attr:`rdim`."""
        return self.head_dim if self.rope_type == "proportional" else self.rdim

    @property
    def sin_sign(self) -> int:
        """``+1`` for ``rotation`` positive, ``-1`` for negative: a rotation by -phi is the
        rotation by +phi with sin negated (ROPE-ROTATION-NEGATIVE)."""
        return -1 if self.rotation == "negative" else 1


MRopeLayout = Literal["contiguous", "interleaved", "hw_alternating"]


def mrope_axes(half: int, mrope_section: tuple[int, ...], layout: str) -> list[int]:
    """Axis (0 temporal, 1 height, 2 width) of each of the ``half`` frequency indices.

    contiguous (Qwen2-VL, MROPE-SECTIONS): index k belongs to the contiguous section of
    ``mrope_section`` containing it; interleaved (Qwen3-VL, MROPE-INTERLEAVED): H if
    ``k % 3 == 1 and k < 3 sec[1]``, W if ``k % 3 == 2 and k < 3 sec[2]``, T otherwise;
    hw_alternating (ERNIE 4.5-VL, MROPE-HW-ALTERNATING): for ``k < sec[1] + sec[2]`` H at even k
    and W at odd k, T for the rest.
    """
    if layout == "contiguous":
        return [a for a, n in enumerate(mrope_section) for _ in range(n)][:half]
    if layout == "hw_alternating":
        hw = mrope_section[1] + mrope_section[2]
        return [(1 if k % 2 == 0 else 2) if k < hw else 0 for k in range(half)]
    out = []
    for k in range(half):
        if k % 3 == 1 and k < 3 * mrope_section[1]:
            out.append(1)
        elif k % 3 == 2 and k < 3 * mrope_section[2]:
            out.append(2)
        else:
            out.append(0)
    return out


#: rope_types M-RoPE accepts (HF 5.24: the Qwen-VL text rotary modules call
#: ``ROPE_INIT_FUNCTIONS[rope_type]``; ``proportional`` pairs over the whole head while the
#: sections split the rotated share, so it has no M-RoPE meaning and is rejected).
MRopeType = Literal["default", "linear", "dynamic", "yarn", "llama3", "longrope"]
#: The RopeParams scaling fields an MRopeParams carries (same names and meaning, HF's keys).
MROPE_SCALING_FIELDS = ("attention_factor", "factor", "original_max_position_embeddings", "max_position_embeddings",
                        "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate", "low_freq_factor",
                        "high_freq_factor", "short_factor", "long_factor")


class MRopeParams(_Strict):
    """Multimodal RoPE of Qwen2-VL / Qwen3-VL / Qwen3.5 text attention (clauses MROPE-*).

    ``position_ids`` are ``[3, B, T]`` (temporal, height, width).  ``rotary_dim`` (default
    ``head_dim``; HF ``partial_rotary_factor * head_dim``) is the rotated share of the head: its
    ``rotary_dim/2`` frequencies are split among the three axes by ``mrope_section``, which must
    sum to ``rotary_dim/2`` (MROPE-PARTIAL; the dims ``>= rotary_dim`` pass through).  ``layout``
    contiguous (Qwen2-VL, Qwen2.5-VL, GLM-4V), interleaved (Qwen3-VL, Qwen3.5, HunYuan-V4-VL,
    Cosmos 3) or hw_alternating (ERNIE 4.5-VL: height and width in turn, then temporal; needs
    ``sec[1] == sec[2]``).  Each axis must receive exactly ``mrope_section[a]`` frequencies under
    the layout (for interleaved: ``3 sec[1] <= rotary_dim/2 + 1`` and ``3 sec[2] <= rotary_dim/2``).
    ``pairing`` half (``rotate_half`` over ``cat(a, a)``: the Qwen models, MROPE-SECTIONS) or
    interleaved (``repeat_interleave(a, 2)`` with a pairwise rotation of dims (2k, 2k + 1): GLM-4V,
    HunYuan-V4-VL, ERNIE 4.5-VL, MROPE-PAIR-INTERLEAVED).

    ``rope_type`` and the scaling fields (``factor``, ``original_max_position_embeddings``, ...,
    ``attention_factor``) have exactly the meaning of :class:`RopeParams` over ``rotary_dim``
    (MROPE-ROPE-TYPE, MROPE-ATTENTION-SCALING); :attr:`rope` is that RopeParams, and the
    frequencies are computed from it.  A scaling field that does not apply to the rope_type is
    an error, named as for RopeParams.
    """

    head_dim: int = Field(gt=0)
    rotary_dim: Optional[int] = Field(None, gt=0, description="rotated share (HF partial_rotary_factor * head_dim); "
                                                              "None means head_dim")
    rope_theta: float = Field(10000.0, gt=0)
    mrope_section: tuple[int, int, int]
    layout: MRopeLayout = "contiguous"
    pairing: Literal["half", "interleaved"] = "half"
    rope_type: MRopeType = "default"
    attention_factor: Optional[float] = Field(None, gt=0)
    factor: Optional[float] = Field(None, gt=0)
    original_max_position_embeddings: Optional[int] = Field(None, gt=0)
    max_position_embeddings: Optional[int] = Field(None, gt=0)
    beta_fast: Optional[float] = Field(None, gt=0)
    beta_slow: Optional[float] = Field(None, gt=0)
    mscale: Optional[float] = Field(None, gt=0)
    mscale_all_dim: Optional[float] = Field(None, gt=0)
    truncate: Optional[bool] = None
    low_freq_factor: Optional[float] = Field(None, gt=0)
    high_freq_factor: Optional[float] = Field(None, gt=0)
    short_factor: Optional[tuple[float, ...]] = None
    long_factor: Optional[tuple[float, ...]] = None

    @model_validator(mode="after")
    def _check(self) -> "MRopeParams":
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even, got {self.head_dim}")
        try:
            rope = self.rope
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in getattr(e, "errors", lambda: [])()) or str(e)
            raise ValueError(f"M-RoPE rope parameters: {msgs}") from None
        if any(s < 0 for s in self.mrope_section):
            raise ValueError(f"mrope_section entries must be >= 0, got {list(self.mrope_section)}")
        half = rope.rdim // 2
        if sum(self.mrope_section) != half:
            what = "rotary_dim/2" if self.rotary_dim is not None else "head_dim/2"
            raise ValueError(f"mrope_section {list(self.mrope_section)} must sum to {what} = {half}")
        if self.layout == "hw_alternating" and self.mrope_section[1] != self.mrope_section[2]:
            raise ValueError(f"layout 'hw_alternating' needs equal height and width sections, got "
                             f"{list(self.mrope_section)}")
        axes = mrope_axes(half, self.mrope_section, self.layout)
        counts = tuple(axes.count(a) for a in range(3))
        if counts != tuple(self.mrope_section):
            raise ValueError(f"layout {self.layout!r} gives the axes {list(counts)} frequencies, not "
                             f"mrope_section {list(self.mrope_section)}")
        return self

    @property
    def rope(self) -> RopeParams:
        """The 1-D :class:`RopeParams` whose frequencies and attention factor M-RoPE uses:
        head_dim, rotary_dim, rope_theta, the pairing, rope_type and the scaling fields."""
        return RopeParams(head_dim=self.head_dim, rotary_dim=self.rotary_dim, rope_theta=self.rope_theta,
                          pairing=self.pairing, rope_type=self.rope_type,
                          **{n: getattr(self, n) for n in MROPE_SCALING_FIELDS})

    @property
    def rdim(self) -> int:
        """The rotated width: ``rotary_dim`` or, when unset, ``head_dim``."""
        return self.rotary_dim if self.rotary_dim is not None else self.head_dim

    @property
    def axes(self) -> list[int]:
        """Axis of each frequency index (0 temporal, 1 height, 2 width), ``rotary_dim/2`` of them."""
        return mrope_axes(self.rdim // 2, self.mrope_section, self.layout)


AxialLayout = Literal["split", "blocks", "interleaved", "alternate"]


def axial_pairs(num_axes: int, axis_dim: int, layout: str, axis_order: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(axis, j)`` of each of the ``num_axes * axis_dim / 2`` rotated pairs, in pair order
    (AXIAL-SPLIT, -BLOCKS, -INTERLEAVED, -ALTERNATE): axis the position coordinate (0 .. num_axes -
    1 of ``position_ids [A, B, T]``), j the index of that axis's frequency.  split, blocks and
    interleaved concatenate the axes' angle vectors in ``axis_order``; alternate takes one
    frequency of each axis in turn (``axis_order[0]`` j = 0, ``axis_order[1]`` j = 0, ...)."""
    n = axis_dim // 2
    if layout == "alternate":
        return [(axis_order[p % num_axes], p // num_axes) for p in range(num_axes * n)]
    return [(axis_order[p // n], p % n) for p in range(num_axes * n)]


class AxialRopeParams(_Strict):
    """Axial (two- or three-dimensional) RoPE of vision encoders (clauses AXIAL-*): transformers'
    ``rope_type: axial`` (Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V vision towers, Pixtral, Gemma 4
    vision, SAM 2 / SAM 3, Inkling 2, Kimi K2.5, Step 3.7, MiniMax-M3).

    ``position_ids`` are integer ``[A, B, T]`` (A = ``num_axes``: height and width, or temporal,
    height and width).  Each axis rotates ``axis_dim`` dims (default ``2 * floor(head_dim / (2 A))``:
    ``head_dim / 2`` for two axes) with ``axis_dim / 2`` frequencies: ``shared`` (AXIAL-FREQUENCIES,
    ``rope_theta ** (-2j / axis_dim)``, the same for every axis) or ``alternating``
    (AXIAL-FREQUENCIES-ALTERNATING, Pixtral: the 1-D vector ``rope_theta ** (-2k / (A axis_dim))``,
    axis a taking every A-th entry from a).  ``layout`` says which dims form a pair and which
    angle each pair takes (AXIAL-SPLIT half pairing over the axes' concatenated angles, AXIAL-BLOCKS
    one half-paired block per axis, AXIAL-INTERLEAVED adjacent pairs, AXIAL-ALTERNATE half pairing
    over the axes' angles taken in turn); ``axis_order`` the order the axes' angles are laid out
    (AXIAL-AXIS-ORDER: ``(0, 1)`` height first, ``(1, 0)`` width first).  Dims ``>= num_axes *
    axis_dim`` pass through (AXIAL-PARTIAL).  No attention factor (transformers' axial rule has
    none).  ``coordinates``: ``index`` multiplies each frequency by the patch index itself;
    ``centred`` (AXIAL-COORDINATES-CENTRED, DINOv3 / EoMT-DINOv3) by ``2 pi c`` with ``c = (2 i +
    1) / grid_size[a] - 1``, the patch centre normalised to (-1, 1): position_ids stay the integer
    patch indices, each in ``[0, grid_size[a])``; ``grid_size`` (patches per axis) is required
    there and refused with ``index``.
    """

    head_dim: int = Field(gt=0)
    rope_theta: float = Field(10000.0, gt=0)
    num_axes: int = Field(2, ge=2, le=3)
    axis_dim: Optional[int] = Field(None, gt=0, description="dims each axis rotates; None means "
                                                            "2 * floor(head_dim / (2 num_axes))")
    frequencies: Literal["shared", "alternating"] = "shared"
    layout: AxialLayout = "split"
    axis_order: Optional[tuple[int, ...]] = Field(None, description="None means (0, 1[, 2])")
    coordinates: Literal["index", "centred"] = Field(
        "index", description="index: angle = position * f; centred: angle = 2 pi c f, c = (2 i + 1) / "
                             "grid_size[a] - 1 (AXIAL-COORDINATES-CENTRED)")
    grid_size: Optional[tuple[int, ...]] = Field(None, description="patches per axis, one per axis; required "
                                                                   "with coordinates centred, refused otherwise")

    @model_validator(mode="after")
    def _check(self) -> "AxialRopeParams":
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even, got {self.head_dim}")
        ad = self.adim
        if ad % 2 or ad < 2:
            raise ValueError(f"axis_dim must be even and >= 2, got {ad}")
        if self.num_axes * ad > self.head_dim:
            raise ValueError(f"num_axes * axis_dim = {self.num_axes * ad} exceeds head_dim {self.head_dim}")
        if sorted(self.order) != list(range(self.num_axes)):
            raise ValueError(f"axis_order {list(self.order)} must be a permutation of 0 .. {self.num_axes - 1}")
        if self.coordinates == "centred":
            if self.grid_size is None:
                raise ValueError("coordinates 'centred' needs grid_size, the patches per axis "
                                 "(AXIAL-COORDINATES-CENTRED: c = (2 i + 1) / grid_size[a] - 1)")
            if len(self.grid_size) != self.num_axes:
                raise ValueError(f"grid_size {list(self.grid_size)} must give one size per axis "
                                 f"(num_axes {self.num_axes})")
            if any(n <= 0 for n in self.grid_size):
                raise ValueError(f"grid_size {list(self.grid_size)}: every axis needs at least one patch (> 0)")
        elif self.grid_size is not None:
            raise ValueError(f"grid_size {list(self.grid_size)} is read only with coordinates 'centred' "
                             f"(AXIAL-COORDINATES-CENTRED); coordinates 'index' takes the positions as they are")
        return self

    @property
    def adim(self) -> int:
        """The dims each axis rotates: ``axis_dim`` or ``2 * floor(head_dim / (2 num_axes))``."""
        return self.axis_dim if self.axis_dim is not None else 2 * (self.head_dim // (2 * self.num_axes))

    @property
    def rdim(self) -> int:
        """The rotated width ``num_axes * axis_dim`` (the rest of the head passes through)."""
        return self.num_axes * self.adim

    @property
    def order(self) -> tuple[int, ...]:
        return tuple(self.axis_order) if self.axis_order is not None else tuple(range(self.num_axes))

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """``(axis, j)`` of each rotated pair, in pair order (:func:`axial_pairs`)."""
        return axial_pairs(self.num_axes, self.adim, self.layout, self.order)


class QueryScaleParams(_Strict):
    """Position-dependent query scaling (clauses QSCALE-*): q is multiplied by ``s(p) = 1 + beta
    ln(1 + floor(p / L))`` (``form`` mistral: Ministral 3 / Mistral 4's ``llama_4_scaling_beta``
    with ``L = original_max_position_embeddings``, QSCALE-MISTRAL) or ``1 + beta ln(1 + floor((p +
    1) / L))`` (``form`` llama4: Llama 4's ``attn_temperature_tuning`` with ``beta = attn_scale``,
    ``L = floor_scale``, on its NoPE layers, QSCALE-LLAMA4).  ``scale_length`` is L, in tokens.
    """

    form: Literal["mistral", "llama4"] = "mistral"
    beta: float = Field(gt=0, le=100.0, strict=True, allow_inf_nan=False)
    scale_length: int = Field(gt=0, le=2 ** 40, strict=True)


LayerType = Literal["full_attention", "sliding_attention"]


class LayerRopeParams(_Strict):
    """RoPE parameter sets per layer type (clauses LAYERS-*): layer i uses the set of
    ``layer_types[i]`` -- ``full_attention``: ``rope_theta = full_rope_theta`` with linear scaling
    by ``full_factor`` (Gemma 3: 1e6, factor 8); ``sliding_attention``: ``sliding_rope_theta``,
    unscaled (Gemma 3: 1e4).  A type whose theta is ``None`` has no RoPE: its layers return q and k
    unchanged (Cohere 2 / Command R7B and EXAONE 4 full-attention layers).  Both sets share
    ``head_dim`` and ``pairing`` (Cohere 2: interleaved).
    """

    head_dim: int = Field(gt=0)
    layer_types: tuple[LayerType, ...] = Field(min_length=1)
    full_rope_theta: Optional[float] = Field(1000000.0, gt=0, description="None: full-attention layers have no RoPE")
    full_factor: float = Field(1.0, ge=1.0, description="linear scaling of the full-attention set; 1 = none")
    sliding_rope_theta: Optional[float] = Field(10000.0, gt=0, description="None: sliding layers have no RoPE")
    pairing: Literal["half", "interleaved"] = "half"

    @model_validator(mode="after")
    def _check(self) -> "LayerRopeParams":
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even, got {self.head_dim}")
        if self.full_rope_theta is None and self.sliding_rope_theta is None:
            raise ValueError("at least one layer type must have RoPE (full_rope_theta or sliding_rope_theta)")
        if self.full_rope_theta is None and self.full_factor != 1.0:
            raise ValueError("full_factor scales the full-attention set, which has no RoPE (full_rope_theta null)")
        return self

    def set_of(self, layer_type: str) -> Optional[RopeParams]:
        """The RoPE parameters of one layer type, or None (no RoPE)."""
        if layer_type == "full_attention":
            if self.full_rope_theta is None:
                return None
            scaled = {"rope_type": "linear", "factor": self.full_factor} if self.full_factor != 1.0 else {}
            return RopeParams(head_dim=self.head_dim, rope_theta=self.full_rope_theta, pairing=self.pairing, **scaled)
        if self.sliding_rope_theta is None:
            return None
        return RopeParams(head_dim=self.head_dim, rope_theta=self.sliding_rope_theta, pairing=self.pairing)

    def layer_type(self, layer_idx: int) -> str:
        """LAYERS-SETS: the type of layer ``layer_idx`` (``ValueError`` unless an int in range)."""
        if not (isinstance(layer_idx, int) and 0 <= layer_idx < len(self.layer_types)):
            raise ValueError(f"LAYERS-SETS: layer_idx {layer_idx!r} is not a layer of {len(self.layer_types)}")
        return self.layer_types[layer_idx]

    def set_for(self, layer_idx: int) -> Optional[RopeParams]:
        """LAYERS-SETS: the parameters of layer ``layer_idx`` (``ValueError`` out of range)."""
        return self.set_of(self.layer_type(layer_idx))


class NopeParams(_Strict):
    """Which layers use no positional encoding (clauses NOPE-*; SmolLM3, Llama 4).

    ``no_rope_layers`` follows HF's (inverted) naming: entry i is 1 when layer i *uses* RoPE and
    0 when it is a NoPE layer; at least ``num_hidden_layers`` entries (the first
    ``num_hidden_layers`` count).  When it is None, every ``no_rope_layer_interval``-th layer
    (indices interval - 1, 2 interval - 1, ...) is NoPE.
    """

    num_hidden_layers: int = Field(gt=0)
    no_rope_layers: Optional[tuple[int, ...]] = None
    no_rope_layer_interval: int = Field(4, gt=0)

    @model_validator(mode="after")
    def _check(self) -> "NopeParams":
        f = self.no_rope_layers
        if f is not None:
            if len(f) < self.num_hidden_layers:
                raise ValueError(f"no_rope_layers has {len(f)} entries, fewer than num_hidden_layers "
                                 f"{self.num_hidden_layers}")
            if set(f) - {0, 1}:
                raise ValueError("no_rope_layers entries must be 0 (NoPE) or 1 (uses RoPE)")
        return self


class SoftmaxScaleParams(_Strict):
    """Attention probabilities with the DeepSeek / HF YaRN softmax scale (SCALE-YARN-SOFTMAX-SCALE).

    ``rope``: the yarn :class:`RopeParams` of the rotary part (``head_dim`` = the rope head dim,
    64 for DeepSeek-V3); ``mscale_all_dim`` is required: HF's ``yarn_apply_mscale`` treats a
    missing key as 0 (no correction) while DeepSeek's reference defaults its ``mscale`` to 1, and
    the spec does not pick one.  ``qk_head_dim``: the full query/key head (nope + rope; 192 for
    DeepSeek-V3), the width q and k have and the one ``qk_head_dim ** -0.5`` is taken of.
    """

    rope: RopeParams
    qk_head_dim: int = Field(gt=0)

    @model_validator(mode="after")
    def _check(self) -> "SoftmaxScaleParams":
        if self.rope.rope_type != "yarn":
            raise ValueError(f"SCALE-YARN-SOFTMAX-SCALE needs rope_type 'yarn', got {self.rope.rope_type!r}")
        if self.rope.mscale_all_dim is None:
            raise ValueError("SCALE-YARN-SOFTMAX-SCALE needs mscale_all_dim (HF reads a missing key as 0, "
                             "DeepSeek's reference as 1: the spec does not pick)")
        if self.qk_head_dim < self.rope.head_dim:
            raise ValueError(f"qk_head_dim {self.qk_head_dim} is smaller than the rope head_dim {self.rope.head_dim}")
        return self


PARAM_MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for m in (
        RopeParams,
        SinusoidalParams,
        GPT2EmbeddingParams,
        BertEmbeddingParams,
        OPTEmbeddingParams,
        RobertaEmbeddingParams,
        BartEmbeddingParams,
        LookupParams,
        AlibiParams,
        T5Params,
        MRopeParams,
        AxialRopeParams,
        QueryScaleParams,
        LayerRopeParams,
        NopeParams,
        SoftmaxScaleParams,
    )
}


def register_params_model(model: type[BaseModel]) -> None:
    """Make a registered family's parameter model known by name (goldens record params by model name)."""
    have = PARAM_MODELS.get(model.__name__)
    if have is not None and have is not model:
        from .errors import SpecError
        raise SpecError(f"a different parameter model named {model.__name__!r} is already registered")
    PARAM_MODELS[model.__name__] = model
