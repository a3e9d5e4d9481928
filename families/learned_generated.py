"""Generated-case strategies of the learned family: table sizes and widths from the declared
domains (small vocabularies: only the position tables are under test), rows anywhere in the
table including its last row, caches that reach the table's end, padded masks and ids."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from posenc.harness import generators as g
from posenc.spec.models import (
    BartEmbeddingParams,
    BertEmbeddingParams,
    GPT2EmbeddingParams,
    LookupParams,
    OPTEmbeddingParams,
    RobertaEmbeddingParams,
)

from . import generator

VOCAB = 61  # token tables are data, not under test


def _width(draw, model: str, name: str) -> int:
    return g.size(draw, model, name, hi=96)


def _rows_len(draw, model: str, name: str) -> int:
    return g.size(draw, model, name, lo=8, hi=1024)


def _cache(draw, t: int, room: int) -> int:
    """A cache length that leaves ``t`` rows: 0, some, or up to the table's end."""
    room = max(room - t, 0)
    return draw(st.sampled_from([0, min(3, room), room])) if room else 0


@generator("learned.lookup")
def gen_lookup(draw):
    p = LookupParams(num_rows=g.size(draw, "LookupParams", "num_rows", hi=2048),
                     dim=g.size(draw, "LookupParams", "dim", hi=96))
    b, t = g.shape(draw, (1, 2), (1, 3))
    rows = g.positions(draw, b, t, p.num_rows) if p.num_rows >= t else np.zeros((b, t), np.int64)
    return g.case("learned.lookup", p, {"table": g.values((p.num_rows, p.dim)), "rows": rows}, ["LEARNED-ROW-RANGE"])


@generator("learned.gpt2")
def gen_gpt2(draw):
    p = GPT2EmbeddingParams(vocab_size=VOCAB, n_positions=_rows_len(draw, "GPT2EmbeddingParams", "n_positions"),
                            n_embd=_width(draw, "GPT2EmbeddingParams", "n_embd"))
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    x = {"wte": g.values((VOCAB, p.n_embd)), "wpe": g.values((p.n_positions, p.n_embd)),
         "input_ids": g.ids((b, t), VOCAB)}
    if draw(st.booleans()):
        x.update(position_ids=g.positions(draw, b, t, p.n_positions), cache_length=0)
        return g.case("learned.gpt2", p, x, ["LEARNED-GPT2-SUM"])
    x["cache_length"] = _cache(draw, t, p.n_positions)
    return g.case("learned.gpt2", p, x, ["LEARNED-GPT2-POSITIONS", "LEARNED-GPT2-SUM"])


def _bert_like(draw, model: str, rows: int, width: int, tt: int) -> dict:
    return {"word_embeddings": g.values((VOCAB, width)), "position_embeddings": g.values((rows, width)),
            "token_type_embeddings": g.values((tt, width)), "layer_norm_weight": g.values((width,), 0.5, 1.0),
            "layer_norm_bias": g.values((width,), 0.25)}


@generator("learned.bert")
def gen_bert(draw):
    M = "BertEmbeddingParams"
    p = BertEmbeddingParams(vocab_size=VOCAB, max_position_embeddings=_rows_len(draw, M, "max_position_embeddings"),
                            type_vocab_size=g.field(draw, M, "type_vocab_size", hi=4), hidden_size=_width(draw, M, "hidden_size"),
                            layer_norm_eps=g.field(draw, M, "layer_norm_eps"))
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    x = {**_bert_like(draw, M, p.max_position_embeddings, p.hidden_size, p.type_vocab_size), "input_ids": g.ids((b, t), VOCAB)}
    cl = ["LEARNED-BERT-SUM", "LEARNED-BERT-POSITIONS"]
    if draw(st.booleans()):
        x["token_type_ids"] = g.ids((b, t), p.type_vocab_size)
        cl.append("LEARNED-BERT-TOKEN-TYPE")
    if draw(st.booleans()):
        x.update(position_ids=g.positions(draw, b, t, p.max_position_embeddings), cache_length=0)
    else:
        x["cache_length"] = _cache(draw, t, p.max_position_embeddings)
    return g.case("learned.bert", p, x, cl)


