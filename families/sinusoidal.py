"""The sinusoidal family (SIN-*): references and error scales of the sinusoidal.* operations,
the mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.sinusoidal`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, pos
from posenc.reference import position_ids, sinusoidal
from posenc.reference.rounding import round_to_dtype
from posenc.spec.models import SinusoidalParams
from posenc.spec.registry import model_params

from . import add_cases, case_clauses, mutant, no_form, reference
from ._common import exact_scales, run, scalar


@case_clauses("sinusoidal")
def sinusoidal_clauses(p, op: str) -> list[str]:
    """The clauses a sinusoidal case exercises beyond its own: fairseq's rows are tensor2tensor's table;
    the options of spec 0.5.0 where they are not their defaults."""
    out = ["SIN-T2T"] if op == "sinusoidal.fairseq" else []
    if getattr(p, "order", "sin_first") == "cos_first":
        out.append("SIN-ORDER-COS-FIRST")
    if getattr(p, "units", "radians") == "turns":
        out.append("SIN-UNITS-TURNS")
    if getattr(p, "scale", 1.0) != 1.0:
        out.append("SIN-OUTPUT-SCALE")
    return out


def _sin(p, x):
    return {"pe": sinusoidal.table(x["position_ids"], p)}


def _sin_scales(p, x):
    """dtype term: |scale| (the output's rounding); float32 term: |φ_j| (1 + e_j ln base) |scale| (a float32
    angle: the exponent's rounding amplified by ln base, and the product's), one more |φ_j| |scale| in turns
    (2π's rounding and a second product)."""
    phi = np.abs(sinusoidal.column_angles(x["position_ids"], p))
    # e_j = 2i/D or i / (h - 1): a float32 base ** -e_j rounds e_j ln(base) too
    amp = 1.0 + sinusoidal.column_exponents(p) * _ln_base(p)
    if p.units == "turns":
        amp = amp + 1.0
    if p.scale == 1.0:
        return {"pe": (np.ones_like(phi), phi * amp)}
    return {"pe": (np.full_like(phi, p.scale), phi * amp * p.scale)}


def _ln_base(p) -> float:
    """ln base, at least 1 (as RoPE's ln theta': a base below e amplifies the exponent's rounding no less)."""
    return float(np.log(max(p.base, np.e)))


def _fairseq_positions(p, x):
    return {"positions": sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, scalar(x, "cache_length"))}


def _fairseq(p, x):
    return {"pe": sinusoidal.fairseq_embeddings(x["input_ids"], p, scalar(x, "cache_length"))}


def _fairseq_scales(p, x):
    rows = sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, scalar(x, "cache_length"))
    real = (np.asarray(x["input_ids"]) != p.padding_idx)[..., None]  # pad tokens read the zero row: exact
    return {n: (d * real, a * real) for n, (d, a) in _sin_scales(p, {"position_ids": rows}).items()}


reference("sinusoidal.table", scales=_sin_scales)(_sin)
reference("sinusoidal.fairseq_positions", scales=exact_scales([]))(_fairseq_positions)
reference("sinusoidal.fairseq", scales=_fairseq_scales)(_fairseq)


@mutant("sin_layout_swapped", "sinusoidal.table")
def sin_layout_swapped(op, p, x, dtype=None):
    if p.h_minus_1 or p.order == "cos_first":
        return None  # a Vaswani sin-first divergence (the h-1 variants are [sin | cos] only; no table interleaves cos first)
    other = "concat" if p.layout == "interleaved" else "interleaved"
    return run(op, p.model_copy(update={"layout": other}), x)


