"""Generated-case strategies of the rope_scaling family: the scaling fields of every
``rope_type`` drawn from their declared domains (``parameters:`` of spec/rope_scaling.yaml), and
the generator of ``attention.probs`` (SCALE-YARN-SOFTMAX-SCALE)."""

from __future__ import annotations

from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import RopeParams, SoftmaxScaleParams

from . import branch, generator

M = "RopeParams"
def _maybe(draw, name: str, **kw):
    return g.field(draw, M, name, **kw) if draw(st.booleans()) else None


def scaling_fields(draw, rope_type: str, rotary_half: int) -> dict:
    """The scaling fields of ``rope_type`` (required ones always, optional ones sometimes)."""
    f: dict = {}
    if rope_type == "linear":
        f["factor"] = g.field(draw, M, "factor")
    elif rope_type == "dynamic":
        f.update(factor=g.field(draw, M, "factor"), max_position_embeddings=g.field(draw, M, "max_position_embeddings", hi=2 ** 17),
                 dynamic_policy=draw(st.sampled_from([None, "per_call", "grow_until_reset", "grow_until_reset"])))
    elif rope_type == "yarn":
        orig = g.field(draw, M, "original_max_position_embeddings")
        f["original_max_position_embeddings"] = orig
        given = draw(st.sampled_from(["factor", "max_position_embeddings", "both"]))
        if given != "max_position_embeddings":
            f["factor"] = g.field(draw, M, "factor")
        if given != "factor":
            f["max_position_embeddings"] = orig * draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
        for name in ("beta_fast", "beta_slow"):
            f[name] = _maybe(draw, name)
        ms = draw(st.sampled_from(["none", "mscale", "all_dim", "both", "both"]))  # DeepSeek sets both
        f["mscale"] = g.field(draw, M, "mscale") if ms in ("mscale", "both") else None
        f["mscale_all_dim"] = g.field(draw, M, "mscale_all_dim") if ms in ("all_dim", "both") else None
        if f["beta_fast"] is not None and f["beta_slow"] is not None and f["beta_slow"] >= f["beta_fast"]:
            f["beta_slow"] = None
        f["truncate"] = draw(st.sampled_from([None, False, True]))
    elif rope_type == "llama3":
        low = g.field(draw, M, "low_freq_factor")
        f.update(factor=g.field(draw, M, "factor"), low_freq_factor=low,
                 high_freq_factor=g.field(draw, M, "high_freq_factor", lo=low * 1.25),
                 original_max_position_embeddings=g.field(draw, M, "original_max_position_embeddings"))
    elif rope_type == "longrope":
        orig = g.field(draw, M, "original_max_position_embeddings", hi=8192)
        f["original_max_position_embeddings"] = orig
        for name in ("short_factor", "long_factor"):
            lo, hi = (0.5, 2.0) if name == "short_factor" else (1.0, 64.0)
            f[name] = tuple(round(draw(st.floats(lo, hi)), 4) for _ in range(rotary_half))
        given = draw(st.sampled_from(["factor", "max_position_embeddings", "both"]))
        if given != "max_position_embeddings":
            f["factor"] = g.field(draw, M, "factor")
        if given != "factor":
            f["max_position_embeddings"] = orig * draw(st.sampled_from([1, 2, 8, 32]))
        policy = draw(st.sampled_from([None, "per_call", "at_init"]))
        if policy == "at_init" and "max_position_embeddings" not in f:
            f["max_position_embeddings"] = orig * draw(st.sampled_from([1, 4]))
        f["longrope_policy"] = policy
    elif rope_type == "proportional" and draw(st.booleans()):
        f["factor"] = g.field(draw, M, "factor")
    return {k: v for k, v in f.items() if v is not None}


@generator("attention.probs")
def gen_attention_probs(draw):
    head = draw(st.sampled_from([16, 32, 64]))
    rope = RopeParams(head_dim=head, rope_type="yarn", **{
        **scaling_fields(draw, "yarn", head // 2), "mscale_all_dim": g.field(draw, M, "mscale_all_dim")})
    qk = g.field(draw, "SoftmaxScaleParams", "qk_head_dim", lo=head)
    p = SoftmaxScaleParams(rope=rope, qk_head_dim=qk)
    b, h, tq, tk = g.shape(draw, (1, 2), (1, 2, 3), (1, 3), (2, 5))
    return g.case("attention.probs", p, {"q": g.values((b, h, tq, qk), 0.25), "k": g.values((b, h, tk, qk), 0.25)},
                  ("SCALE-YARN-SOFTMAX-SCALE",))


# ---- branch points of the scaling formulas (the coverage rule: both sides exercised) ----------

def _seq_lens(x) -> list[int]:
    from posenc.reference.rope import seq_len_of
    keys = [k for k in x if k == "position_ids" or k.startswith("position_ids.")]
    return [seq_len_of(x[k]) for k in keys]


def _yarn_raw(p):
    import math
    d, theta, L = p.rdim, p.rope_theta, p.original_max_position_embeddings
    corr = lambda beta: d * math.log(L / (beta * 2 * math.pi)) / (2 * math.log(theta))  # noqa: E731
    return corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)


def _yarn(p):
    return p.rope if hasattr(p, "qk_head_dim") else p


@branch("SCALE-YARN-RAMP", "truncated")
def _yarn_truncated(p, x):
    p = _yarn(p)
    return None if p.rope_type != "yarn" else p.truncate is not False


@branch("SCALE-YARN-RAMP", "low-clamped")
def _yarn_low_clamped(p, x):
    p = _yarn(p)
    return None if p.rope_type != "yarn" else _yarn_raw(p)[0] < 0


@branch("SCALE-YARN-RAMP", "high-clamped")
def _yarn_high_clamped(p, x):
    p = _yarn(p)
    return None if p.rope_type != "yarn" else _yarn_raw(p)[1] > p.rdim - 1


@branch("SCALE-YARN-FACTOR", "factor-given")
def _yarn_factor_given(p, x):
    p = _yarn(p)
    return None if p.rope_type != "yarn" else p.factor is not None


def _llama3_bands(p):
    import numpy as np

    from posenc.reference.rope_scaling import base_inv_freq
    wavelen = 2 * np.pi / base_inv_freq(p.rope_theta, p.rdim)
    L = p.original_max_position_embeddings
    return wavelen < L / p.high_freq_factor, wavelen > L / p.low_freq_factor


@branch("SCALE-LLAMA3", "low-frequency-band")
def _llama3_low(p, x):
    return None if p.rope_type != "llama3" else bool(_llama3_bands(p)[1].any())


@branch("SCALE-LLAMA3", "smooth-band")
def _llama3_smooth(p, x):
    if p.rope_type != "llama3":
        return None
    hi, lo = _llama3_bands(p)
    return bool((~hi & ~lo).any())


@branch("SCALE-DYNAMIC-NTK", "beyond-max-length")
def _dynamic_scaled(p, x):
    lens = _seq_lens(x)
    return None if p.rope_type != "dynamic" or not lens else max(lens) > p.max_position_embeddings


@branch("SCALE-LONGROPE-FACTORS", "long-factors")
def _longrope_long(p, x):
    from posenc.reference.rope_scaling import longrope_uses_long
    lens = _seq_lens(x)
    if p.rope_type != "longrope":
        return None
    return any(longrope_uses_long(p, n) for n in lens) if lens else longrope_uses_long(p, None)
