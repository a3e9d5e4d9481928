"""The ALiBi family (ALIBI-*): references and error scales of alibi.slopes and alibi.bias, the
mutants of its divergences and its golden cases; the math is :mod:`posenc.reference.alibi`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, pos
from posenc.reference import alibi
from posenc.reference.rounding import round_to_dtype
from posenc.spec.models import AlibiParams
from posenc.spec.registry import model_params

from . import add_cases, case_clauses, mutant, reference
from ._common import run, scalar


@case_clauses("alibi")
def alibi_clauses(p, op: str) -> list[str]:
    """The clauses an ALiBi case exercises beyond its own: the slopes, in every bias."""
    return ["ALIBI-SLOPES"]



def slope_amplification(p) -> np.ndarray:
    """``1 + k/8`` per head: a float32 ``base ** k`` (BLOOM's ``torch.pow``) amplifies the
    rounding of its base ``k`` times; the float64 reference's exact ``2^e`` has no such error."""
    return 1.0 + alibi.slope_powers(p) / 8.0


def _alibi_slopes(p, x):
    return {"slopes": alibi.slopes(p)}


def _alibi_slopes_scales(p, x):
    m = alibi.slopes(p)
    return {"slopes": (m * slope_amplification(p), 0 * m)}


def _alibi_inputs(x) -> dict:
    out = {"query_length": scalar(x, "query_length")}
    if "attention_mask" in x:
        out["attention_mask"] = x["attention_mask"]
    else:
        out["key_length"] = scalar(x, "key_length")
    return out


def _alibi_bias(p, x):
    b, cmp = alibi.bias(p, **_alibi_inputs(x))
    return {"bias": b, "bias.compared": cmp}


def _alibi_bias_scales(p, x):
    b, _ = alibi.bias(p, **_alibi_inputs(x))
    amp = slope_amplification(p)[:, None, None]  # heads axis is -3 in every form
    ds = np.abs(b) * amp
    return {"bias": (ds, 0 * ds)}


reference("alibi.slopes", scales=_alibi_slopes_scales)(_alibi_slopes)
reference("alibi.bias", scales=_alibi_bias_scales)(_alibi_bias)


# ---- ALiBi (ALIBI-*) --------------------------------------------------------------------------
_ALIBI_OPS = ("alibi.slopes", "alibi.bias")


def _alibi_with_slopes(op, p, x, m):
    """The reference's outputs of ``op`` with slopes ``m`` in place of the spec's."""
    if op == "alibi.slopes":
        return {"slopes": np.asarray(m, np.float64)}
    out = run(op, p, x)
    ref = alibi.slopes(p)
    shape = [1] * out["bias"].ndim
    shape[-3] = p.num_heads
    out["bias"] = out["bias"] / ref.reshape(shape) * np.asarray(m).reshape(shape)  # slopes are powers of 2^x
    return out


@mutant("alibi_slopes_naive", *_ALIBI_OPS)
def alibi_slopes_naive(op, p, x, dtype=None):
    """2^(-B k / n) for every n, also where n is not a power of two."""
    n = p.num_heads
    if alibi.is_power_of_two(n):
        return None
    m = np.exp2(-p.alibi_bias_max * np.arange(1, n + 1, dtype=np.float64) / n)
    return _alibi_with_slopes(op, p, x, m)


def _pow2_slopes(n: int, bias_max: float) -> np.ndarray:
    """2^(-B k / n), k = 1..n (the power-of-two rule)."""
    return np.exp2(-bias_max * np.arange(1, n + 1, dtype=np.float64) / n)


@mutant("alibi_slopes_next_pow2", *_ALIBI_OPS)
def alibi_slopes_next_pow2(op, p, x, dtype=None):
    """The first n slopes of 2^ceil(log2 n) heads (MPT's gen_slopes without its odd/even reorder)."""
    n = p.num_heads
    if alibi.is_power_of_two(n):
        return None
    big = 1 << n.bit_length()
    return _alibi_with_slopes(op, p, x, _pow2_slopes(big, p.alibi_bias_max)[:n])


@mutant("alibi_slopes_extra_not_strided", *_ALIBI_OPS)
def alibi_slopes_extra_not_strided(op, p, x, dtype=None):
    """c = 2^floor(log2 n) slopes, then the first n - c slopes of 2c heads (the [0::2] stride dropped)."""
    n = p.num_heads
    if alibi.is_power_of_two(n):
        return None
    c = 1 << (n.bit_length() - 1)
    m = np.concatenate([_pow2_slopes(c, p.alibi_bias_max), _pow2_slopes(2 * c, p.alibi_bias_max)[:n - c]])
    return _alibi_with_slopes(op, p, x, m)


@mutant("alibi_slopes_compute_dtype", *_ALIBI_OPS)
def alibi_slopes_compute_dtype(op, p, x, dtype=None):
    """The slopes held in the activation dtype (keras-hub AlibiBias: convert_to_tensor(slopes,
    dtype=compute_dtype)); the bias is those rounded slopes times the integer distances."""
    if dtype not in ("bfloat16", "float16"):
        return None
    return _alibi_with_slopes(op, p, x, round_to_dtype(alibi.slopes(p), dtype))


@mutant("alibi_bias_max_ignored", *_ALIBI_OPS)
def alibi_bias_max_ignored(op, p, x, dtype=None):
    """The slopes of alibi_bias_max 8 whatever the parameter (transformers' MptModel.forward)."""
    if p.alibi_bias_max == 8:
        return None
    return _alibi_with_slopes(op, p, x, alibi.slopes(p.model_copy(update={"alibi_bias_max": 8.0})))


@mutant("alibi_sign_flipped", "alibi.bias")
def alibi_sign_flipped(op, p, x, dtype=None):
    out = run(op, p, x)
    out["bias"] = -out["bias"]
    return out


@mutant("alibi_causal_in_encoder", "alibi.bias")
def alibi_causal_in_encoder(op, p, x, dtype=None):
    """-m (i' - j) everywhere (no absolute value) where the symmetric form is specified."""
    if p.form != "symmetric":
        return None
    out = run(op, p.model_copy(update={"form": "causal"}), x)
    _, compared = alibi.bias(p, int(x["query_length"]), int(x["key_length"]))
    return {"bias": out["bias"], "bias.compared": compared}


@mutant("alibi_bloom_arange", "alibi.bias")
def alibi_bloom_arange(op, p, x, dtype=None):
    """BLOOM's bias with positions arange(Tk) instead of (cumsum(mask) - 1) * mask."""
    if p.form != "bloom":
        return None
    mask = np.asarray(x["attention_mask"])
    out = run(op, p, {**x, "attention_mask": np.ones_like(mask)})
    out["bias.compared"] = run(op, p, x)["bias.compared"]
    return out


# ---- golden cases ----------------------------------------------------------------------------
# ---- ALiBi (ALIBI-*) --------------------------------------------------------------------------
# Head counts: BLOOM-176B n_head 112 (published config.json; encodings-facts marks it [2ND]),
# BloomConfig default n_head 8, MPT-7B n_heads 32 with alibi_bias_max 8 (mosaicml/mpt-7b
# config.json; MptConfig defaults are 16 heads, alibi_bias_max 8, max_seq_len 2048), and the
# 6- and 12-head figures of encodings-facts "Golden 2".
_A = AlibiParams
_ROW = "ALIBI-ROW-CONSTANT"
add_cases(
    Case("alibi-slopes-8", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=8), note="2^-1 .. 2^-8"),
    Case("alibi-slopes-6", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=6),
         note="[0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]: not monotone"),
    Case("alibi-slopes-12", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=12),
         note="2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5"),
    Case("alibi-slopes-bloom-176b", "alibi.slopes", ("ALIBI-SLOPES",), model_params("bloom-176b"),
         note="BLOOM-176B: 112 heads = 64 + every other slope of 128"),
    Case("alibi-slopes-mpt-7b", "alibi.slopes", ("ALIBI-SLOPES",), model_params("mpt-7b"),
         note="MPT-7B: 32 heads, alibi_bias_max 8"),
    Case("alibi-slopes-bias-max-16", "alibi.slopes", ("ALIBI-SLOPES",), _A(num_heads=24, alibi_bias_max=16.0, form="mpt"),
         note="alibi_bias_max 16 replaces the 8; 24 heads = 16 + 8"),
    Case("alibi-causal-12", "alibi.bias", ("ALIBI-CAUSAL", _ROW), _A(num_heads=12),
         {"query_length": 7, "key_length": 7}, "prefill; future keys not compared"),
    Case("alibi-causal-cache", "alibi.bias", ("ALIBI-CAUSAL",), _A(num_heads=6),
         {"query_length": 3, "key_length": 11}, "3 queries after 8 cached tokens (bottom-right aligned)"),
    Case("alibi-symmetric-12", "alibi.bias", ("ALIBI-SYMMETRIC",), _A(num_heads=12, form="symmetric"),
         {"query_length": 6, "key_length": 6}, "encoder: -m|i - j|, every slot compared"),
    Case("alibi-symmetric-rect", "alibi.bias", ("ALIBI-SYMMETRIC",), _A(num_heads=8, form="symmetric"),
         {"query_length": 3, "key_length": 9}, "q_len != k_len: i offset by k_len - q_len (flash-attn)"),
    Case("alibi-bloom-mask", "alibi.bias", ("ALIBI-BLOOM", _ROW), _A(num_heads=8, form="bloom"),
         {"attention_mask": pos([0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0, 0]),
          "query_length": 7},
         "BloomConfig default 8 heads; left padding, full row, a hole and right padding"),
    Case("alibi-bloom-176b-cache", "alibi.bias", ("ALIBI-BLOOM", _ROW), model_params("bloom-176b"),
         {"attention_mask": pos([0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "query_length": 2},
         "BLOOM-176B 112 heads; 2 new tokens after 4 cached, one row left-padded"),
    Case("alibi-mpt-7b", "alibi.bias", ("ALIBI-MPT", _ROW), model_params("mpt-7b"),
         {"query_length": 8, "key_length": 8}, "MPT-7B: 32 heads, alibi_bias_max 8"),
    Case("alibi-mpt-7b-cache", "alibi.bias", ("ALIBI-MPT", _ROW), model_params("mpt-7b"),
         {"query_length": 2, "key_length": 130}, "2 new tokens after 128 cached: m (j - 129)"),
    Case("alibi-mpt-bias-max", "alibi.bias", ("ALIBI-MPT", "ALIBI-SLOPES"), _A(num_heads=12, alibi_bias_max=16.0, form="mpt"),
         {"query_length": 5, "key_length": 5}, "alibi_bias_max 16 with 12 heads"),
)
