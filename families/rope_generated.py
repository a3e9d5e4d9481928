"""Generated-case strategies of the RoPE family's operations (``rope.*``): every pairing, both
rotation directions (the rotating operations), full and partial rotary (a width or a fraction), condensed
positions, an optional attention factor, every ``rope_type`` with its scaling fields at
random valid values (:mod:`posenc.families.rope_scaling_generated`), θ from 1e2 to 1e8, head sizes
kernels special-case (80, 92, 112, 160, 192), 73 query heads and batches of 5 and 9, and positions
anywhere up to 2^17 (near powers of two, above 65504, scattered, after a cache) or rows far beyond
(near 2^20, 2^24)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import RopeParams, rotary_width
from posenc.spec.ranges import domain

from . import branch, generator, spec
from .rope_scaling_generated import scaling_fields

M = "RopeParams"
OPS = ("rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply", "rope.apply_with_cos_sin")


def rope_params(draw, *, scaled: bool = True, favour: tuple[str, ...] = ()) -> RopeParams:
    """A valid :class:`RopeParams`: head_dim, rotary_dim, θ, pairing, attention factor and
    (when ``scaled``) a rope_type with its fields, all from the declared domains; one case in six the
    plain RoPE every kernel has (full width, half pairing, no factor or scaling), so that a simple
    kernel's generated check is not left to the chance of drawing every field at its default."""
    head = g.size(draw, M, "head_dim")
    if draw(st.integers(0, 5)) == 0:
        return RopeParams(head_dim=head, rope_theta=g.field(draw, M, "rope_theta"))
    rotary = None if draw(st.booleans()) else g.size(draw, M, "rotary_dim", hi=head)
    types = list(domain(spec(), M, "rope_type").values)
    rt = draw(st.sampled_from(types + list(favour) * 2)) if scaled else "default"
    r = rotary or head
    if rt == "dynamic" and r <= 2:
        rotary, r = None, max(head, 4)
        head = max(head, 4)
    fields = scaling_fields(draw, rt, r // 2)
    af = None if draw(st.integers(0, 2)) else g.field(draw, M, "attention_factor")
    return RopeParams(head_dim=head, rotary_dim=rotary, rope_theta=g.field(draw, M, "rope_theta"),
                      pairing=g.field(draw, M, "pairing"), rope_type=rt, attention_factor=af, **fields)


def with_rotation(draw, p: RopeParams) -> RopeParams:
    """``p`` turned by -phi one case in four (ROPE-ROTATION-NEGATIVE), for the operations that
    rotate; drawn after the rest of the case, so the other fields' draws are those of before."""
    return p.model_copy(update={"rotation": "negative"}) if draw(st.integers(0, 3)) == 0 else p


#: fractions of published configs (GPT-NeoX 0.25, Phi-2 0.4, Phi-1.5 0.5, Phi-4-mini 0.75) and ones whose
#: float64 product truncates below the exact one at some widths (0.29, 0.57, 0.58, 0.35)
FRACTIONS = (0.25, 0.4, 0.5, 0.75, 0.29, 0.57, 0.58, 0.35, 0.3)
#: condensing ratios: LLaMA-2-7B-32K's 8, powers of two and not (3, 4.5: dividing the positions and the
#: frequencies round differently in float32)
RATIOS = (2.0, 3.0, 4.5, 8.0)


def with_forms(draw, p: RopeParams, keep_width: bool = False) -> RopeParams:
    """``p`` with the parameter forms (spec 0.5.0), drawn after the rest of the case so that the other
    fields' draws are those of before: one case in four states its rotary_dim as the fraction that
    sizes it back (ROPE-ROTARY-FRACTION), one in four (unless ``keep_width``) a fraction of its own --
    a published one, one that truncates, or one from the declared domain -- where the width it gives is
    valid; one default-type case in four condenses its positions (ROPE-CONDENSE)."""
    k = draw(st.integers(0, 3))
    h, proportional = p.head_dim, p.rope_type == "proportional"
    if k == 0 and p.rotary_dim is not None and rotary_width(h, p.rotary_dim / h, proportional) == p.rotary_dim:
        p = p.model_copy(update={"rotary_dim": None, "partial_rotary_factor": p.rotary_dim / h})
    elif k == 1 and not keep_width and p.rope_type != "longrope":  # LongRoPE's factor lists are sized by the width
        f = draw(st.sampled_from(FRACTIONS)) if draw(st.booleans()) else \
            round(g.field(draw, M, "partial_rotary_factor"), 2)
        w = rotary_width(h, f, proportional)
        if w % 2 == 0 and w >= (4 if p.rope_type == "dynamic" else 2):
            p = p.model_copy(update={"rotary_dim": None, "partial_rotary_factor": f})
    if not keep_width and p.rope_type == "default" and draw(st.integers(0, 3)) == 0:
        c = draw(st.sampled_from(RATIOS + (None,)))
        c = g.field(draw, M, "condense_ratio") if c is None else c
        p = p.model_copy(update={"condense_ratio": c})
    return RopeParams(**p.model_dump(exclude_none=True))  # validated


def _qk(draw, p: RopeParams, b: int, t: int) -> dict:
    hq, hk = g.shape(draw, (1, 2, 4, *g.KERNEL_HEADS), (1, 2))
    return {"q": g.values((b, hq, t, p.head_dim)), "k": g.values((b, hk, t, p.head_dim))}


@generator("rope.inv_freq")
def gen_inv_freq(draw):
    p = rope_params(draw)
    return g.case("rope.inv_freq", with_forms(draw, p), {}, [])


@generator("rope.cos_sin")
def gen_cos_sin(draw):
    p = rope_params(draw)
    b, t = g.shape(draw, (1, 2, 3), (1, 2, 5))
    x = {"position_ids": g.positions(draw, b, t, g.MAX_POSITION, far=g.LONG_POSITION)}
    p = with_rotation(draw, p)  # the tables do not depend on it (ROPE-ROTATION-NEGATIVE)
    return g.case("rope.cos_sin", with_forms(draw, p), x, [])


@generator("rope.apply")
def gen_apply(draw):
    p = rope_params(draw)
    b, t = g.shape(draw, (1, 2, 3, *g.KERNEL_BATCHES), (1, 3, 5))
    x = {**_qk(draw, p, b, t), "position_ids": g.positions(draw, b, t, g.MAX_POSITION, far=g.LONG_POSITION)}
    p = with_rotation(draw, p)
    return g.case("rope.apply", with_forms(draw, p), x, [])


@generator("rope.cos_sin_calls")
def gen_cos_sin_calls(draw):
    """A prefill then decode steps (sometimes a new, shorter request): the sequence a cache
    produces; the stateful rope_types (dynamic, longrope) are drawn more often."""
    p = rope_params(draw, favour=("dynamic", "longrope"))
    b, t0 = g.shape(draw, (1, 2), (1, 3, 6))
    start = draw(st.sampled_from([0, 1000, 8190, 70000, 120000]))
    calls, nxt = [], start + t0
    calls.append(np.tile(np.arange(start, nxt, dtype=np.int64), (b, 1)))
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 3)) == 0:  # a new, shorter request (the cache was reset)
            t = draw(st.sampled_from([1, 2, 4]))
            s0 = draw(st.sampled_from([0, nxt // 2, nxt // 2]))
            calls.append(np.tile(np.arange(s0, s0 + t, dtype=np.int64), (b, 1)))
            nxt = s0 + t
        else:
            calls.append(np.full((b, 1), nxt, dtype=np.int64))
            nxt += 1
    lens = sorted({int(c.max()) + 1 for c in calls})
    if p.rope_type == "dynamic" and len(lens) > 1 and lens[-1] > 256 and draw(st.integers(0, 3)):
        # the threshold between the calls' lengths: some calls scale, others do not
        p = RopeParams(**{**p.model_dump(exclude_defaults=True),
                          "max_position_embeddings": max(128, draw(st.sampled_from(lens[:-1] + [n - 1 for n in lens[:-1]])))})
    x = {f"position_ids.{i}": c for i, c in enumerate(calls)}
    return g.case("rope.cos_sin_calls", with_forms(draw, p), x, [])


@generator("rope.apply_with_cos_sin")
def gen_apply_with_cos_sin(draw):
    p = rope_params(draw, scaled=False)
    b, t = g.shape(draw, (1, 2, *g.KERNEL_BATCHES), (1, 3, 4))
    x = {**_qk(draw, p, b, t), "cos": g.values((b, t, p.pair_dim // 2), 0.5), "sin": g.values((b, t, p.pair_dim // 2), 0.5)}
    p = with_rotation(draw, p)
    cl = [f"ROPE-PAIR-{p.pairing.upper()}"] + (["ROPE-PARTIAL"] if p.rdim < p.head_dim else []) \
        + (["ROPE-ROTATION-NEGATIVE"] if p.rotation == "negative" else [])
    return g.case("rope.apply_with_cos_sin", p, x, cl)


# ---- branch points (the coverage rule: both sides exercised) -----------------------------------

@branch("ROPE-PARTIAL", "partial")
def _partial(p, x):
    return p.rdim < p.head_dim


@branch("ROPE-ROTARY-FRACTION", "truncated")
def _truncated(p, x):
    f = getattr(p, "partial_rotary_factor", None)
    return None if f is None else p.head_dim * f != int(p.head_dim * f)


@branch("ROPE-PRECISION", "beyond-float16-range")
def _beyond_f16(p, x):
    pos = [np.asarray(v) for k, v in x.items() if k.startswith("position_ids")]
    return None if not pos else max(int(a.max()) for a in pos) > 65504
