"""The RoPE parameter forms (spec 0.5.0): a rotated width given as a fraction of the head
(ROPE-ROTARY-FRACTION) and positions condensed before the angle (ROPE-CONDENSE) -- the mutants of
their divergences and their golden cases, imported by :mod:`posenc.families.rope`.  The math is
:func:`posenc.spec.models.rotary_width` and :func:`posenc.reference.rope.angle_positions`."""

from __future__ import annotations

import math

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.spec.models import RopeParams

from . import add_cases, mutant, no_form, reference_of
from ._common import run

_TABLE_OPS = ("rope.apply", "rope.cos_sin", "rope.cos_sin_calls")


@mutant("rope_width_rounded_up", "rope.inv_freq", *_TABLE_OPS)
def rope_width_rounded_up(op, p, x, dtype=None):
    """DIV-ROPE-ROTARY-WIDTH-ROUNDED-UP: the fraction's width ``2 * ceil(head_dim * f / 2)`` (the next
    even width) where ``int(head_dim * f)`` is specified; None where the two agree."""
    f = p.partial_rotary_factor
    if f is None or p.rope_type == "longrope":  # LongRoPE's factor lists are sized by the width
        return None
    width = 2 * math.ceil(p.head_dim * f / 2)
    if width == p.rdim or width > p.head_dim:
        return None
    return run(op, p.with_width(rotary_dim=width), x)


@mutant("rope_condense_ignored", *_TABLE_OPS)
def rope_condense_ignored(op, p, x, dtype=None):
    """DIV-ROPE-CONDENSE-IGNORED: the angles of ``position * inv_freq``, condense_ratio dropped."""
    if p.condense_ratio is None:
        return None
    return run(op, p.model_copy(update={"condense_ratio": None}), x)


def _offset_only(pid, p) -> np.ndarray:
    """Each row's first position of the call ``o`` condensed, the rest not: ``o / c + (p - o)``."""
    pid = np.asarray(pid, np.float64)
    o = pid[..., :1]
    return o / p.condense_ratio + (pid - o)


@mutant("rope_condense_offset_only", *_TABLE_OPS)
def rope_condense_offset_only(op, p, x, dtype=None):
    """DIV-ROPE-CONDENSE-OFFSET-ONLY: a row whose call starts at position ``o`` reads ``o / c + (p - o)``
    (the call's own table built unscaled, the cache offset condensed)."""
    if p.condense_ratio is None:
        return None
    return reference_of(op).fn(p, x, positions=_offset_only)


def _decode_only(pid, p) -> np.ndarray:
    """A single-token call condensed, a call of several tokens not."""
    pid = np.asarray(pid, np.float64)
    return pid / p.condense_ratio if pid.shape[-1] == 1 else pid


@mutant("rope_condense_decode_only", *_TABLE_OPS)
def rope_condense_decode_only(op, p, x, dtype=None):
    """DIV-ROPE-CONDENSE-DECODE-ONLY: single-token (decode) calls read ``p / c``, calls of several tokens
    (a prefill) ``p``."""
    if p.condense_ratio is None:
        return None
    return reference_of(op).fn(p, x, positions=_decode_only)


