"""The learned absolute family (LEARNED-*): references and error scales of the learned.*
operations (GPT-2, BERT, OPT, RoBERTa, BART, plain lookups), the mutants of its divergences and
its golden cases; the math is :mod:`posenc.reference.learned`."""

from __future__ import annotations

import numpy as np

from posenc.families import Case, Gen, pos
from posenc.reference import learned, position_ids
from posenc.spec.models import (
    BartEmbeddingParams,
    BertEmbeddingParams,
    GPT2EmbeddingParams,
    LookupParams,
    OPTEmbeddingParams,
    RobertaEmbeddingParams,
)
from posenc.spec.registry import model_params

from . import add_cases, case_clauses, mutant, no_form, reference
from ._common import exact_scales, optional, run, scalar


@case_clauses("learned")
def learned_clauses(p, op: str) -> list[str]:
    """The clauses a learned case exercises beyond its own: BERT's and RoBERTa's sums add a token-type
    row, and BERT's reads its positions."""
    return {"learned.bert": ["LEARNED-BERT-POSITIONS", "LEARNED-BERT-TOKEN-TYPE"],
            "learned.roberta": ["LEARNED-BERT-TOKEN-TYPE"]}.get(op, [])



def _lookup(p, x):
    return {"embeddings": learned.lookup(x["table"], x["rows"])}


def _gpt2(p, x):
    return {"embeddings": learned.gpt2_embeddings(
        x["wte"], x["wpe"], x["input_ids"], optional(x, "position_ids"), scalar(x, "cache_length"))}


def _gpt2_scales(p, x):
    ids = np.asarray(x["input_ids"])
    pos = x.get("position_ids")
    if pos is None:
        pos = position_ids.decode(ids.shape[0], ids.shape[1], scalar(x, "cache_length"))
    mag = np.abs(np.asarray(x["wte"])[ids]) + np.abs(np.asarray(x["wpe"])[pos])
    return {"embeddings": (mag, 0 * mag)}


def _bert(p, x):
    return {"embeddings": learned.bert_embeddings(
        x["word_embeddings"], x["position_embeddings"], x["token_type_embeddings"],
        x["layer_norm_weight"], x["layer_norm_bias"], x["input_ids"],
        optional(x, "token_type_ids"), optional(x, "position_ids"), scalar(x, "cache_length"),
        p.layer_norm_eps)}


def _bert_scales(p, x, default_positions=None):
    ids = np.asarray(x["input_ids"])
    tt = x.get("token_type_ids")
    tt = np.zeros_like(ids) if tt is None else np.asarray(tt)
    pos = x.get("position_ids")
    if pos is None and default_positions is not None:
        pos = default_positions(p, x)
    elif pos is None:
        pos = position_ids.decode(ids.shape[0], ids.shape[1], scalar(x, "cache_length"))
    parts = [np.asarray(x["word_embeddings"])[ids], np.asarray(x["token_type_embeddings"])[tt],
             np.asarray(x["position_embeddings"])[pos]]
    s = sum(parts)
    sigma = np.sqrt(s.var(-1, keepdims=True) + p.layer_norm_eps)
    # Rounding of the summands (relative to their magnitude) passes through 1/sigma and gamma;
    # the output itself is rounded once more.
    mag = sum(np.abs(t) for t in parts).max(-1, keepdims=True)
    y = learned.layer_norm(s, x["layer_norm_weight"], x["layer_norm_bias"], p.layer_norm_eps)
    gamma, beta = np.abs(np.asarray(x["layer_norm_weight"])), np.asarray(x["layer_norm_bias"])
    ds = gamma * mag / sigma + np.abs(y) + np.abs(beta)
    # The mean and the variance are sums over the n = hidden_size features: in any order they carry
    # (n - 1) u of their summands' magnitudes (u = eps_acc / 2), which reach y through 1/sigma and
    # gamma (the mean's) and through y - beta's relative error (half the variance's).
    n = s.shape[-1]
    acc = (n - 1) / 2 * (gamma * np.abs(s).mean(-1, keepdims=True) / sigma + np.abs(y - beta) / 2)
    return {"embeddings": (ds, 0 * ds, acc)}


