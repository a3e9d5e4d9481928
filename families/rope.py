"""The RoPE family (ROPE-*): the references and error scales of the rope.* operations, the
mutants of its divergences and its golden cases.  The math is :mod:`posenc.reference.rope`; the
scaled frequency rules (SCALE-*) are :mod:`posenc.reference.rope_scaling`, reached through
``rope.inv_freq`` by ``rope_type``."""

from __future__ import annotations

from typing import Callable

import numpy as np

from posenc.families import Case, Gen, arange_x, pos
from posenc.reference import position_ids, rope, rope_scaling
from posenc.reference.rounding import bf16_round, round_to_dtype
from posenc.spec.models import RopeParams
from posenc.spec.registry import model_params
from posenc.spec.shapes import call_suffixes

from . import add_cases, mutant, reference, rope_clauses  # noqa: F401 - rope_clauses registers the rope.* clause rule
from ._common import Outputs, run


def freq_provider(p) -> Callable:
    """``seq_len -> (inv_freq, attention_factor)`` for one prepared operation.

    Stateless (per call) except for ``dynamic`` with ``dynamic_policy='grow_until_reset'``,
    whose provider keeps transformers' state across calls (SCALE-DYNAMIC-GROW).
    """
    if p.rope_type == "dynamic" and p.dynamic_policy == "grow_until_reset":
        state = rope_scaling.DynamicGrowState(p)
        af = 1.0 if p.attention_factor is None else p.attention_factor
        return lambda seq_len: (state.inv_freq(seq_len), af)
    return lambda seq_len: rope.inv_freq(p, seq_len)


def call_keys(x, prefix: str = "position_ids.") -> list[str]:
    """Input names of a call sequence, in call order: ``position_ids.0``, ``position_ids.1``, ..."""
    return [prefix + k for k in call_suffixes(x, prefix.rstrip("."))]


def _per_call(fn, p, x, freq, **kw) -> dict:
    """``rope.cos_sin_calls``: ``fn('rope.cos_sin', ...)`` for each call in order, one ``freq``
    (so a stateful provider sees the sequence), keyed ``cos.<k>`` / ``sin.<k>``."""
    out = {}
    for key in call_keys(x):
        k = key.rsplit(".", 1)[1]
        r = fn("rope.cos_sin", p, {"position_ids": x[key]}, freq, **kw)
        out[f"cos.{k}"], out[f"sin.{k}"] = r["cos"], r["sin"]
    return out


def rope_outputs(op, p, x, freq, positions: Callable | None = None) -> Outputs:
    """Outputs of a RoPE operation given a frequency provider (the reference's or a mutant's) and
    ``positions``, ``(position_ids, p) -> float64 positions`` the angles multiply (the reference's
    :func:`posenc.reference.rope.angle_positions`, or a mutant's)."""
    if op == "rope.inv_freq":
        w, a = freq(None)
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_outputs, p, x, freq, positions=positions)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = (positions or rope.angle_positions)(pid, p)[..., None] * w
    c, s = a * np.cos(phi), a * np.sin(phi)
    if op == "rope.cos_sin":
        return {"cos": c, "sin": s}
    return {n: rope.apply_with_cos_sin(x[n], c, s, p.pair_dim, p.pairing, p.rotation) for n in ("q", "k")}


def rope_scales(op, p, x, freq) -> dict:
    if op == "rope.inv_freq":
        w, a = freq(None)
        # A float32 implementation rounds the exponent 2i/r too: amplified by e_i ln(theta), e_i = 2i/r.
        amp = exponent_amplification(w, p.rope_theta, p.pair_dim, p.rope_type == "dynamic") + _blend(p)
        return {"inv_freq": (np.abs(w) * amp, 0 * w),
                "attention_factor": (np.float64(a), np.float64(0))}
    if op == "rope.cos_sin_calls":
        return _per_call(rope_scales, p, x, freq)
    pid = np.asarray(x["position_ids"])
    w, a = freq(rope.seq_len_of(pid))
    phi = np.abs(rope.angle_positions(pid, p)[..., None] * w) * (exponent_amplification(
        w, p.rope_theta, p.pair_dim, p.rope_type == "dynamic") + _blend(p))
    if op == "rope.cos_sin":
        sc = (np.full_like(phi, a), a * phi)
        return {"cos": sc, "sin": sc}
    return {n: _pair_scales(x[n], a, phi[:, None], p.pair_dim, p.pairing) for n in ("q", "k")}


