"""NoPE reference (NOPE-*) against SmolLM3 / Llama 4 configs of transformers 5.24 run in the test;
its mutant; the HF wrapper is real (patched config derivation and attention are caught)."""

from __future__ import annotations

import numpy as np
import pytest
import transformers.models.smollm3.configuration_smollm3 as hf_smollm3_config
import transformers.models.smollm3.modeling_smollm3 as hf_smollm3
from transformers.models.llama4.configuration_llama4 import Llama4TextConfig

import posenc.adapters.hf_transformers  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.reference import nope
from posenc.spec import load_spec
from posenc.spec.models import NopeParams
from posenc import registry

SPEC = load_spec()


def test_figures():
    flags = nope.layer_flags(NopeParams(num_hidden_layers=36))
    assert np.flatnonzero(flags == 0).tolist() == list(range(3, 36, 4))  # 3, 7, 11, ..., 35
    assert nope.layer_flags(NopeParams(num_hidden_layers=10, no_rope_layer_interval=3)).tolist() == \
        [1, 1, 0, 1, 1, 0, 1, 1, 0, 1]
    assert nope.layer_flags(NopeParams(num_hidden_layers=3, no_rope_layers=(0, 1, 1, 0))).tolist() == [0, 1, 1]


def test_params_validation():
    with pytest.raises(ValueError, match="fewer than num_hidden_layers"):
        NopeParams(num_hidden_layers=4, no_rope_layers=(1, 0))
    with pytest.raises(ValueError, match="0 \\(NoPE\\) or 1"):
        NopeParams(num_hidden_layers=2, no_rope_layers=(1, 2))


def test_apply_is_identity_and_checks_the_layer():
    x = np.arange(24.0).reshape(1, 2, 3, 4)
    q, k = nope.apply(x, x[:, :1], 3, NopeParams(num_hidden_layers=8))
    assert np.array_equal(q, x) and np.array_equal(k, x[:, :1])
    with pytest.raises(ValueError, match="uses RoPE"):
        nope.apply(x, x, 2, NopeParams(num_hidden_layers=8))


@pytest.mark.parametrize("n,interval", [(36, 4), (48, 4), (10, 3), (7, 1), (5, 9)])
def test_default_flags_match_smollm3_and_llama4(n, interval):
    p = NopeParams(num_hidden_layers=n, no_rope_layer_interval=interval)
    smol = hf_smollm3_config.SmolLM3Config(num_hidden_layers=n, no_rope_layer_interval=interval)
    l4 = Llama4TextConfig(num_hidden_layers=n, no_rope_layer_interval=interval)
    assert nope.layer_flags(p).tolist() == list(smol.no_rope_layers) == list(l4.no_rope_layers)[:n]


def test_explicit_flags_match_smollm3():
    flags = (1, 1, 0, 1, 0, 0, 1, 1)
    smol = hf_smollm3_config.SmolLM3Config(num_hidden_layers=8, no_rope_layers=list(flags))
    assert nope.layer_flags(NopeParams(num_hidden_layers=8, no_rope_layers=flags)).tolist() == list(smol.no_rope_layers)
    # the HF layer reads the flag as use_rope: 1 = RoPE
    assert [hf_smollm3.SmolLM3Attention(smol, i).use_rope for i in range(8)] == list(flags)


def test_mutant_is_the_wrong_behaviour():
    out = registry.run_mutant("nope_flags_inverted", "nope.layer_flags", NopeParams(num_hidden_layers=8), {})
    assert out["use_rope"].tolist() == [0, 0, 0, 1, 0, 0, 0, 1]


# ---- the HF wrapper really runs transformers ------------------------------------------------------


def test_patched_smollm3_config_fails_the_suite(run_suite, monkeypatch):
    assert run_suite("hf-transformers", "-k", "nope-").ret == 0
    orig = hf_smollm3_config.SmolLM3Config.__post_init__

    def inverted(self, **kwargs):  # the default list built with 1 meaning NoPE
        if self.no_rope_layers is None:
            self.no_rope_layers = [int((i + 1) % self.no_rope_layer_interval == 0)
                                   for i in range(self.num_hidden_layers)]
        orig(self, **kwargs)
    monkeypatch.setattr(hf_smollm3_config.SmolLM3Config, "__post_init__", inverted)
    r = run_suite("hf-transformers", "-k", "nope-flags-smollm3")
    out = r.stdout.str()
    assert r.ret == 1 and "    DIV-NOPE-FLAGS-INVERTED (violates" in out, out[-2000:]


def test_patched_smollm3_attention_fails_the_suite(run_suite, monkeypatch):
    """A layer that always applies RoPE (use_rope forced on) breaks NOPE-IDENTITY."""
    orig = hf_smollm3.SmolLM3Attention.__init__

    def always_rope(self, config, layer_idx):
        orig(self, config, layer_idx)
        self.use_rope = 1
    monkeypatch.setattr(hf_smollm3.SmolLM3Attention, "__init__", always_rope)
    r = run_suite("hf-transformers", "-k", "nope-apply")
    out = r.stdout.str()
    assert r.ret == 1 and "NOPE-IDENTITY" in out, out[-2000:]