def _opt_positions(p, x):
    return {"positions": learned.opt_positions(x["attention_mask"], scalar(x, "cache_length"))}


def _opt_rows(p, x):
    return {"rows": learned.opt_rows(x["positions"])}


def _opt_embed(p, x):
    return {"embeddings": learned.opt_embeddings(x["table"], x["attention_mask"], scalar(x, "cache_length"))}


def _roberta_rows(p, x):
    return learned.roberta_positions(x["input_ids"], p.padding_idx, scalar(x, "cache_length"))


def _roberta_positions(p, x):
    return {"positions": _roberta_rows(p, x)}


def _roberta(p, x):
    return {"embeddings": learned.roberta_embeddings(
        x["word_embeddings"], x["position_embeddings"], x["token_type_embeddings"],
        x["layer_norm_weight"], x["layer_norm_bias"], x["input_ids"],
        optional(x, "token_type_ids"), optional(x, "position_ids"), scalar(x, "cache_length"),
        p.padding_idx, p.layer_norm_eps)}


def _roberta_scales(p, x):
    return _bert_scales(p, x, _roberta_rows)


def _bart_embed(p, x):
    return {"embeddings": learned.bart_embeddings(x["table"], x["input_ids"], scalar(x, "cache_length"))}


reference("learned.lookup", scales=exact_scales(["embeddings"]))(_lookup)
reference("learned.gpt2", scales=_gpt2_scales)(_gpt2)
reference("learned.bert", scales=_bert_scales)(_bert)
reference("learned.opt_positions", scales=exact_scales([]))(_opt_positions)
reference("learned.opt_rows", scales=exact_scales([]))(_opt_rows)
reference("learned.opt_embeddings", scales=exact_scales(["embeddings"]))(_opt_embed)
reference("learned.roberta_positions", scales=exact_scales([]))(_roberta_positions)
reference("learned.roberta", scales=_roberta_scales)(_roberta)
reference("learned.bart_embeddings", scales=exact_scales(["embeddings"]))(_bart_embed)


@mutant("opt_no_offset", "learned.opt_rows", "learned.opt_embeddings")
def opt_no_offset(op, p, x, dtype=None):
    if op == "learned.opt_rows":
        return {"rows": np.asarray(x["positions"], np.int64)}
    rows = learned.opt_positions(x["attention_mask"], int(x["cache_length"]))
    t = np.asarray(x["table"], np.float64)
    return {"embeddings": t[rows]}  # numpy wraps -1 to the last row, as a careless port would


@mutant("opt_arange_positions", "learned.opt_positions", "learned.opt_embeddings")
def opt_arange_positions(op, p, x, dtype=None):
    m = np.asarray(x["attention_mask"])
    cl = int(x["cache_length"])
    pos = position_ids.prefill(*m.shape)[:, cl:]
    if op == "learned.opt_positions":
        return {"positions": pos}
    return {"embeddings": learned.lookup(x["table"], learned.opt_rows(pos))}


@mutant("lookup_clamped", "learned.lookup", "learned.opt_embeddings")
def lookup_clamped(op, p, x, dtype=None):
    """Rows clamped into [0, N-1]: equals the reference in range, reads the end row out of range."""
    t = np.asarray(x["table"], np.float64)
    if op == "learned.lookup":
        rows = np.asarray(x["rows"])
    else:
        rows = learned.opt_rows(learned.opt_positions(x["attention_mask"], int(x["cache_length"])))
    return {"embeddings": t[np.clip(rows, 0, t.shape[0] - 1)]}