def _blend(p):  # SCALE-LLAMA3's float32 blend: its rounding near the band's low edge (spec 0.5.0)
    return rope_scaling.llama3_blend_amplification(p)


def exponent_amplification(w, theta: float, dim: int, base_from_frequencies: bool = False) -> np.ndarray:
    """``1 + e_i ln(theta)`` with ``e_i = 2i/dim``: a float32 ``theta ** -e_i`` also rounds its
    exponent, a relative error that ln(theta) amplifies (largest for the lowest frequencies).
    ``theta`` is the base the implementation raises to a power: the configured one, except for
    dynamic NTK (``base_from_frequencies``), whose theta' is recovered from ``w``.  A factor that
    divides the powers afterwards (linear, proportional, LongRoPE, YaRN, llama3) adds one rounding, not an
    amplified one (spec 0.5.0; llama3's blend more: :func:`_blend`)."""
    n = np.shape(w)[-1]
    if base_from_frequencies and n > 1 and w[1] > 0:
        theta = max(theta, float(w[1]) ** (-dim / 2))  # theta' of dynamic NTK
    return 1.0 + (2.0 * np.arange(n) / dim) * np.log(max(theta, np.e))


def _pair_scales(x, cos_mag, phi_abs, rotary_dim, pairing):
    """Per-element (dtype, angle) scales for a rotation of ``x [B, H, T, D]``; tail dims 0."""
    x = np.asarray(x, np.float64)
    a, b = rope.pair_indices(rotary_dim, pairing)
    norm = np.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
    ds, an = np.zeros_like(x), np.zeros_like(x)
    for idx in rope.output_indices(rotary_dim, pairing):
        ds[..., idx] = norm * cos_mag
        an[..., idx] = norm * cos_mag * phi_abs
    return ds, an


def _rope_apply_cs(p, x):
    r = p.pair_dim
    return {n: rope.apply_with_cos_sin(x[n], x["cos"], x["sin"], r, p.pairing, p.rotation) for n in ("q", "k")}


def _rope_apply_cs_scales(p, x):
    mag = np.sqrt(np.asarray(x["cos"]) ** 2 + np.asarray(x["sin"]) ** 2)[:, None]
    return {n: _pair_scales(x[n], mag, 0.0, p.pair_dim, p.pairing) for n in ("q", "k")}


# ---- registration: the reference of every rope.* operation ---------------------------------


def _reference(op):
    def fn(p, x, freq=None, positions=None):
        return rope_outputs(op, p, x, freq or freq_provider(p), positions)

    def sc(p, x):
        return rope_scales(op, p, x, freq_provider(p))
    fn.__name__ = fn.__qualname__ = f"rope_outputs[{op}]"
    return reference(op, scales=sc, state=freq_provider)(fn)


for _op in ("rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply"):
    _reference(_op)
reference("rope.apply_with_cos_sin", scales=_rope_apply_cs_scales)(_rope_apply_cs)


# ---- mutants (DIV-ROPE-*) ----------------------------------------------------------------------

def _rope_outputs(op, p, x, cos, sin, rotary_dim=None, pairing=None):
    r = rotary_dim or p.pair_dim
    pr = pairing or p.pairing
    if op == "rope.cos_sin":
        return {"cos": cos, "sin": sin}
    return {n: rope.apply_with_cos_sin(x[n], cos, sin, r, pr, p.rotation) for n in ("q", "k")}


@mutant("rope_pairing_swapped", "rope.apply", "rope.apply_with_cos_sin")
def rope_pairing_swapped(op, p, x, dtype=None):
    other = "interleaved" if p.pairing == "half" else "half"
    q = p.model_copy(update={"pairing": other})
    return run(op, q, x)


@mutant("rope_deinterleave_layout_kept", "rope.apply", "rope.apply_with_cos_sin")
def rope_deinterleave_layout_kept(op, p, x, dtype=None):
    if p.pairing != "deinterleave":
        return None
    return run(op, p.model_copy(update={"pairing": "interleaved"}), x)


def _bf16_rope(op, p, x, round_angle: bool):
    r = bf16_round if round_angle else _ident
    return _angles_form(op, p, x, bf16_round, r, r)


@mutant("rope_bf16_angles", "rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")
def rope_bf16_angles(op, p, x, dtype=None):
    return _bf16_rope(op, p, x, round_angle=True)


