"""RoBERTa (LEARNED-ROBERTA-POSITIONS) and BART (LEARNED-BART-POSITIONS): the reference against
published figures (encodings-facts B.3-B.5) and the real transformers code run in the test
(``create_position_ids_from_input_ids``, ``RobertaEmbeddings``, ``BartLearnedPositionalEmbedding``);
the mutants; the HF wrapper is real.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers.models.bart.modeling_bart as hf_bart
import transformers.models.roberta.modeling_roberta as hf_roberta
from transformers.models.roberta.configuration_roberta import RobertaConfig

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.adapters.torch_adapter import TorchAdapter
from posenc.reference import learned
from posenc.spec import load_spec
from posenc.spec.errors import PositionOutOfRange
from posenc.spec.models import BartEmbeddingParams, RobertaEmbeddingParams
from posenc import registry

SPEC = load_spec()
FIG_IDS = np.array([[1, 1, 0, 9, 2], [0, 9, 9, 9, 2]])


# ---- figures and hand-derived values ---------------------------------------------------------------


def test_roberta_positions_figures():
    """encodings-facts B.3 [RUN]: pad 1 -> [[1,1,2,3,4],[2,3,4,5,6]]."""
    assert learned.roberta_positions(FIG_IDS, 1).tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]]
    # real tokens start at padding_idx + 1, whatever the pad id
    assert learned.roberta_positions(np.array([[0, 0, 5, 6]]), 0).tolist() == [[0, 0, 1, 2]]
    # after a cache, HF adds cache_length (which counts cached pads too): [[1, 1, 7], [7, 8, 1]]
    assert learned.roberta_positions(np.array([[1, 1, 7], [7, 8, 1]]), 1, 5).tolist() == [[1, 1, 7], [7, 8, 1]]


def test_roberta_real_shapes_and_the_config_pitfall():
    p = RobertaEmbeddingParams(vocab_size=50265)  # roberta-base: 514 x 768, type_vocab 1, eps 1e-5, pad 1
    assert (p.max_position_embeddings, p.hidden_size, p.type_vocab_size, p.layer_norm_eps, p.padding_idx) == \
        (514, 768, 1, 1e-5, 1)
    c = RobertaConfig()  # HF's defaults are BERT's (encodings-facts B.3 pitfall)
    assert (c.max_position_embeddings, c.type_vocab_size, c.layer_norm_eps) == (512, 2, 1e-12)
    with pytest.raises(ValueError, match="not a row"):
        RobertaEmbeddingParams(vocab_size=5, max_position_embeddings=4, padding_idx=4)


def test_roberta_embeddings_are_bert_with_roberta_rows():
    rng = np.random.default_rng(0)
    w = [rng.normal(size=s) for s in ((20, 6), (12, 6), (1, 6), (6,), (6,))]
    ids = np.array([[1, 1, 4, 5], [3, 4, 5, 1]])
    got = learned.roberta_embeddings(*w, ids, padding_idx=1, layer_norm_eps=1e-5)
    rows = np.array([[1, 1, 2, 3], [2, 3, 4, 1]])
    want = learned.bert_embeddings(*w, ids, position_ids=rows, layer_norm_eps=1e-5)
    np.testing.assert_array_equal(got, want)


def test_bart_rows_ignore_padding():
    assert learned.bart_rows(2, 5).tolist() == [[2, 3, 4, 5, 6]] * 2
    assert learned.bart_rows(1, 3, 1021).tolist() == [[1023, 1024, 1025]]
    p = BartEmbeddingParams()  # bart-base: 1024 + 2 = 1026 rows x 768
    assert (p.num_rows, p.hidden_size) == (1026, 768)
    table = np.arange(1026, dtype=np.float64)[:, None]
    with pytest.raises(PositionOutOfRange):
        learned.bart_embeddings(table, np.zeros((1, 2)), 1023)  # row 1026 is past the end
    assert learned.bart_embeddings(table, np.zeros((1, 1)), 1023)[0, 0, 0] == 1025


# ---- the real upstream code -----------------------------------------------------------------------


@pytest.mark.parametrize("cache_length", [0, 1, 7, 500])
@pytest.mark.parametrize("pad", [0, 1, 2])
def test_roberta_create_position_ids_matches(pad, cache_length):
    ids = np.random.default_rng(pad * 1000 + cache_length).integers(0, 4, size=(6, 11))
    got = hf_roberta.RobertaEmbeddings.create_position_ids_from_input_ids(
        torch.from_numpy(ids), pad, cache_length).numpy()
    np.testing.assert_array_equal(got, learned.roberta_positions(ids, pad, cache_length))
    assert hf_roberta.RobertaEmbeddings.create_position_ids_from_input_ids(
        torch.from_numpy(FIG_IDS), 1).tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]]


@pytest.mark.parametrize("hidden,cache_length", [(8, 0), (7, 3), (768, 0), (768, 500)])
def test_roberta_embeddings_match(hidden, cache_length):
    cfg = RobertaConfig(vocab_size=20, hidden_size=hidden, max_position_embeddings=514, type_vocab_size=1,
                        layer_norm_eps=1e-5, pad_token_id=1, hidden_dropout_prob=0.0, num_hidden_layers=1,
                        num_attention_heads=1)
    emb = hf_roberta.RobertaEmbeddings(cfg).to(torch.float64).eval()
    rng = np.random.default_rng(hidden)
    w = {"word_embeddings": rng.normal(size=(20, hidden)), "position_embeddings": rng.normal(size=(514, hidden)),
         "token_type_embeddings": rng.normal(size=(1, hidden)), "LayerNorm.weight": rng.normal(size=hidden),
         "LayerNorm.bias": rng.normal(size=hidden)}
    with torch.no_grad():
        for name, v in w.items():
            emb.get_parameter(name + ("" if name.startswith("LayerNorm") else ".weight")).copy_(torch.from_numpy(v))
        ids = np.array([[1, 1, 0, 9, 2, 5], [0, 9, 9, 9, 2, 1]])
        got = emb(input_ids=torch.from_numpy(ids), cache_length=cache_length).numpy()
    ref = learned.roberta_embeddings(w["word_embeddings"], w["position_embeddings"], w["token_type_embeddings"],
                                     w["LayerNorm.weight"], w["LayerNorm.bias"], ids, cache_length=cache_length,
                                     padding_idx=1, layer_norm_eps=1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cache_length", [0, 3, 1019])
def test_bart_learned_positional_embedding_matches(cache_length):
    emb = hf_bart.BartLearnedPositionalEmbedding(1024, 1).to(torch.float64)  # row r holds r
    with torch.no_grad():
        emb.weight.copy_(torch.arange(1026, dtype=torch.float64)[:, None])
    ids = torch.tensor([[1, 1, 5, 6, 7], [5, 6, 7, 8, 9]])  # left padding is not read
    got = emb(ids, cache_length=cache_length)[..., 0].to(torch.int64).numpy()
    np.testing.assert_array_equal(got, learned.bart_rows(2, 5, cache_length))


# ---- mutants -------------------------------------------------------------------------------------

NEW_LEARNED_DIVS = ["DIV-LEARNED-ROBERTA-ARANGE", "DIV-LEARNED-ROBERTA-AS-BERT", "DIV-LEARNED-BART-MASK-RULE",
                    "DIV-LEARNED-BART-NO-OFFSET"]


def test_mutants_are_the_wrong_behaviour():
    p = RobertaEmbeddingParams(vocab_size=20)
    x = {"input_ids": FIG_IDS, "cache_length": np.asarray(0)}
    assert registry.run_mutant("roberta_arange_positions", "learned.roberta_positions", p, x)["positions"].tolist() == \
        [[2, 3, 4, 5, 6]] * 2
    assert registry.run_mutant("roberta_as_bert", "learned.roberta_positions", p, x)["positions"].tolist() == \
        [[0, 1, 2, 3, 4]] * 2
    table = np.arange(1026, dtype=np.float64)[:, None]
    bx = {"table": table, "input_ids": np.zeros((2, 5), np.int64),
          "attention_mask": np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), "cache_length": np.asarray(0)}
    opt = registry.run_mutant("bart_opt_mask_rule", "learned.bart_embeddings", BartEmbeddingParams(), bx)["embeddings"]
    assert opt[..., 0].tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 5, 6]]
    no = registry.run_mutant("bart_no_offset", "learned.bart_embeddings", BartEmbeddingParams(), bx)["embeddings"]
    assert no[..., 0].tolist() == [[0, 1, 2, 3, 4]] * 2


def test_torch_port_rows_are_range_checked():
    t = TorchAdapter()
    f = t.bart_embeddings(BartEmbeddingParams(max_position_embeddings=4, hidden_size=2),
                          {"table": torch.zeros(6, 2)}, dtype="float32", device="cpu")
    assert f(torch.zeros(1, 1, dtype=torch.long), cache_length=3).shape == (1, 1, 2)
    with pytest.raises(PositionOutOfRange):
        f(torch.zeros(1, 2, dtype=torch.long), cache_length=3)


# ---- the HF wrapper really runs transformers ------------------------------------------------------


def test_patched_roberta_positions_fail_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "roberta").ret == 0

    def sequential(input_ids, padding_idx, cache_length=0):  # the inputs_embeds rule
        B, T = input_ids.shape
        return (torch.arange(padding_idx + 1, T + padding_idx + 1) + cache_length).expand(B, T)

    monkeypatch.setattr(hf_roberta.RobertaEmbeddings, "create_position_ids_from_input_ids", staticmethod(sequential))
    r = run_suite("hf-transformers", "-k", "roberta")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-LEARNED-ROBERTA-ARANGE (violates" in out, out[-2000:]
    assert "test_golden[float32-roberta-base-embeddings@" in out  # RobertaEmbeddings.forward goes through it too


def test_patched_bart_offset_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "bart").ret == 0
    orig = hf_bart.BartLearnedPositionalEmbedding.forward

    def no_offset(self, input_ids, cache_length=0, position_ids=None):
        self.offset = 0
        try:
            return orig(self, input_ids, cache_length, position_ids)
        finally:
            self.offset = 2

    monkeypatch.setattr(hf_bart.BartLearnedPositionalEmbedding, "forward", no_offset)
    r = run_suite("hf-transformers", "-k", "bart-base-embeddings and test_golden and not cache")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-LEARNED-BART-NO-OFFSET (violates" in out, out[-2000:]