# ---- golden cases ----------------------------------------------------------------------------
# Widths from a fraction: int(head_dim * f) of the float64 product (100 x 0.29 = 28.999999999999996
# -> 28; 96 x 0.3 = 28.8 -> 28); GPT-NeoX-20B's rotary_pct 0.25 of 96, Phi-2's 0.4 of 80 (32), Phi-4-mini's
# 0.75 of 128 (96); proportional rope rounds its share down to even (64 x 0.3 -> 18).
_F = ("ROPE-ROTARY-FRACTION",)
add_cases(
    Case("rope-fraction-100-0.29", "rope.apply", _F + ("ROPE-PARTIAL", "ROPE-PAIR-HALF"),
         RopeParams(head_dim=100, partial_rotary_factor=0.29),
         {"q": Gen((2, 2, 4, 100)), "k": Gen((2, 1, 4, 100)), "position_ids": pos([0, 1, 2, 3], [900, 17, 4096, 5])},
         "head 100 x 0.29 = 28.999999999999996 in float64: width 28 (the exact product is 29)"),
    Case("rope-inv-freq-fraction-96-0.3", "rope.inv_freq", _F + ("ROPE-INV-FREQ",),
         RopeParams(head_dim=96, partial_rotary_factor=0.3, rope_theta=500000.0),
         note="head 96 x 0.3 = 28.8: width 28, 14 frequencies with denominator 28"),
    Case("rope-cos-sin-fraction-96-0.3", "rope.cos_sin", _F + ("ROPE-ANGLE",),
         RopeParams(head_dim=96, partial_rotary_factor=0.3),
         {"position_ids": pos([0, 1, 2047], [7, 300, 65536])}, "width 28 of head 96"),
    Case("rope-fraction-neox-20b", "rope.apply", _F + ("ROPE-PARTIAL", "ROPE-PAIR-HALF"),
         RopeParams(head_dim=96, partial_rotary_factor=0.25),
         {"q": Gen((2, 2, 5, 96)), "k": Gen((2, 2, 5, 96)), "position_ids": pos(range(5), range(2043, 2048))},
         "GPT-NeoX-20B as its config states it: rotary_pct 0.25 of head 96, width 24"),
    Case("rope-fraction-phi-2", "rope.cos_sin_calls", _F + ("ROPE-ANGLE",),
         RopeParams(head_dim=80, partial_rotary_factor=0.4),
         {"position_ids.0": pos(range(4), range(60, 64)), "position_ids.1": pos([4], [64])},
         "Phi-2: partial_rotary_factor 0.4 of head 80, width 32; prefill then one decode step"),
    Case("rope-fraction-phi-4-mini-interleaved", "rope.apply", _F + ("ROPE-PARTIAL", "ROPE-PAIR-INTERLEAVED"),
         RopeParams(head_dim=128, partial_rotary_factor=0.75, pairing="interleaved"),
         {"q": Gen((1, 3, 3, 128)), "k": Gen((1, 1, 3, 128)), "position_ids": pos([3, 70000, 1])},
         "0.75 of head 128 (Phi-4-mini's share), interleaved pairs"),
    Case("rope-fraction-proportional-64-0.3", "rope.apply", _F + ("SCALE-PROPORTIONAL",),
         RopeParams(head_dim=64, partial_rotary_factor=0.3, rope_type="proportional"),
         {"q": Gen((2, 2, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos([0, 5, 9], [1000, 3, 40000])},
         "proportional rope rounds its share down to even: 2 * int(0.3 * 64 // 2) = 18 (int(19.2) would be odd)"),
)

# Condensed positions: LLaMA-2-7B-32K's ratio 8 (LitGPT), 3 and 4.5 (not powers of two: dividing the
# positions and dividing the frequencies round differently in float32); a prefill from 0 and a far one.
_C = ("ROPE-CONDENSE", "ROPE-ANGLE")
add_cases(
    Case("rope-condense-8-llama-2-32k", "rope.apply", _C + ("ROPE-PAIR-HALF",),
         RopeParams(head_dim=128, condense_ratio=8.0),
         {"q": Gen((2, 2, 5, 128)), "k": Gen((2, 1, 5, 128)), "position_ids": pos(range(5), range(32763, 32768))},
         "LLaMA-2-7B-32K heads (LitGPT rope_condense_ratio 8): a prefill from 0 and one ending at 32767"),
    Case("rope-cos-sin-condense-3", "rope.cos_sin", _C,
         RopeParams(head_dim=64, condense_ratio=3.0, rope_theta=500000.0),
         {"position_ids": pos([0, 1, 2, 3], [32768, 9, 100000, 4])}, "ratio 3: position 1 reads angle 1/3 inv_freq"),
    Case("rope-cos-sin-calls-condense-4.5", "rope.cos_sin_calls", _C,
         RopeParams(head_dim=32, condense_ratio=4.5),
         {"position_ids.0": pos(range(5), range(200, 205)), "position_ids.1": pos([5], [205]),
          "position_ids.2": pos([6], [206])},
         "prefill of 5, then two decode steps: every call's positions condensed, the cache offset and the new tokens"),
    Case("rope-condense-interleaved-partial", "rope.apply", _C + ("ROPE-PAIR-INTERLEAVED", "ROPE-PARTIAL"),
         RopeParams(head_dim=64, rotary_dim=32, pairing="interleaved", condense_ratio=2.0),
         {"q": Gen((2, 2, 3, 64)), "k": Gen((2, 1, 3, 64)), "position_ids": pos([1, 2, 3], [4095, 4096, 4097])},
         "ratio 2 with interleaved pairs and a pass-through tail"),
    Case("rope-inv-freq-condense-8", "rope.inv_freq", ("ROPE-INV-FREQ",), RopeParams(head_dim=128, condense_ratio=8.0),
         note="condensing divides the positions: inv_freq is ROPE-INV-FREQ's, unchanged"),
)