@mutant("rope_bf16_inv_freq", "rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")
def rope_bf16_inv_freq(op, p, x, dtype=None):
    return _bf16_rope(op, p, x, round_angle=False)


@mutant("rope_bf16_positions", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_bf16_positions(op, p, x, dtype=None):
    """Positions built in bfloat16 (e.g. ``arange(T, dtype=t.dtype) + offset``); angles and
    cos/sin then exact: every position p >= 256 becomes a multiple of its bf16 spacing.  Linear
    scaling applied as position interpolation (positions / factor, rotary-embedding-torch's
    ``interpolate_factor``) holds the interpolated positions in bfloat16 too."""
    return _angles_form(op, p, x, pos_round=bf16_round, interpolate=True)


def _offset_rounded(rnd):
    """Positions built as ``arange(T)`` in a half-precision dtype plus each row's offset (its first
    position), the offset rounded to that dtype before the add and the sum rounded again: what
    torch computes for ``arange(T, dtype=bf16) + offset`` with a Python int offset (the scalar
    takes the tensor's dtype)."""
    def f(pid):
        off = pid[..., :1]
        return rnd(rnd(pid - off) + rnd(off))
    return f


@mutant("rope_position_offset_rounded", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_position_offset_rounded(op, p, x, dtype=None):
    """DIV-ROPE-POSITION-OFFSET-ROUNDED: at bfloat16 / float16 activations, the positions built as
    ``arange(T)`` in the activation dtype plus the sequence offset, the offset rounded to the dtype
    first (bfloat16: 257 + 0, 1, 2 -> 256, 256, 258), position interpolation in that dtype too."""
    rnd = {"bfloat16": bf16_round, "float16": _f16_round}.get(dtype)
    if rnd is None:
        return None
    return _angles_form(op, p, x, pos_round=_offset_rounded(rnd), interpolate=True)


@mutant("rope_tail_rotated", "rope.apply")
def rope_tail_rotated(op, p, x, dtype=None):
    full = p.with_width()
    return run(op, full, x)


@mutant("rope_exponent_head_dim", "rope.apply", "rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls")
def rope_exponent_head_dim(op, p, x, dtype=None):
    """The exponent's divisor head_dim where rotary_dim is specified: theta^(-2i/head_dim)."""
    if p.rope_type != "default":
        return None
    w = p.rope_theta ** (-np.arange(0, p.rdim, 2, dtype=np.float64) / p.head_dim)
    a = rope.inv_freq(p)[1]
    return _angles_form(op, p, x, freq=lambda seq_len: (w, a))


def _with_positions(op, p, x, fn) -> Outputs:
    """The reference with each call's ``position_ids`` replaced by ``fn(position_ids)``
    (every call of a ``rope.cos_sin_calls`` sequence)."""
    keys = call_keys(x) if op == "rope.cos_sin_calls" else ["position_ids"]
    return run(op, p, {**x, **{k: fn(np.asarray(x[k])) for k in keys}})


@mutant("rope_arange_positions", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_arange_positions(op, p, x, dtype=None):
    """Each row's positions replaced by 0 .. T-1 (restart at 0 after a cache, padding ignored)."""
    return _with_positions(op, p, x, lambda pid: position_ids.prefill(*pid.shape))


@mutant("rope_factor_ignored", "rope.apply", "rope.cos_sin", "rope.inv_freq", "rope.cos_sin_calls")
def rope_factor_ignored(op, p, x, dtype=None):
    return run(op, p.model_copy(update={"attention_factor": 1.0}), x)


# ---- positions (ROPE-ANGLE) ---------------------------------------------------------------------


@mutant("rope_decode_off_by_one", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_decode_off_by_one(op, p, x, dtype=None):
    """Every single-token call (T == 1: a decode step after a cache) uses position + 1;
    calls of several tokens (the prefill) are right."""
    return _with_positions(op, p, x, lambda pid: pid + 1 if pid.shape[-1] == 1 else pid)


@mutant("rope_positions_off_by_one", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_positions_off_by_one(op, p, x, dtype=None):
    """Every token at position + 1 (1-based positions)."""
    return _with_positions(op, p, x, lambda pid: pid + 1)


@mutant("rope_row0_positions", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls")
def rope_row0_positions(op, p, x, dtype=None):
    """One position vector for the whole batch: row 0's positions used for every row."""
    return _with_positions(op, p, x, lambda pid: np.broadcast_to(pid[:1], pid.shape).copy())


@mutant("rope_decode_batch_row0_only", "rope.apply")
def rope_decode_batch_row0_only(op, p, x, dtype=None):
    """A single-token call (T == 1) on a batch of several rows writes row 0 only; the other rows'
    outputs are left as zeros (mx.fast.rope before ml-explore/mlx#3498)."""
    pid = np.asarray(x["position_ids"])
    if pid.shape[-1] != 1 or pid.shape[0] < 2:
        return None
    out = run(op, p, x)
    for n in ("q", "k"):
        out[n] = out[n].copy()
        out[n][1:] = 0.0
    return out


# ---- which tensors rotate, and which way -------------------------------------------------------


def _one_unrotated(op, p, x, name: str) -> Outputs:
    out = run(op, p, x)
    return {**out, name: np.asarray(x[name], np.float64).copy()}


@mutant("rope_k_not_rotated", "rope.apply", "rope.apply_with_cos_sin")
def rope_k_not_rotated(op, p, x, dtype=None):
    """q rotated, k returned unchanged."""
    return _one_unrotated(op, p, x, "k")


@mutant("rope_q_not_rotated", "rope.apply", "rope.apply_with_cos_sin")
def rope_q_not_rotated(op, p, x, dtype=None):
    """k rotated, q returned unchanged."""
    return _one_unrotated(op, p, x, "q")


def _sin_replaced(op, p, x, fn) -> Outputs:
    """The reference with sin replaced by ``fn(sin)`` wherever sin is formed or given."""
    if op == "rope.apply_with_cos_sin":
        return run(op, p, {**x, "sin": fn(np.asarray(x["sin"], np.float64))})
    if op == "rope.apply":
        cs = run("rope.cos_sin", p, {"position_ids": x["position_ids"]})
        return _rope_outputs(op, p, x, cs["cos"], fn(cs["sin"]))
    return {k: fn(v) if k.split(".")[0] == "sin" else v for k, v in run(op, p, x).items()}


@mutant("rope_sin_sign_flipped", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply_with_cos_sin")
def rope_sin_sign_flipped(op, p, x, dtype=None):
    """The transposed rotation: every pair turned the other way than specified (sin negated: -phi
    where +phi is specified, +phi where ROPE-ROTATION-NEGATIVE specifies -phi)."""
    return _sin_replaced(op, p, x, lambda s: -s)


@mutant("rope_sin_dropped", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply_with_cos_sin")
def rope_sin_dropped(op, p, x, dtype=None):
    """sin read as 0 (y = x cos on the rotated dims): the rotation collapses to a scaling."""
    return _sin_replaced(op, p, x, np.zeros_like)


# ---- frequencies and partial rotary --------------------------------------------------------------


@mutant("rope_theta_default", "rope.apply", "rope.cos_sin", "rope.cos_sin_calls", "rope.inv_freq")
def rope_theta_default(op, p, x, dtype=None):
    """The configured rope_theta not passed on: the library default 10000 used instead."""
    if p.rope_type != "default" or p.rope_theta == 10000.0:
        return None
    return run(op, p.model_copy(update={"rope_theta": 10000.0}), x)


@mutant("rope_partial_split_head_dim", "rope.apply")
def rope_partial_split_head_dim(op, p, x, dtype=None):
    """Partial half-pair rotary laid out over the whole head: the first rotary_dim/2 pairs are
    (i, i + head_dim/2) with frequencies theta^(-2i/head_dim) (pie-project/pie#603) instead of
    (i, i + rotary_dim/2) with theta^(-2i/rotary_dim)."""
    if p.rope_type != "default" or p.pairing != "half" or p.rdim >= p.head_dim:
        return None
    h, n = p.head_dim // 2, p.rdim // 2
    w = p.rope_theta ** (-np.arange(0, p.rdim, 2, dtype=np.float64) / p.head_dim)
    af = rope.inv_freq(p)[1]
    phi = np.asarray(x["position_ids"], np.float64)[..., None] * w
    c, s = (af * np.cos(phi))[:, None], (p.sin_sign * af * np.sin(phi))[:, None]
    i = np.arange(n)
    out = {}
    for name in ("q", "k"):
        v = np.asarray(x[name], np.float64)
        y = v.copy()
        y[..., i] = v[..., i] * c - v[..., i + h] * s
        y[..., i + h] = v[..., i + h] * c + v[..., i] * s
        out[name] = y
    return out


# ---- precision (ROPE-PRECISION) -------------------------------------------------------------------


def _f16_round(a) -> np.ndarray:
    """Round to float16 (values above 65504 become inf), back in float64."""
    return round_to_dtype(a, "float16")


def _ident(a):
    return a


def _angles_form(op, p, x, w_round=_ident, pos_round=_ident, phi_round=_ident, interpolate=False,
                 freq=None) -> Outputs:
    """The rope outputs with inv_freq, the positions and the angle rounded by the given functions
    (cos/sin and the rotation then exact); may hold inf/NaN where a rounding overflows.
    ``interpolate``: linear scaling applied as position interpolation (positions / factor, rounded
    again, rotary-embedding-torch's ``interpolate_factor``); condensed positions (ROPE-CONDENSE) are
    divided the same way, always.  One frequency provider for a whole
    ``rope.cos_sin_calls`` sequence, as the reference (SCALE-DYNAMIC-GROW keeps its state)."""
    freq = freq or freq_provider(p)
    if op == "rope.cos_sin_calls":
        out = {}
        for key in call_keys(x):
            k = key.rsplit(".", 1)[1]
            r = _angles_form("rope.cos_sin", p, {"position_ids": x[key]}, w_round, pos_round, phi_round,
                             interpolate, freq)
            out[f"cos.{k}"], out[f"sin.{k}"] = r["cos"], r["sin"]
        return out
    seq_len = rope.seq_len_of(x["position_ids"]) if "position_ids" in x else None
    w, a = freq(seq_len)
    w = w_round(w)
    if op == "rope.inv_freq":
        return {"inv_freq": w, "attention_factor": np.float64(a)}
    pos = np.asarray(x["position_ids"], np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        pos = pos_round(pos)
        if p.condense_ratio is not None:  # ROPE-CONDENSE: divided where the positions are held
            pos = pos_round(pos / p.condense_ratio)
        if interpolate and p.rope_type == "linear":
            pos, w = pos_round(pos / p.factor), w * p.factor
        phi = phi_round(pos[..., None] * w)
        return _rope_outputs(op, p, x, a * np.cos(phi), a * np.sin(phi))


_ANGLE_OPS = ("rope.apply", "rope.cos_sin", "rope.cos_sin_calls")


@mutant("rope_f16_angles", *_ANGLE_OPS, "rope.inv_freq")
def rope_f16_angles(op, p, x, dtype=None):
    """At float16 activations, the angle computed in float16: ``f16(f16(position) * f16(inv_freq))``
    (positions above 65504 overflow to inf: NaN outputs)."""
    if dtype != "float16":
        return None
    return _angles_form(op, p, x, w_round=_f16_round, pos_round=_f16_round, phi_round=_f16_round)


@mutant("rope_f16_inv_freq", *_ANGLE_OPS, "rope.inv_freq")
def rope_f16_inv_freq(op, p, x, dtype=None):
    """At float16 activations, the inv_freq buffer held in float16; positions and the product in float32."""
    if dtype != "float16":
        return None
    return _angles_form(op, p, x, w_round=_f16_round)


@mutant("rope_f16_positions", *_ANGLE_OPS)
def rope_f16_positions(op, p, x, dtype=None):
    """At float16 activations, the positions cast to float16 before the product: positions above
    2048 round to their float16 spacing and those above 65504 become inf (NaN outputs)."""
    if dtype != "float16":
        return None
    return _angles_form(op, p, x, pos_round=_f16_round, interpolate=True)  # interpolation as the bf16 form


@mutant("rope_f16_cos_sin", *_ANGLE_OPS)
def rope_f16_cos_sin(op, p, x, dtype=None):
    """At float16 activations, cos/sin evaluated in float16 from the float32 angle: the angle is
    rounded to float16 first (angles above 65504 rad become inf: NaN outputs)."""
    if dtype != "float16":
        return None
    return _angles_form(op, p, x, phi_round=_f16_round)


@mutant("rope_bf16_angle_rounded", *_ANGLE_OPS)
def rope_bf16_angle_rounded(op, p, x, dtype=None):
    """A float32 angle product rounded to bfloat16 afterwards: ``bf16(fl32(position) * fl32(inv_freq))``
    (inv_freq and the positions exact)."""
    return _angles_form(op, p, x, phi_round=bf16_round)


@mutant("rope_bf16_angle_product", *_ANGLE_OPS, "rope.inv_freq")
def rope_bf16_angle_product(op, p, x, dtype=None):
    """DIV-ROPE-BF16-ANGLE-PRODUCT (what the superseded bf16-angles divergence meant in 0.2.0): the
    angle product computed in bfloat16, ``bf16(bf16(position) * bf16(inv_freq))`` (the same values
    as ``rope_bf16_angles``)."""
    return _angles_form(op, p, x, w_round=bf16_round, pos_round=bf16_round, phi_round=bf16_round)


# ---- golden cases ----------------------------------------------------------------------------
_TINY = dict(head_dim=8, rope_theta=10000.0)
for pairing, cl in (("half", "ROPE-PAIR-HALF"), ("interleaved", "ROPE-PAIR-INTERLEAVED")):
    p = RopeParams(**_TINY, pairing=pairing)
    pp = RopeParams(**_TINY, pairing=pairing, rotary_dim=4)
    x = arange_x((1, 1, 1, 8))
    add_cases(
        Case(f"rope-tiny-{pairing}", "rope.apply", (cl, "ROPE-ANGLE"), p,
             {"q": x, "k": x[..., ::-1].copy(), "position_ids": pos([3])},
             "head_dim 8, theta 1e4, position 3, x = 0..7 (hand-checkable)"),
        Case(f"rope-tiny-partial-{pairing}", "rope.apply", (cl, "ROPE-PARTIAL"), pp,
             {"q": x, "k": x, "position_ids": pos([3])}, "rotary_dim 4 of head_dim 8"),
    )

# rotation by -phi (ROPE-ROTATION-NEGATIVE): the tiny figure, NanoChat's heads, and the other pairings
_TINY_NEG = RopeParams(head_dim=4, rope_theta=10000.0, rotation="negative")
_E0 = np.zeros((1, 1, 1, 4))
_E0[..., 0] = 1.0
_NANOCHAT = model_params("nanochat-d20")
add_cases(
    Case("rope-rotation-negative-figure", "rope.apply", ("ROPE-ROTATION-NEGATIVE", "ROPE-PAIR-HALF", "ROPE-ANGLE"),
         _TINY_NEG, {"q": _E0, "k": _E0, "position_ids": pos([1])},
         "the clause's figure: e_0 at position 1 turns to (cos 1, 0, -sin 1, 0)"),
    Case("rope-nanochat-d20", "rope.apply", ("ROPE-ROTATION-NEGATIVE", "ROPE-PAIR-HALF", "ROPE-ANGLE"), _NANOCHAT,
         {"q": Gen((2, 2, 5, 128)), "k": Gen((2, 1, 5, 128)), "position_ids": pos(range(5), [0, 7, 2047, 300, 1])},
         "NanoChat d20 heads (head_dim 128, theta 10000): every pair turns by -phi"),
    Case("rope-rotation-negative-interleaved-partial", "rope.apply",
         ("ROPE-ROTATION-NEGATIVE", "ROPE-PAIR-INTERLEAVED", "ROPE-PARTIAL"),
         RopeParams(head_dim=64, rotary_dim=32, rope_theta=500000.0, pairing="interleaved", rotation="negative",
                    attention_factor=1.25),
         {"q": Gen((2, 3, 4, 64)), "k": Gen((2, 1, 4, 64)), "position_ids": pos([9, 0, 3, 70000], [1, 1, 500, 2])},
         "-phi with interleaved pairs, a pass-through tail and an attention factor"),
    Case("rope-cos-sin-nanochat-d20", "rope.cos_sin", ("ROPE-ROTATION-NEGATIVE", "ROPE-ANGLE"), _NANOCHAT,
         {"position_ids": pos([0, 1, 2047], [5, 300, 65536])},
         "NanoChat's tables are the standard ones: the sign of -phi is the rotation's, not sin's"),
    Case("rope-rotation-negative-deinterleave", "rope.apply", ("ROPE-ROTATION-NEGATIVE", "ROPE-PAIR-DEINTERLEAVE"),
         RopeParams(head_dim=64, rope_theta=10000.0, pairing="deinterleave", rotation="negative"),
         {"q": Gen((1, 2, 3, 64)), "k": Gen((1, 1, 3, 64)), "position_ids": pos([4096, 3, 65536])},
         "-phi with de-interleaved output"),
)
_LLAMA3 = model_params("llama-3-8b")
_LLAMA4 = RopeParams(head_dim=128, rope_theta=500000.0, pairing="interleaved")
_DSV3_ROPE = model_params("deepseek-v3-rope")
_NEOX = model_params("gpt-neox-20b")
_GPTJ = model_params("gpt-j-6b")
_LONG = pos([0, 1, 2, 3, 4], [131067, 131068, 131069, 131070, 131071])
add_cases(
    Case("rope-llama3-8b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama-3-8B heads (head_dim 128, theta 500000), GQA 4:2, positions up to 131071"),
    Case("rope-llama3-8b-scattered", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), _LLAMA3,
         {"q": Gen((2, 4, 3, 128)), "k": Gen((2, 2, 3, 128)),
          "position_ids": pos([7, 0, 4095], [8191, 65536, 12])},
         "non-monotonic position_ids (never assume arange)"),
    Case("rope-llama4-interleaved", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE", "ROPE-PRECISION"),
         _LLAMA4, {"q": Gen((2, 4, 5, 128)), "k": Gen((2, 2, 5, 128)), "position_ids": _LONG},
         "Llama 4 style interleaved pairing at theta 500000"),
    Case("rope-neox-20b", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-PARTIAL"), _NEOX,
         {"q": Gen((3, 2, 7, 96)), "k": Gen((3, 2, 7, 96)),
          "position_ids": pos(range(7), range(100, 107), range(2041, 2048))},
         "GPT-NeoX-20B: head 96, rotary_dim 24, half pairing"),
    Case("rope-gptj-6b", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-PARTIAL"), _GPTJ,
         {"q": Gen((2, 3, 4, 256)), "k": Gen((2, 3, 4, 256)),
          "position_ids": pos([0, 1, 2, 3], [2044, 2045, 2046, 2047])},
         "GPT-J-6B: head 256, rotary_dim 64, interleaved pairing"),
    Case("rope-attention-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PAIR-HALF"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 5, 64)), "k": Gen((2, 1, 5, 64)), "position_ids": pos(range(5), range(60, 65))},
         "attention_factor 1.25 multiplies cos and sin"),
    Case("rope-partial-factor", "rope.apply", ("ROPE-ATTENTION-FACTOR", "ROPE-PARTIAL"),
         RopeParams(head_dim=64, rotary_dim=32, rope_theta=10000.0, attention_factor=1.25),
         {"q": Gen((2, 3, 4, 64)), "k": Gen((2, 1, 4, 64)), "position_ids": pos([9, 0, 3, 2047], [1, 1, 500, 2])},
         "attention_factor scales the rotated pairs only, never the pass-through tail"),
    Case("rope-interleaved-factor", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ATTENTION-FACTOR", "ROPE-ANGLE"),
         RopeParams(head_dim=64, rope_theta=500000.0, pairing="interleaved", attention_factor=0.75),
         {"q": Gen((3, 2, 3, 64)), "k": Gen((3, 1, 3, 64)), "position_ids": pos([5, 2, 9], [70000, 0, 1], [3, 3, 3])},
         "interleaved pairs with non-monotonic positions and an attention factor"),
    Case("rope-deepseek-v3-deinterleave", "rope.apply", ("ROPE-PAIR-DEINTERLEAVE", "ROPE-ANGLE"), _DSV3_ROPE,
         {"q": Gen((2, 4, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos([0, 1, 163839], [4096, 65536, 2])},
         "DeepSeek-V3 rope part as HF runs it (rope_interleave): pairs (2i, 2i+1) in, [firsts | seconds] out"),
    Case("rope-inv-freq-llama3", "rope.inv_freq", ("ROPE-INV-FREQ",), _LLAMA3),
    Case("rope-inv-freq-factor", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25)),
    Case("rope-cos-sin-neox-20b", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PARTIAL"), _NEOX,
         {"position_ids": pos([0, 1, 2047], [7, 300, 5])}, "rotary_dim/2 = 12 frequencies with denominator 24"),
    Case("rope-inv-freq-neox-20b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _NEOX),
    Case("rope-inv-freq-gptj-6b", "rope.inv_freq", ("ROPE-INV-FREQ", "ROPE-PARTIAL"), _GPTJ),
    Case("rope-cos-sin-llama3", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-PRECISION"), _LLAMA3,
         {"position_ids": _LONG}),
    Case("rope-cos-sin-factor", "rope.cos_sin", ("ROPE-ANGLE", "ROPE-ATTENTION-FACTOR"),
         RopeParams(head_dim=64, rope_theta=10000.0, attention_factor=1.25),
         {"position_ids": pos(range(6), range(1000, 1006), range(6, 0, -1))}),
)
# partial (NeoX, GPT-J) and full rotation (Llama 3, Llama 4 heads): the ONNX op's rotary_embedding_dim
# default (0 = head_size) and the flash-attn full-width path are exercised too
for name, p in (("half", _NEOX), ("interleaved", _GPTJ), ("half-full", _LLAMA3), ("interleaved-full", _LLAMA4),
                ("deinterleave", RopeParams(head_dim=64, pairing="deinterleave")),
                ("negative-half", RopeParams(head_dim=64, rotary_dim=48, rotation="negative")),
                ("negative-interleaved", RopeParams(head_dim=32, pairing="interleaved", rotation="negative"))):
    B, T = 2, 3
    pid = pos(range(3), range(2045, 2048))
    # given cos/sin inputs (magnitude 1.25, so an implementation may not renormalise them)
    c, s = rope.cos_sin(pid, p.model_copy(update={"attention_factor": 1.25}))
    pair = (f"ROPE-PAIR-{p.pairing.upper()}",) + (("ROPE-ROTATION-NEGATIVE",) if p.rotation == "negative" else ())
    add_cases(Case(f"rope-apply-cos-sin-{name}", "rope.apply_with_cos_sin",
              pair + (("ROPE-PARTIAL",) if p.rdim < p.head_dim else ()), p,
              {"q": Gen((B, 4, T, p.head_dim)), "k": Gen((B, 1, T, p.head_dim)), "cos": c, "sin": s},
              "cos/sin given (the ONNX / flash-attn level)"))
# a half-precision sequence offset: arange(T) + 257 / + 2049 in bfloat16 / float16 rounds the offset first
add_cases(
    Case("rope-position-offset-257", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE", "ROPE-PRECISION"),
         RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved"),
         {"q": Gen((2, 2, 3, 8)), "k": Gen((2, 1, 3, 8)), "position_ids": pos(range(257, 260), range(2049, 2052))},
         "offsets 257 and 2049 (not representable in bfloat16 / float16), three tokens each"),
)
# decode: a batch of single-token calls (T == 1 after a cache), and a prefill followed by decode steps
add_cases(
    Case("rope-decode-batch", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), _LLAMA3,
         {"q": Gen((3, 4, 1, 128)), "k": Gen((3, 2, 1, 128)), "position_ids": pos([4096], [17], [65000])},
         "one decode step (T == 1) for three rows at different positions (per-row positions, every row written)"),
    Case("rope-cache-offset-shared", "rope.apply", ("ROPE-PAIR-HALF", "ROPE-ANGLE"), _LLAMA3,
         {"q": Gen((3, 4, 4, 128)), "k": Gen((3, 2, 4, 128)), "position_ids": pos(*[range(8190, 8194)] * 3)},
         "four tokens after a cache of 8190 in every row (one offset: rotary-embedding-torch's and MLX's offset form)"),
    Case("rope-offset-past-2-20", "rope.apply", ("ROPE-PAIR-INTERLEAVED", "ROPE-ANGLE"), _LLAMA4,
         {"q": Gen((2, 2, 3, 128)), "k": Gen((2, 1, 3, 128)), "position_ids": pos(*[range(1_500_000, 1_500_003)] * 2)},
         "three tokens at 1,500,000 in two rows: positions past 2**20 (an int32 kernel keeping 20 bits, a float16 "
         "position), one offset"),
    Case("rope-cos-sin-calls-decode", "rope.cos_sin_calls", ("ROPE-ANGLE",), _LLAMA3,
         {"position_ids.0": pos(range(5), range(100, 105)), "position_ids.1": pos([5], [105]),
          "position_ids.2": pos([6], [106])},
         "prefill of 5 tokens, then two single-token decode steps, on one prepared RoPE"),
)

# ---- the parameter forms (ROPE-ROTARY-FRACTION, ROPE-CONDENSE): families/rope_forms.py ---------
from . import rope_forms  # noqa: E402,F401  (registers their mutants and cases)
from . import rope_calls  # noqa: E402,F401 - rope.apply's call forms
from . import rope_tables  # noqa: E402,F401 - the cos/sin tables' dtype (ROPE-TABLE-DTYPE)
from . import rope_long  # noqa: E402,F401 - long positions (2**24, int32 max) and offsets with scaled frequencies
from . import rope_shapes  # noqa: E402,F401 - the head sizes, head counts and batches kernels special-case