@mutant("lookup_take_unchecked", "learned.lookup", "learned.gpt2")
def lookup_take_unchecked(op, p, x, dtype=None):
    """An unchecked ``take`` (keras ``ops.take``): a negative row wraps (-1 reads the last row) and
    a row past the end reads NaN (JAX's fill mode); rows in range equal the reference."""
    def take(table, rows):
        t = np.asarray(table, np.float64)
        r = np.asarray(rows, np.int64)
        n = t.shape[0]
        wrapped = np.where((r < 0) & (r >= -n), r + n, r)
        bad = (wrapped < 0) | (wrapped >= n)
        out = t[np.clip(wrapped, 0, n - 1)]
        out[bad] = np.nan
        return out
    if op == "learned.lookup":
        return {"embeddings": take(x["table"], x["rows"])}
    if x.get("position_ids") is None:
        return None  # default positions are a slice, not a take
    return {"embeddings": take(x["wte"], x["input_ids"]) + take(x["wpe"], x["position_ids"])}


@mutant("opt_offset_twice", "learned.opt_rows", "learned.opt_embeddings")
def opt_offset_twice(op, p, x, dtype=None):
    """OPT's +2 applied twice (a port adds it to positions that already carry it): rows = position + 4."""
    if op == "learned.opt_rows":
        return {"rows": learned.opt_rows(x["positions"]) + learned.OPT_OFFSET}
    rows = learned.opt_rows(learned.opt_positions(x["attention_mask"], int(x["cache_length"]))) + learned.OPT_OFFSET
    t = np.asarray(x["table"], np.float64)
    if rows.max() >= t.shape[0]:
        return None  # past the table: an implementation raises there
    return {"embeddings": t[rows]}


@mutant("learned_cache_ignored", "learned.gpt2", "learned.bert", "learned.bart_embeddings",
        "learned.roberta_positions", "learned.roberta")
def learned_cache_ignored(op, p, x, dtype=None):
    """Default positions computed as if nothing were cached (cache_length taken as 0): after a
    cache the rows restart at the first row (GPT-2 / BERT 0, BART 2, RoBERTa padding_idx + 1)."""
    if int(x.get("cache_length", 0)) == 0 or x.get("position_ids") is not None:
        return None
    return run(op, p, {**x, "cache_length": np.asarray(0)})


@mutant("bert_token_type_ignored", "learned.bert", "learned.roberta")
def bert_token_type_ignored(op, p, x, dtype=None):
    tt = np.zeros_like(np.asarray(x["token_type_embeddings"]))
    return run(op, p, {**x, "token_type_embeddings": tt})


@mutant("learned_positions_off_by_one", "learned.gpt2", "learned.bert")
def learned_positions_off_by_one(op, p, x, dtype=None):
    if x.get("position_ids") is not None:
        return run(op, p, x)
    return run(op, p, {**x, "cache_length": np.asarray(int(x["cache_length"]) + 1)})


def _roberta_with_rows(op, p, x, rows):
    if op == "learned.roberta_positions":
        return {"positions": rows}
    if x.get("position_ids") is not None:
        return None  # explicit position_ids: the default rule is not exercised
    if rows.min() < 0 or rows.max() >= np.shape(x["position_embeddings"])[0]:
        return None  # past the table: an implementation raises there
    return run(op, p, {**x, "position_ids": rows})


@mutant("roberta_offset_twice", "learned.roberta_positions", "learned.roberta")
def roberta_offset_twice(op, p, x, dtype=None):
    """RoBERTa's padding_idx + 1 start applied twice (rows that already count from padding_idx + 1
    shifted by padding_idx + 1 again, as a BART-style offset layered on them): real tokens start at
    2 padding_idx + 2, pads read 2 padding_idx + 1."""
    rows = _roberta_rows(p, x) + p.padding_idx + 1
    return _roberta_with_rows(op, p, x, rows)