def _roberta_params(draw) -> RobertaEmbeddingParams:
    M = "RobertaEmbeddingParams"
    return RobertaEmbeddingParams(vocab_size=VOCAB, max_position_embeddings=g.size(draw, M, "max_position_embeddings", lo=16, hi=1024),
                                  type_vocab_size=g.field(draw, M, "type_vocab_size", hi=4),
                                  hidden_size=_width(draw, M, "hidden_size"), layer_norm_eps=g.field(draw, M, "layer_norm_eps"),
                                  padding_idx=g.field(draw, M, "padding_idx"))


def _padded_ids(draw, b: int, t: int, pad: int) -> np.ndarray:
    m = g.mask(draw, b, t)
    ids = np.asarray([[draw(st.integers(0, VOCAB - 1)) for _ in range(t)] for _ in range(b)], np.int64)
    ids = np.where(ids == pad, (pad + 1) % VOCAB, ids)
    return np.where(m == 1, ids, pad).astype(np.int64)


@generator("learned.roberta_positions")
def gen_roberta_positions(draw):
    p = _roberta_params(draw)
    b, t = g.shape(draw, (1, 2, 3), (1, 4, 6))
    x = {"input_ids": _padded_ids(draw, b, t, p.padding_idx),
         "cache_length": _cache(draw, t, p.max_position_embeddings - p.padding_idx - 1)}
    return g.case("learned.roberta_positions", p, x, ["LEARNED-ROBERTA-POSITIONS"])


@generator("learned.roberta")
def gen_roberta(draw):
    p = _roberta_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    x = {**_bert_like(draw, "RobertaEmbeddingParams", p.max_position_embeddings, p.hidden_size, p.type_vocab_size),
         "input_ids": _padded_ids(draw, b, t, p.padding_idx),
         "cache_length": _cache(draw, t, p.max_position_embeddings - p.padding_idx - 1)}
    return g.case("learned.roberta", p, x, ["LEARNED-ROBERTA-POSITIONS"])


@generator("learned.bart_embeddings")
def gen_bart(draw):
    M = "BartEmbeddingParams"
    p = BartEmbeddingParams(max_position_embeddings=_rows_len(draw, M, "max_position_embeddings"),
                            hidden_size=_width(draw, M, "hidden_size"))
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    cache = _cache(draw, t, p.max_position_embeddings)
    x = {"table": g.values((p.max_position_embeddings + 2, p.hidden_size)), "input_ids": g.ids((b, t), VOCAB),
         "attention_mask": g.mask(draw, b, cache + t), "cache_length": cache}
    return g.case("learned.bart_embeddings", p, x, ["LEARNED-BART-POSITIONS"])


def _opt_params(draw) -> OPTEmbeddingParams:
    M = "OPTEmbeddingParams"
    return OPTEmbeddingParams(max_position_embeddings=_rows_len(draw, M, "max_position_embeddings"),
                              hidden_size=_width(draw, M, "hidden_size"))


def _opt_mask(draw, p: OPTEmbeddingParams) -> dict:
    b, t = g.shape(draw, (1, 2, 3), (1, 3, 5))
    cache = _cache(draw, t, p.max_position_embeddings)
    return {"attention_mask": g.mask(draw, b, cache + t), "cache_length": cache}


@generator("learned.opt_positions")
def gen_opt_positions(draw):
    p = _opt_params(draw)
    return g.case("learned.opt_positions", p, _opt_mask(draw, p), ["LEARNED-OPT-POSITIONS"])


@generator("learned.opt_rows")
def gen_opt_rows(draw):
    p = _opt_params(draw)
    b, t = g.shape(draw, (1, 2), (1, 3, 5))
    pos = g.positions(draw, b, t, p.max_position_embeddings)
    pad = np.asarray([[draw(st.integers(0, 3)) == 0 for _ in range(t)] for _ in range(b)])
    return g.case("learned.opt_rows", p, {"positions": np.where(pad, -1, pos).astype(np.int64)}, ["LEARNED-OPT-OFFSET"])


@generator("learned.opt_embeddings")
def gen_opt_embeddings(draw):
    p = _opt_params(draw)
    x = {"table": g.values((p.max_position_embeddings + 2, p.hidden_size)), **_opt_mask(draw, p)}
    return g.case("learned.opt_embeddings", p, x, ["LEARNED-OPT-POSITIONS", "LEARNED-OPT-OFFSET"])