@mutant("sin_divisor_h_minus_1", "sinusoidal.table")
def sin_divisor_h_minus_1(op, p, x, dtype=None):
    """Vaswani's layout (and order, units, scale) with the h - 1 frequencies ``base^(-i/max(h-1, 1))``."""
    if p.h_minus_1:
        return None  # the reverse is DIV-SIN-T2T-VASWANI-DIVISOR
    D, h = p.dim, p.dim // 2
    w = p.base ** (-np.arange(h, dtype=np.float64) / max(h - 1, 1))
    if p.units == "turns":
        w = 2.0 * np.pi * w
    phi = np.asarray(x["position_ids"], np.float64)[..., None] * w
    s, c = np.sin(phi), np.cos(phi)
    if p.layout == "interleaved":
        pe = np.stack([s, c], -1).reshape(*phi.shape[:-1], 2 * h)
    else:
        pe = np.concatenate([s, c] if p.order == "sin_first" else [c, s], -1)
    if D % 2:
        pe = np.concatenate([pe, np.zeros(pe.shape[:-1] + (1,))], -1)
    return {"pe": pe * p.scale if p.scale != 1.0 else pe}


def _fairseq_rows(p, x):
    return sinusoidal.fairseq_positions(x["input_ids"], p.padding_idx, int(x["cache_length"]))


def _turns(p) -> float:
    """The factor from ``p · w`` to the angle: 2π for ``units='turns'`` (SIN-UNITS-TURNS), else 1."""
    return 2.0 * np.pi if p.units == "turns" else 1.0


@mutant("sin_vaswani_divisor", "sinusoidal.table", "sinusoidal.fairseq")
def sin_vaswani_divisor(op, p, x, dtype=None):
    """The h-1 table (zero column, pad row, order, units, scale) with Vaswani's frequencies base^(-2i/D)."""
    if not p.h_minus_1:
        return None
    sinusoidal.check_width(p)
    rows = np.asarray(x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x))
    h = p.dim // 2
    phi = rows.astype(np.float64)[..., None] * (_turns(p) * p.base ** (-2.0 * np.arange(h) / p.dim))
    phi = np.concatenate([phi, phi, np.zeros(phi.shape[:-1] + (p.dim - 2 * h,))], -1)
    return {"pe": sinusoidal.from_angles(phi, p, rows)}


@mutant("sin_pad_row_kept", "sinusoidal.table", "sinusoidal.fairseq")
def sin_pad_row_kept(op, p, x, dtype=None):
    """fairseq's table without ``emb[padding_idx] = 0``: the pad row is t2t's sinusoid."""
    if p.variant != "fairseq":
        return None
    rows = x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x)
    return {"pe": sinusoidal.table(rows, p.model_copy(update={"variant": "t2t", "padding_idx": None}))}


@mutant("sin_fairseq_padding_ignored", "sinusoidal.fairseq_positions", "sinusoidal.fairseq")
def sin_fairseq_padding_ignored(op, p, x, dtype=None):
    """Sequential rows padding_idx + 1 + cache_length + t (HF's inputs_embeds path)."""
    ids = np.asarray(x["input_ids"])
    rows = position_ids.decode(*ids.shape, int(x["cache_length"])) + p.padding_idx + 1
    if op == "sinusoidal.fairseq_positions":
        return {"positions": rows}
    return {"pe": sinusoidal.table(rows, p)}


def _column_inv_freq(p) -> np.ndarray:
    """float64 ``[D]``: the angular frequency of each output column in the variant's layout and order
    (radians per position: times 2π in turns; 0 for t2t / fairseq's zero column)."""
    phi1 = sinusoidal.column_angles(np.ones((1,), np.int64), p)
    return phi1[0]


def _pe_from_angles(p, phi, position_ids, dtype):
    return round_to_dtype(sinusoidal.from_angles(phi, p, position_ids), dtype)