@mutant("roberta_arange_positions", "learned.roberta_positions", "learned.roberta")
def roberta_arange_positions(op, p, x, dtype=None):
    ids = np.asarray(x["input_ids"])
    rows = position_ids.decode(*ids.shape, int(x["cache_length"])) + p.padding_idx + 1
    return _roberta_with_rows(op, p, x, rows)


@mutant("roberta_as_bert", "learned.roberta_positions", "learned.roberta")
def roberta_as_bert(op, p, x, dtype=None):
    ids = np.asarray(x["input_ids"])
    return _roberta_with_rows(op, p, x, position_ids.decode(*ids.shape, int(x["cache_length"])))


def _bart_with_rows(p, x, rows):
    t = np.asarray(x["table"], np.float64)
    if rows.min() < 0 or rows.max() >= t.shape[0]:
        return None  # an implementation raises there
    return {"embeddings": t[rows]}


@mutant("bart_opt_mask_rule", "learned.bart_embeddings")
def bart_opt_mask_rule(op, p, x, dtype=None):
    rows = learned.opt_rows(learned.opt_positions(x["attention_mask"], int(x["cache_length"])))
    return _bart_with_rows(p, x, rows)


@mutant("bart_no_offset", "learned.bart_embeddings")
def bart_no_offset(op, p, x, dtype=None):
    ids = np.asarray(x["input_ids"])
    return _bart_with_rows(p, x, position_ids.decode(*ids.shape, int(x["cache_length"])))


_PAST_THE_TABLE = ("rows past the table make the reference raise (LEARNED-ROW-RANGE): no golden of this operation holds "
                   "a value to compare; learned.lookup's cases and row_range check show it")
for _op in ("learned.bert", "learned.roberta", "learned.bart_embeddings"):
    no_form(_op, _PAST_THE_TABLE, "lookup_clamped", "lookup_take_unchecked")
no_form("learned.gpt2", _PAST_THE_TABLE, "lookup_clamped")
no_form("learned.opt_embeddings", _PAST_THE_TABLE, "lookup_take_unchecked")
no_form("learned.roberta", "RoBERTa's rows have their own off-by-one divergences (DIV-LEARNED-ROBERTA-*); this one is "
        "GPT-2 / BERT's cache_length + 1", "learned_positions_off_by_one")
no_form("learned.opt_rows", "opt_rows maps the positions it is given; counting them by arange is opt_positions' bug",
        "opt_arange_positions")


# ---- golden cases ----------------------------------------------------------------------------
# ---- learned ------------------------------------------------------------------------------
_GPT2 = model_params("gpt2", vocab_size=97)  # token tables are data, not under test
_GPT2_W = {"wte": Gen((97, 768)), "wpe": Gen((1024, 768))}
_BERT = model_params("bert-base", vocab_size=89)
_BERT_W = {"word_embeddings": Gen((89, 768)), "position_embeddings": Gen((512, 768)),
           "token_type_embeddings": Gen((2, 768)), "layer_norm_weight": Gen((768,), scale=0.5, offset=1.0),
           "layer_norm_bias": Gen((768,), scale=0.25)}
