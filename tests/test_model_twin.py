"""The model tolerance rule's float64 twin (spec/model.yaml ``logits_bound``): a run below float64 has
its logit pairs judged under K_LOGITS[dtype] and, where the model offers a twin (the same weights and
code computed in float64), the twin's too, under the float64 bound; a twin that judged no pair or not
every one is reported."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from posenc import families  # noqa: E402
from posenc.adapters import load_model_adapter  # noqa: E402
from posenc.conformance import model_suite  # noqa: E402
from posenc.harness.model_judge import judge  # noqa: E402
from posenc.spec.tolerance import logits_bound  # noqa: E402

DECODE = "MODEL-DECODE"


@pytest.fixture(scope="module")
def llama():
    ad = load_model_adapter("hf:llama")
    return ad, model_suite.model_info(ad)


@pytest.fixture(scope="module")
def bf16_decode(llama):
    ad, info = llama
    return model_suite.run_scenario(ad, families.scenarios()[DECODE].name, "bfloat16", "eager", "cpu")


def _judge(trace, info, dtype="bfloat16"):
    return judge(families.scenarios()[DECODE], trace, info, dtype)


def _logits(v):
    return [p.text for p in v.problems if p.kind == "logits"]


def _bump(pair: dict, times: float, dtype: str) -> dict:
    """``pair`` with its ``b`` moved by ``times`` the ``dtype`` rule's bound at its first row."""
    b = pair["b"].copy()
    scale = np.maximum(np.abs(pair["a"]).max(-1), np.abs(b).max(-1))
    b[0, 0] += times * float(logits_bound(dtype, scale)[0])
    return {**pair, "b": b}


def test_the_twin_is_the_same_weights_in_float64_and_leaves_the_model_alone(llama):
    ad, _ = llama
    m = ad.build(dtype="bfloat16", device="cpu", attn_implementation="eager")
    t = m.float64_twin()
    assert t.dtype == torch.float64 and m.dtype == torch.bfloat16
    for (n, w), (n2, w2) in zip(m.model.named_parameters(), t.model.named_parameters()):
        assert n == n2 and w2.dtype == torch.float64 and torch.equal(w.double(), w2), n
    ids = np.array([[5, 6, 7, 8]])
    pos = np.arange(4)[None]
    t.forward(ids, position_ids=pos)
    assert t.probes() and all(r.get("q_in") is None or r["q_in"].dtype == torch.float64 for r in t.probes())
    m.forward(ids, position_ids=pos)  # the model's own probes still reach its own recorder
    assert m.probes() and all(r.get("q_in") is None or r["q_in"].dtype == torch.bfloat16 for r in m.probes())


def test_a_run_below_float64_carries_its_twins_pairs_and_passes(bf16_decode, llama):
    trace = bf16_decode
    assert len(trace["twin_pairs"]) == len(trace["pairs"]) > 0 and "twin_note" not in trace
    v = _judge(trace, llama[1])
    assert not v.problems and not v.unsupported


def test_the_twins_pairs_are_judged_under_the_float64_bound(bf16_decode, llama):
    """A difference the float64 bound does not allow, in the twin alone, fails the run and says where
    (the run's own bfloat16 pairs equal)."""
    trace = dict(bf16_decode)
    twins = list(trace["twin_pairs"])
    twins[1] = _bump(twins[1], 3.0, "float64")
    trace["twin_pairs"] = twins
    trace["pairs"] = [{**p, "b": p["a"].copy()} for p in trace["pairs"]]
    texts = _logits(_judge(trace, llama[1]))
    assert len(texts) == 1 and "(float64 twin)" in texts[0] and twins[1]["label"] in texts[0], texts