@mutant("sin_compute_dtype", "sinusoidal.table", "sinusoidal.fairseq")
def sin_compute_dtype(op, p, x, dtype=None):
    """The table computed in the compute dtype (keras-hub SinePositionEncoding): positions, the
    base's inverse ``1 / base``, the exponents ``2 floor(j/2) / D``, the frequencies (times a rounded
    ``2π`` in turns) and the angles each rounded to bfloat16 / float16 before sin / cos (position 511
    becomes 512 in bfloat16); for ``sinusoidal.fairseq`` the table rows of its positions."""
    if dtype not in ("bfloat16", "float16"):
        return None
    sinusoidal.check_width(p)
    r = lambda v: round_to_dtype(v, dtype)  # noqa: E731
    D = p.dim
    rows = x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x)
    pos = r(np.asarray(rows, np.float64))
    if p.h_minus_1:
        h = D // 2
        e = r(r(np.arange(h, dtype=np.float64)) / r(max(h - 1, 1)))
        w = r(np.exp(-e * r(np.log(p.base))))
        inv = np.concatenate([w, w, np.zeros(D - 2 * h)])
    else:
        k = np.rint(D * sinusoidal.column_exponents(p))  # 2 floor(j/2), or 2i within each block: integers
        inv = r(np.power(r(1.0 / p.base), r(r(k) / r(D))))
    if p.units == "turns":
        inv = r(inv * r(2.0 * np.pi))
    with np.errstate(over="ignore", invalid="ignore"):
        phi = r(pos[..., None] * inv)
    return {"pe": _pe_from_angles(p, phi, rows, dtype)}


@mutant("sin_positions_in_dtype", "sinusoidal.table", "sinusoidal.fairseq")
def sin_positions_in_dtype(op, p, x, dtype=None):
    """Only the positions cast to the activation dtype before the angles (frequencies, angles and
    sin / cos in float32 or better): bfloat16 loses integers above 256, float16 above 2048, and
    float16 positions above 65504 are inf (sin and cos of inf: NaN); for ``sinusoidal.fairseq``
    its table rows."""
    if dtype not in ("bfloat16", "float16"):
        return None
    sinusoidal.check_width(p)
    rows = x["position_ids"] if op == "sinusoidal.table" else _fairseq_rows(p, x)
    pos = round_to_dtype(np.asarray(rows, np.float64), dtype)
    with np.errstate(invalid="ignore"):
        phi = pos[..., None] * _column_inv_freq(p)
    return {"pe": _pe_from_angles(p, phi, rows, "float64")}


@mutant("sin_fairseq_cache_ignored", "sinusoidal.fairseq_positions", "sinusoidal.fairseq")
def sin_fairseq_cache_ignored(op, p, x, dtype=None):
    """fairseq / M2M100 rows without cache_length: after a cache the new tokens restart at padding_idx + 1."""
    if int(x["cache_length"]) == 0:
        return None
    return run(op, p, {**x, "cache_length": np.asarray(0)})


@mutant("sin_scale_dropped", "sinusoidal.table", "sinusoidal.fairseq")
def sin_scale_dropped(op, p, x, dtype=None):
    """The plain table where ``scale`` multiplies it (SIN-OUTPUT-SCALE): a port of a scaled sinusoid that
    drops the scalar; None at scale 1."""
    if p.scale == 1.0:
        return None
    return run(op, p.model_copy(update={"scale": 1.0}), x)


@mutant("sin_cos_first_ignored", "sinusoidal.table", "sinusoidal.fairseq")
def sin_cos_first_ignored(op, p, x, dtype=None):
    """``[sin | cos]`` served where ``order`` cos_first specifies ``[cos | sin]`` (SIN-ORDER-COS-FIRST);
    None for a sin-first table."""
    if p.order != "cos_first":
        return None
    return run(op, p.model_copy(update={"order": "sin_first"}), x)


@mutant("sin_turns_dropped", "sinusoidal.table", "sinusoidal.fairseq")
def sin_turns_dropped(op, p, x, dtype=None):
    """Angles ``p · w`` radians where ``units`` turns specifies ``2π p w`` (SIN-UNITS-TURNS: the 2π
    omitted); None for radians."""
    if p.units != "turns":
        return None
    return run(op, p.model_copy(update={"units": "radians"}), x)


no_form("sinusoidal.fairseq", "fairseq's table is an h - 1 table already: the mutant reads Vaswani's table with h - 1",
        "sin_divisor_h_minus_1")
no_form("sinusoidal.fairseq", "fairseq's layout is fixed ([sin | cos]): the swap is a Vaswani table's bug", "sin_layout_swapped")