_OPT = model_params("opt-125m")
_OPT_W = {"table": Gen((2050, 768))}
add_cases(
    Case("gpt2-small-prefill", "learned.gpt2", ("LEARNED-GPT2-SUM", "LEARNED-GPT2-POSITIONS"), _GPT2,
         {**_GPT2_W, "input_ids": Gen((2, 5), "ids", high=97), "cache_length": 0},
         "default position_ids = arange(T)"),
    Case("gpt2-small-cache", "learned.gpt2", ("LEARNED-GPT2-POSITIONS",), _GPT2,
         {**_GPT2_W, "input_ids": Gen((3, 4), "ids", high=97), "cache_length": 1020},
         "default position_ids after 1020 cached tokens reach the last row 1023"),
    Case("gpt2-small-explicit", "learned.gpt2", ("LEARNED-GPT2-SUM",), _GPT2,
         {**_GPT2_W, "input_ids": Gen((2, 3), "ids", high=97),
          "position_ids": pos([5, 0, 1023], [1, 2, 3]), "cache_length": 0}),
    Case("bert-base-token-types", "learned.bert", ("LEARNED-BERT-SUM", "LEARNED-BERT-TOKEN-TYPE"), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 6), "ids", high=89),
          "token_type_ids": pos([0, 0, 0, 1, 1, 1], [0, 1, 0, 1, 1, 0]), "cache_length": 0}),
    Case("bert-base-default-token-types", "learned.bert", ("LEARNED-BERT-TOKEN-TYPE", "LEARNED-BERT-POSITIONS"),
         _BERT, {**_BERT_W, "input_ids": Gen((3, 4), "ids", high=89), "cache_length": 0},
         "token_type_ids omitted: zeros"),
    Case("bert-base-last-positions", "learned.bert", ("LEARNED-BERT-POSITIONS", "LEARNED-BERT-SUM"), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 3), "ids", high=89),
          "token_type_ids": pos([1, 1, 0], [0, 1, 1]), "position_ids": pos([509, 510, 511], [0, 255, 3]),
          "cache_length": 0}),
    Case("gpt2-small-last-row", "learned.gpt2", ("LEARNED-GPT2-SUM", "LEARNED-ROW-RANGE"), _GPT2,
         {**_GPT2_W, "input_ids": Gen((1, 2), "ids", high=97), "position_ids": pos([1023, 0]), "cache_length": 0},
         "the last valid row 1023; 1024 must raise"),
    Case("bert-base-cache", "learned.bert", ("LEARNED-BERT-POSITIONS",), _BERT,
         {**_BERT_W, "input_ids": Gen((2, 3), "ids", high=89), "cache_length": 509},
         "default positions after 509 cached tokens: 509, 510, 511"),
    Case("opt-125m-positions", "learned.opt_positions", ("LEARNED-OPT-POSITIONS",), _OPT,
         {"attention_mask": pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]), "cache_length": 0},
         "left-padded, full and right-padded rows"),
    Case("opt-125m-positions-cache", "learned.opt_positions", ("LEARNED-OPT-POSITIONS",), _OPT,
         {"attention_mask": pos([0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]), "cache_length": 5},
         "only the last column survives the slice"),
    Case("opt-125m-rows", "learned.opt_rows", ("LEARNED-OPT-OFFSET",), _OPT,
         {"positions": pos([-1, -1, 0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, -1, -1], [2044, 2045, 2046, 2047, -1])}),
    Case("opt-125m-embeddings", "learned.opt_embeddings", ("LEARNED-OPT-POSITIONS", "LEARNED-OPT-OFFSET"), _OPT,
         {**_OPT_W, "attention_mask": pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]), "cache_length": 0},
         "rows [[1,1,2,3,4],[2,3,4,5,6],[2,3,4,1,1]]"),
    Case("opt-125m-embeddings-end", "learned.opt_embeddings", ("LEARNED-OPT-OFFSET", "LEARNED-ROW-RANGE"), _OPT,
         {**_OPT_W, "attention_mask": np.ones((1, 2048), np.int64), "cache_length": 2044},
         "2048 real tokens: the last row 2049 is valid"),
    Case("lookup-gpt2-wpe", "learned.lookup", ("LEARNED-ROW-RANGE",), LookupParams(num_rows=1024, dim=768),
         {"table": Gen((1024, 768)), "rows": pos([0, 1023, 5], [1022, 0, 1023])},
         "first and last valid rows"),
)