def test_the_runs_own_pairs_keep_their_bound_with_a_twin(bf16_decode, llama):
    """A bug on a path only the run's dtype takes (a fused half-precision decode kernel) is not in the
    twin: the run's bfloat16 pairs beyond K_LOGITS fail although the twin's agree (a hostile review)."""
    trace = dict(bf16_decode)
    trace["pairs"] = [_bump(trace["pairs"][0], 2.0, "bfloat16"), *trace["pairs"][1:]]
    texts = _logits(_judge(trace, llama[1]))
    assert len(texts) == 1 and "(float64 twin)" not in texts[0] and trace["pairs"][0]["label"] in texts[0]


def test_without_a_twin_the_calibrated_bound_judges_the_run(bf16_decode, llama):
    """An adapter whose model offers no twin: its bfloat16 pairs under K_LOGITS (within passes, beyond
    fails), and nothing reported as missing (the contract makes the twin optional)."""
    trace = {k: v for k, v in bf16_decode.items() if k != "twin_pairs"}
    assert not _judge(trace, llama[1]).problems
    trace["pairs"] = [_bump(trace["pairs"][0], 2.0, "bfloat16"), *trace["pairs"][1:]]
    v = _judge(trace, llama[1])
    assert len(_logits(v)) == 1 and "(float64 twin)" not in _logits(v)[0] and not v.unsupported


def test_a_twin_that_cannot_judge_is_reported(bf16_decode, llama):
    """Twin logits not finite (transformers' float64 eager attention on a left pad: DIV-MODEL-PADDED-ROWS-NAN),
    a twin pair of another label, or a twin that raised: the run says which pairs the twin left out."""
    trace = dict(bf16_decode)
    twins = list(trace["twin_pairs"])
    twins[0] = {**twins[0], "a": np.full_like(twins[0]["a"], np.nan)}
    twins[1] = {**twins[1], "label": "something else"}
    trace["twin_pairs"] = twins
    v = _judge(trace, llama[1])
    assert not v.problems
    note = " ".join(v.unsupported)
    assert f"2 of {len(twins)} pairs" in note and "the twin's logits are not finite" in note and "no twin pair" in note
    raised = {**{k: x for k, x in bf16_decode.items() if k != "twin_pairs"}, "twin_note": "the float64 twin raised X"}
    assert any("the float64 twin raised X" in u for u in _judge(raised, llama[1]).unsupported)


class _Model:
    def __init__(self, twin):
        self.twin = twin

    def float64_twin(self):
        if self.twin == "exit":
            raise SystemExit(3)
        return self if self.twin == "self" else self.twin


@pytest.mark.parametrize("twin, said", [(None, "returned None"), ("self", "the model itself"),
                                        ("exit", "float64_twin() raised SystemExit")])
def test_a_twin_that_is_none_the_model_or_exits_is_said_not_used(twin, said):
    got, why = model_suite._float64_twin(_Model(twin), "bfloat16")
    assert got is None and said in why
    assert model_suite._float64_twin(_Model(twin), "float64") == (None, None)


def test_the_models_own_hooks_ride_along_to_the_twin(llama):
    """A hook of the model's own (a user's patch on lm_head) is in the twin; the probes' are the twin's
    recorder's (a hostile review: clearing every hook took the bug out of the twin)."""
    ad, _ = llama
    m = ad.build(dtype="float32", device="cpu", attn_implementation="eager")
    m.model.lm_head.register_forward_hook(lambda mod, args, out: out + 1000.0)
    t = m.float64_twin()
    ids, pos = np.array([[5, 6, 7]]), np.arange(3)[None]
    logits = np.asarray(t.forward(ids, position_ids=pos)[0])
    assert logits.min() > 900.0
    assert t.probes() and len(t.model.lm_head._forward_hooks) == 1


def test_non_finite_logits_of_the_run_fail_whatever_the_twin(bf16_decode, llama):
    trace = dict(bf16_decode)
    trace["pairs"] = [{**trace["pairs"][0], "b": np.full_like(trace["pairs"][0]["b"], np.inf)}, *trace["pairs"][1:]]
    assert any("not finite" in t for t in _logits(_judge(trace, llama[1])))