# ---- golden cases ----------------------------------------------------------------------------
# ---- sinusoidal ---------------------------------------------------------------------------
for layout, cl in (("interleaved", "SIN-VASWANI-INTERLEAVED"), ("concat", "SIN-VASWANI-CONCAT")):
    for D in (8, 7):
        add_cases(Case(f"sin-{layout}-d{D}", "sinusoidal.table", (cl,), SinusoidalParams(dim=D, layout=layout),
                  {"position_ids": pos(range(5), range(100, 105))},
                  "odd D" if D % 2 else "D 8: last frequency 1e-3"))
    add_cases(Case(f"sin-{layout}-d512", "sinusoidal.table", (cl, "SIN-PRECISION"),
              SinusoidalParams(dim=512, layout=layout),
              {"position_ids": pos([0, 1, 2, 511], [1000, 2047, 7, 3])}, "Marian-size width 512"))

# ---- sinusoid variants: the h-1 divisor (SIN-T2T, SIN-FAIRSEQ-POSITIONS, SIN-WHISPER) ---------
# M2M100-418M: d_model 1024, pad_token_id 1 (facebook/m2m100_418M config.json); Whisper-tiny:
# d_model 384 over the encoder's 1500 frames (openai/whisper-tiny config.json).
_S = SinusoidalParams
_T2T = dict(layout="concat", variant="t2t")
_FS = dict(layout="concat", variant="fairseq", padding_idx=1)
_WH = dict(layout="concat", variant="whisper")
_RB_IDS = pos([1, 1, 0, 9, 2], [0, 9, 9, 9, 2])  # encodings-facts B.3: pad 1 -> [[1,1,2,3,4],[2,3,4,5,6]]
for D, note in ((8, "D 8: lowest frequency 1e-4 (Vaswani 1e-3)"), (7, "odd D: zero column appended"),
                (2, "h = 1: tensor2tensor clamps the divisor to 1, w = [1]"),
                (1, "h = 0: no frequency, one zero column (found by the generated cases: a port returned no column)")):
    add_cases(Case(f"sin-t2t-d{D}", "sinusoidal.table", ("SIN-T2T",), _S(dim=D, **_T2T),
              {"position_ids": pos(range(5), range(100, 105))}, note))
add_cases(
    Case("sin-t2t-d512", "sinusoidal.table", ("SIN-T2T", "SIN-PRECISION"), _S(dim=512, **_T2T),
         {"position_ids": pos([0, 1, 2, 511], [1000, 2047, 7, 3])}, "width 512, frequencies 1 .. 1e-4"),
    Case("sin-fairseq-table-d8", "sinusoidal.table", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=8, **_FS),
         {"position_ids": pos([0, 1, 2, 3, 4], [1, 5, 100, 1, 2])}, "row padding_idx 1 is zero"),
    Case("sin-fairseq-table-d7", "sinusoidal.table", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=7, **_FS),
         {"position_ids": pos([1, 2, 3], [40, 1, 41])}, "odd D: zero column; pad row zero"),
    Case("sin-m2m100-positions", "sinusoidal.fairseq_positions", ("SIN-FAIRSEQ-POSITIONS",), model_params("m2m100-418m"),
         {"input_ids": _RB_IDS, "cache_length": 0}, "pad 1: [[1,1,2,3,4],[2,3,4,5,6]]"),
    Case("sin-m2m100-positions-cache", "sinusoidal.fairseq_positions", ("SIN-FAIRSEQ-POSITIONS",),
         model_params("m2m100-418m"), {"input_ids": pos([1, 7], [5, 1]), "cache_length": 6},
         "after 6 cached slots: [[1, 8], [8, 1]]"),
    Case("sin-m2m100-418m", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS", "SIN-T2T"), model_params("m2m100-418m"),
         {"input_ids": pos([1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1]), "cache_length": 0},
         "M2M100-418M width 1024: left and right padding read the zero row 1"),
    Case("sin-m2m100-cache", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=16, **_FS),
         {"input_ids": pos([1, 4, 4], [7, 8, 1]), "cache_length": 200}, "rows [[1, 202, 203], [202, 203, 1]]"),
    Case("sin-fairseq-d7", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=7, **_FS),
         {"input_ids": _RB_IDS, "cache_length": 0}, "odd D end to end"),
    Case("sin-whisper-d8", "sinusoidal.table", ("SIN-WHISPER",), _S(dim=8, **_WH),
         {"position_ids": pos(range(5), range(100, 105))}),
    Case("sin-whisper-tiny", "sinusoidal.table", ("SIN-WHISPER", "SIN-PRECISION"), model_params("whisper-tiny"),
         {"position_ids": pos([0, 1, 2, 1499], [750, 1498, 3, 10])}, "Whisper-tiny encoder: 1500 x 384"),
)