# ---- RoBERTa and BART (LEARNED-ROBERTA-POSITIONS, LEARNED-BART-POSITIONS) ----------------------
# roberta-base: 514 x 768 positions, type_vocab_size 1, layer_norm_eps 1e-5, pad 1; bart-base:
# max_position_embeddings 1024 (+ 2 = 1026 rows) x 768 (published config.json files).
_RB_IDS = pos([1, 1, 0, 9, 2], [0, 9, 9, 9, 2])  # pad 1 -> [[1,1,2,3,4],[2,3,4,5,6]]
_RB = model_params("roberta-base", vocab_size=89)
_RB_W = {"word_embeddings": Gen((89, 768)), "position_embeddings": Gen((514, 768)),
         "token_type_embeddings": Gen((1, 768)), "layer_norm_weight": Gen((768,), scale=0.5, offset=1.0),
         "layer_norm_bias": Gen((768,), scale=0.25)}
_BART = model_params("bart-base")
_BART_W = {"table": Gen((1026, 768))}
add_cases(
    Case("roberta-base-positions", "learned.roberta_positions", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {"input_ids": _RB_IDS, "cache_length": 0}, "pad 1: [[1,1,2,3,4],[2,3,4,5,6]]"),
    Case("roberta-base-positions-cache", "learned.roberta_positions", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {"input_ids": pos([1, 1, 7], [7, 8, 1]), "cache_length": 5}, "[[1, 1, 7], [7, 8, 1]]"),
    Case("roberta-base-embeddings", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {**_RB_W, "input_ids": pos([1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1]), "cache_length": 0},
         "rows [[1,1,2,3,4,5],[2,3,4,5,6,1]]"),
    Case("roberta-base-embeddings-cache", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS", "LEARNED-ROW-RANGE"), _RB,
         {**_RB_W, "input_ids": pos([0, 5, 7], [1, 1, 4]), "cache_length": 509},
         "rows [[511, 512, 513], [1, 1, 511]]: the last row 513 is valid"),
    Case("bart-base-embeddings", "learned.bart_embeddings", ("LEARNED-BART-POSITIONS",), _BART,
         {**_BART_W, "input_ids": Gen((2, 5), "ids", high=50),
          "attention_mask": pos([0, 0, 1, 1, 1], [1, 1, 1, 1, 1]), "cache_length": 0},
         "rows [[2..6], [2..6]]: the left padding is ignored"),
    Case("bart-base-embeddings-cache", "learned.bart_embeddings", ("LEARNED-BART-POSITIONS", "LEARNED-ROW-RANGE"),
         _BART, {**_BART_W, "input_ids": Gen((2, 4), "ids", high=50),
                 "attention_mask": np.asarray([[0] * 3 + [1] * 1021, [1] * 1024], np.int64), "cache_length": 1020},
         "after 1020 cached slots (one row left-padded) rows 1022 .. 1025 reach the last row"),
)

# ---- small configurations (every parameter field at a second, non-default value) --------------
_GPT2_TINY = GPT2EmbeddingParams(vocab_size=50, n_positions=64, n_embd=16)
_BERT_TINY = BertEmbeddingParams(vocab_size=40, max_position_embeddings=128, type_vocab_size=3, hidden_size=32,
                                 layer_norm_eps=1e-6)
_RB_PAD0 = RobertaEmbeddingParams(vocab_size=40, max_position_embeddings=34, type_vocab_size=2, hidden_size=16,
                                  layer_norm_eps=1e-12, padding_idx=0)


def _ln(e):
    return {"layer_norm_weight": Gen((e,), scale=0.5, offset=1.0), "layer_norm_bias": Gen((e,), scale=0.25)}


