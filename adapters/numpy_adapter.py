"""The ``numpy`` adapter: the float64 reference itself, output cast to the requested dtype.

Running the suite on it proves only that goldens and reference agree (freshness); it is not a
conforming implementation in the conformance matrix.  bfloat16 comes from ``ml_dtypes``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from posenc.reference import alibi, attention, learned, nope, ops, position_ids, rope, sinusoidal, t5

from .base import Adapter

_NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16,
       "bfloat16": ml_dtypes.bfloat16, "int64": np.int64, "bool": np.bool_}


class _Rope:
    """The reference behind a prepared operation (its frequency state spans calls)."""

    def __init__(self, params, dtype):
        self.p, self.dt = params, _NP[dtype]
        self.freq = ops.freq_provider(params)

    def inv_freq(self):
        return rope.inv_freq(self.p)

    def cos_sin(self, position_ids):
        out = ops.rope_outputs("rope.cos_sin", self.p, {"position_ids": position_ids}, self.freq)
        return out["cos"].astype(self.dt), out["sin"].astype(self.dt)

    def apply(self, q, k, position_ids):
        x = {"q": q.astype(np.float64), "k": k.astype(np.float64), "position_ids": position_ids}
        out = ops.rope_outputs("rope.apply", self.p, x, self.freq)
        return out["q"].astype(self.dt), out["k"].astype(self.dt)


class _MRope:
    def __init__(self, params, dtype):
        self.p, self.dt = params, _NP[dtype]

    def cos_sin(self, position_ids):
        out = ops.run("mrope.cos_sin", self.p, {"position_ids": position_ids})
        return out["cos"].astype(self.dt), out["sin"].astype(self.dt)

    def apply(self, q, k, position_ids):
        x = {"q": q.astype(np.float64), "k": k.astype(np.float64), "position_ids": position_ids}
        out = ops.run("mrope.apply", self.p, x)
        return out["q"].astype(self.dt), out["k"].astype(self.dt)


class NumpyAdapter(Adapter):
    name = "numpy"
    framework = "numpy"
    notes = "float64 reference, rounded once to the requested dtype"

    def versions(self):
        return {"numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}

    def from_numpy(self, array, dtype, device):
        return np.asarray(array).astype(_NP[dtype])

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x

    def dtype_of(self, x):
        return str(np.asarray(x).dtype)

    def rope(self, params, *, dtype, device):
        return _Rope(params, dtype)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        f = lambda x: rope.apply_with_cos_sin(  # noqa: E731
            x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64), params.pair_dim, params.pairing
        ).astype(x.dtype)
        return f(q), f(k)

    def sinusoidal(self, position_ids, params, *, dtype, device):
        return sinusoidal.table(position_ids, params).astype(_NP[dtype])

    def fairseq_positions(self, input_ids, params, cache_length):
        return sinusoidal.fairseq_positions(input_ids, params.padding_idx, cache_length)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: sinusoidal.fairseq_embeddings(
            input_ids, params, cache_length).astype(_NP[dtype])

    def lookup(self, table, rows):
        return learned.lookup(table.astype(np.float64), rows).astype(table.dtype)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        w = {k: v.astype(np.float64) for k, v in weights.items()}
        return lambda input_ids, position_ids=None, cache_length=0: learned.gpt2_embeddings(
            w["wte"], w["wpe"], input_ids, position_ids, cache_length).astype(_NP[dtype])

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = {k: v.astype(np.float64) for k, v in weights.items()}

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            return learned.bert_embeddings(
                w["word_embeddings"], w["position_embeddings"], w["token_type_embeddings"],
                w["layer_norm_weight"], w["layer_norm_bias"], input_ids, token_type_ids,
                position_ids, cache_length, params.layer_norm_eps).astype(_NP[dtype])
        return call

    def roberta_positions(self, input_ids, params, cache_length):
        return learned.roberta_positions(input_ids, params.padding_idx, cache_length)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        w = {k: v.astype(np.float64) for k, v in weights.items()}

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            return learned.roberta_embeddings(
                w["word_embeddings"], w["position_embeddings"], w["token_type_embeddings"],
                w["layer_norm_weight"], w["layer_norm_bias"], input_ids, token_type_ids,
                position_ids, cache_length, params.padding_idx, params.layer_norm_eps).astype(_NP[dtype])
        return call

    def bart_embeddings(self, params, weights, *, dtype, device):
        t = weights["table"].astype(np.float64)
        return lambda input_ids, attention_mask=None, cache_length=0: learned.bart_embeddings(
            t, input_ids, cache_length).astype(_NP[dtype])

    def opt_positions(self, attention_mask, cache_length):
        return learned.opt_positions(attention_mask, cache_length)

    def opt_rows(self, positions):
        return learned.opt_rows(positions)

    def opt_embeddings(self, params, weights, *, dtype, device):
        t = weights["table"].astype(np.float64)
        return lambda attention_mask, cache_length=0: learned.opt_embeddings(
            t, attention_mask, cache_length).astype(_NP[dtype])

    def position_ids(self, rule, *, device, **x):
        if rule == "prefill":
            return position_ids.prefill(x["batch"], x["seq_len"])
        if rule == "decode":
            return position_ids.decode(x["batch"], x["seq_len"], x["cache_length"])
        if rule == "left_pad":
            return position_ids.left_pad(x["attention_mask"], x["cache_length"])[0]
        if rule == "packed":
            return position_ids.packed(x["cu_seqlens"])
        raise ValueError(f"unknown position_ids rule {rule!r}")

    def alibi_slopes(self, params, *, dtype, device):
        return alibi.slopes(params)

    def alibi_bias(self, params, *, dtype, device, **x):
        return alibi.bias(params, **x)[0].astype(_NP[dtype])

    def t5_buckets(self, relative_position, params):
        return t5.buckets(relative_position, params)

    def t5_bias(self, params, weights, *, dtype, device):
        table = weights["table"].astype(np.float64)
        return lambda query_length, key_length, cache_length=0: t5.bias(
            table, params, query_length, key_length, cache_length).astype(_NP[dtype])

    def mrope(self, params, *, dtype, device):
        return _MRope(params, dtype)

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        yq, yk = nope.apply(q, k, layer_idx, params)
        return yq.astype(q.dtype), yk.astype(k.dtype)

    def nope_layer_flags(self, params, *, device):
        return nope.layer_flags(params)

    def attention_probs(self, q, k, params):
        return attention.probs(q, k, params).astype(q.dtype)


ADAPTER = NumpyAdapter