# ---- long positions, other bases and padding indices ----------------------------------------
# float16 holds every integer up to 2048 and overflows above 65504; bfloat16 every integer up to
# 256 (DIV-SIN-POSITIONS-IN-DTYPE, DIV-SIN-COMPUTE-DTYPE).
add_cases(
    Case("sin-interleaved-d64-long", "sinusoidal.table", ("SIN-VASWANI-INTERLEAVED", "SIN-PRECISION"),
         SinusoidalParams(dim=64), {"position_ids": pos([257, 2049, 4097, 65519], [65520, 70001, 100003, 131071])},
         "positions past bfloat16's 256, float16's 2048 and float16's 65504"),
    Case("sin-interleaved-d16-base100", "sinusoidal.table", ("SIN-VASWANI-INTERLEAVED",),
         SinusoidalParams(dim=16, base=100.0), {"position_ids": pos(range(6), [9, 40, 77, 3, 150, 1])},
         "base 100: lowest frequency 100^(-14/16)"),
    Case("sin-concat-d10-base1e6", "sinusoidal.table", ("SIN-VASWANI-CONCAT",),
         SinusoidalParams(dim=10, layout="concat", base=1.0e6), {"position_ids": pos([0, 1, 2, 3], [500, 60, 7, 1000])},
         "base 1e6"),
    Case("sin-t2t-d12-base500", "sinusoidal.table", ("SIN-T2T",), _S(dim=12, base=500.0, **_T2T),
         {"position_ids": pos([0, 1, 2, 3], [30, 60, 90, 99])}, "t2t with max_timescale 500: w = 500^(-i/5)"),
    Case("sin-fairseq-pad0", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",),
         _S(dim=8, layout="concat", variant="fairseq", padding_idx=0),
         {"input_ids": pos([0, 0, 5, 6, 7], [5, 6, 7, 8, 0]), "cache_length": 3},
         "padding_idx 0: rows [[0, 0, 4, 5, 6], [4, 5, 6, 7, 0]]"),
)