add_cases(
    Case("gpt2-tiny-cache", "learned.gpt2", ("LEARNED-GPT2-SUM", "LEARNED-GPT2-POSITIONS", "LEARNED-ROW-RANGE"),
         _GPT2_TINY, {"wte": Gen((50, 16)), "wpe": Gen((64, 16)), "input_ids": Gen((2, 3), "ids", high=50),
                      "cache_length": 61}, "n_positions 64, n_embd 16: rows 61 .. 63 reach the last row"),
    Case("bert-tiny-cache", "learned.bert", ("LEARNED-BERT-SUM", "LEARNED-BERT-TOKEN-TYPE", "LEARNED-BERT-POSITIONS"),
         _BERT_TINY, {"word_embeddings": Gen((40, 32)), "position_embeddings": Gen((128, 32)),
                      "token_type_embeddings": Gen((3, 32)), **_ln(32), "input_ids": Gen((2, 4), "ids", high=40),
                      "token_type_ids": pos([0, 1, 2, 2], [2, 0, 1, 0]), "cache_length": 124},
         "3 token types, layer_norm_eps 1e-6, rows 124 .. 127 after a cache"),
    Case("opt-tiny-embeddings-cache", "learned.opt_embeddings", ("LEARNED-OPT-POSITIONS", "LEARNED-OPT-OFFSET",
                                                                  "LEARNED-ROW-RANGE"),
         OPTEmbeddingParams(max_position_embeddings=16, hidden_size=8),
         {"table": Gen((18, 8)), "attention_mask": np.asarray([[0] * 2 + [1] * 16, [1] * 16 + [0] * 2], np.int64),
          "cache_length": 15},
         "18-row table after 15 cached slots: rows [[15, 16, 17], [17, 1, 1]] reach the last row 17"),
    Case("roberta-pad0-embeddings-cache", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS", "LEARNED-ROW-RANGE"),
         _RB_PAD0, {"word_embeddings": Gen((40, 16)), "position_embeddings": Gen((34, 16)),
                    "token_type_embeddings": Gen((2, 16)), **_ln(16), "input_ids": pos([0, 5, 7, 9], [3, 4, 6, 0]),
                    "token_type_ids": pos([0, 1, 1, 0], [1, 1, 0, 0]), "cache_length": 30},
         "padding_idx 0: rows [[0, 31, 32, 33], [31, 32, 33, 0]], the last row 33 is valid"),
    Case("bart-tiny-embeddings-cache", "learned.bart_embeddings", ("LEARNED-BART-POSITIONS", "LEARNED-ROW-RANGE"),
         BartEmbeddingParams(max_position_embeddings=32, hidden_size=8),
         {"table": Gen((34, 8)), "input_ids": Gen((2, 3), "ids", high=50),
          "attention_mask": np.asarray([[0] + [1] * 31, [1] * 32], np.int64), "cache_length": 29},
         "34-row table: rows 31 .. 33 after 29 cached slots, the left padding ignored"),
)

# Embeddings at a trained model's scale (BertConfig / RobertaConfig initializer_range 0.02: entries of
# about +-0.06 here, the summed row's variance about 0.004): there layer_norm_eps moves y by about
# eps / (2 var), 1e-3 relative for RoBERTa's 1e-5 -- far above float32's rounding, the accumulation
# term included -- where the unit-scale goldens above (variance about 4) cannot tell 1e-5 from 1e-12
# at float32 (a hostile review).
_SMALL = 1 / 32


def _trained_scale(rows: int, types: int) -> dict:
    return {"word_embeddings": Gen((89, 768), scale=_SMALL), "position_embeddings": Gen((rows, 768), scale=_SMALL),
            "token_type_embeddings": Gen((types, 768), scale=_SMALL), **_ln(768)}


add_cases(
    Case("bert-base-trained-scale", "learned.bert", ("LEARNED-BERT-SUM", "LEARNED-BERT-POSITIONS"), _BERT,
         {**_trained_scale(512, 2), "input_ids": Gen((1, 3), "ids", high=89), "cache_length": 0},
         "BERT-base at a trained model's scale: layer_norm_eps 1e-12, where 1e-5 would move y by ~1e-3"),
    Case("roberta-base-trained-scale", "learned.roberta", ("LEARNED-ROBERTA-POSITIONS",), _RB,
         {**_trained_scale(514, 1), "input_ids": pos([0, 9, 2]), "cache_length": 0},
         "RoBERTa-base at a trained model's scale: layer_norm_eps 1e-5 (not BERT's 1e-12), eps inside the sqrt"),
)
