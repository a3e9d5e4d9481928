"""The hf-transformers adapter really runs transformers: patch a wrapped function with a wrong
behaviour and watch the adapter's conformance run fail (and pass again without the patch)."""

from __future__ import annotations

import pytest
import torch
import transformers.models.deepseek_v3.modeling_deepseek_v3 as hf_dsv3
import transformers.models.gptj.modeling_gptj as hf_gptj
import transformers.models.llama.modeling_llama as hf_llama
import transformers.models.marian.modeling_marian as hf_marian
import transformers.models.opt.modeling_opt as hf_opt

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules


def _interleaved_rotate(x):
    """A wrong rotate_half: GPT-J's pairs against Llama's cat(c, c) cos layout (no known divergence)."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


PATCHES = [
    # (module, attribute, replacement, -k selection, divergence the diagnosis should name)
    (hf_llama, "rotate_half", _interleaved_rotate, "test_golden and rope-llama3-8b", None),
    (hf_gptj, "rotate_every_two", lambda x: x, "test_golden and rope-gptj-6b", None),
    # DeepSeek-V3's de-interleaving rotation replaced by Llama's half-pair rotation
    (hf_dsv3, "apply_rotary_pos_emb_interleave", hf_llama.apply_rotary_pos_emb,
     "test_golden and deepseek-v3-deinterleave", "DIV-ROPE-PAIRING-SWAPPED"),
    (hf_marian.MarianSinusoidalPositionalEmbedding, "create_weight",
     lambda self: torch.zeros(self.weight.shape), "test_golden and sin-concat", None),
]


@pytest.mark.parametrize("module,attr,wrong,select,divergence", PATCHES,
                         ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{a}" for m, a, *_ in PATCHES])
def test_patched_library_fails_the_suite(run_suite, monkeypatch, module, attr, wrong, select, divergence):
    assert run_suite("hf-transformers", "-k", select).ret == 0
    monkeypatch.setattr(module, attr, wrong)
    r = run_suite("hf-transformers", "-k", select)
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, out[-2000:]
    if divergence:
        assert f"    {divergence} (violates" in out


def test_patched_opt_offset_fails_the_suite(run_suite, monkeypatch):
    """OPT's +2 offset lives in the module's __init__; an offset of 0 must be caught."""
    init = hf_opt.OPTLearnedPositionalEmbedding.__init__

    def no_offset(self, num_embeddings, embedding_dim):
        init(self, num_embeddings, embedding_dim)
        self.offset = 0

    monkeypatch.setattr(hf_opt.OPTLearnedPositionalEmbedding, "__init__", no_offset)
    r = run_suite("hf-transformers", "-k", "opt-125m")
    out = r.stdout.str()
    assert r.ret == 1 and "DIV-LEARNED-OPT-NO-OFFSET" in out, out[-2000:]