# ---- options of spec 0.5.0: order (SIN-ORDER-COS-FIRST), units (SIN-UNITS-TURNS), scale (SIN-OUTPUT-SCALE) ----
# Hand-checkable: D = 4 Vaswani cos first at p = 1 is [cos 1, cos 0.01, sin 1, sin 0.01]; D = 4 interleaved
# in turns has w = 2π [1, 1, 0.01, 0.01]: positions 25, 50, 75 are a quarter, a half and three quarters of a
# turn in columns 2 and 3.  Real sizes: MusicGen's decoder (MusicgenDecoderConfig: hidden_size 1024,
# max_position_embeddings 2048; a t2t table, cos first), x-transformers' ScaledSinusoidalEmbedding at D 512
# (scale 512^-0.5), cramming's ScaledSinosoidal at BERT-base's 768 (scale 768^-0.5).
_COS = dict(order="cos_first")
_P5 = pos(range(5), range(100, 105))
add_cases(
    Case("sin-concat-cos-first-d4", "sinusoidal.table", ("SIN-VASWANI-CONCAT",), _S(dim=4, layout="concat", **_COS),
         {"position_ids": pos([0, 1, 2, 3], [10, 100, 1000, 7])}, "p = 1: [cos 1, cos 0.01, sin 1, sin 0.01]"),
    Case("sin-concat-cos-first-d7", "sinusoidal.table", ("SIN-VASWANI-CONCAT",), _S(dim=7, layout="concat", **_COS),
         {"position_ids": _P5}, "odd D: 3 cos columns, then 4 sin columns (the extra sin column last)"),
    Case("sin-t2t-cos-first-d8", "sinusoidal.table", ("SIN-T2T",), _S(dim=8, **_T2T, **_COS),
         {"position_ids": _P5}, "MusicGen's rule at D 8: [cos(p w) | sin(p w)], w = 10000^(-i/3)"),
    Case("sin-t2t-cos-first-d7", "sinusoidal.table", ("SIN-T2T",), _S(dim=7, **_T2T, **_COS),
         {"position_ids": _P5}, "odd D: [cos | sin | 0], the zero column last"),
    Case("sin-musicgen-d1024", "sinusoidal.table", ("SIN-T2T", "SIN-PRECISION"), _S(dim=1024, **_T2T, **_COS),
         {"position_ids": pos([1, 1000, 2047])}, "MusicGen decoder width 1024, rows up to 2047"),
    Case("sin-whisper-cos-first-d8", "sinusoidal.table", ("SIN-WHISPER",), _S(dim=8, base=500.0, **_WH, **_COS),
         {"position_ids": _P5}, "audiocraft / moshi create_sin_embedding: even D, cos first, max_period 500"),
    Case("sin-interleaved-turns-d4", "sinusoidal.table", ("SIN-VASWANI-INTERLEAVED",),
         _S(dim=4, units="turns"), {"position_ids": pos([0, 1, 2, 3], [25, 50, 75, 10])},
         "angle 2π p w: p = 25, 50, 75 are 1/4, 1/2, 3/4 of a turn at w = 0.01"),
    Case("sin-t2t-turns-d8", "sinusoidal.table", ("SIN-T2T",), _S(dim=8, units="turns", **_T2T), {"position_ids": _P5},
         "turns with the h-1 frequencies"),
    Case("sin-concat-turns-d512", "sinusoidal.table", ("SIN-VASWANI-CONCAT", "SIN-PRECISION"),
         _S(dim=512, layout="concat", units="turns"), {"position_ids": pos([1, 7, 2047])},
         "width 512 in turns"),
    Case("sin-interleaved-scale-2-d4", "sinusoidal.table", ("SIN-VASWANI-INTERLEAVED",), _S(dim=4, scale=2.0),
         {"position_ids": pos([0, 1, 2, 3], [10, 100, 1000, 7])}, "scale 2: p = 1 is [2 sin 1, 2 cos 1, 2 sin 0.01, 2 cos 0.01]"),
    Case("sin-concat-scaled-d512", "sinusoidal.table", ("SIN-VASWANI-CONCAT", "SIN-PRECISION"),
         _S(dim=512, layout="concat", scale=512 ** -0.5), {"position_ids": pos([1, 511, 2047])},
         "x-transformers ScaledSinusoidalEmbedding(512) at its initial scale 512^-0.5"),
    Case("sin-interleaved-scaled-d768", "sinusoidal.table", ("SIN-VASWANI-INTERLEAVED", "SIN-PRECISION"),
         _S(dim=768, scale=768 ** -0.5), {"position_ids": pos([1, 127, 511])},
         "cramming ScaledSinosoidal at BERT-base width 768, initial scale 1/sqrt(768)"),
    Case("sin-fairseq-scaled", "sinusoidal.fairseq", ("SIN-FAIRSEQ-POSITIONS",), _S(dim=8, scale=0.25, **_FS),
         {"input_ids": pos([1, 1, 0, 9, 2], [0, 9, 9, 9, 1]), "cache_length": 3},
         "scale 0.25: the pad rows stay zero, the others are a quarter of the t2t table"),
    Case("sin-fairseq-table-options-d7", "sinusoidal.table", ("SIN-FAIRSEQ-POSITIONS", "SIN-PRECISION"),
         _S(dim=7, order="cos_first", units="turns", scale=3.0, **_FS), {"position_ids": pos([1, 2, 3], [40, 1, 41])},
         "every option at once, odd D: [cos | sin | 0] in turns, times 3; row 1 zero"),
)
