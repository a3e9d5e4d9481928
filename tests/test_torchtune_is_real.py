"""The torchtune adapter really runs torchtune: patch a wrapped module with a wrong behaviour and
watch the adapter's conformance run fail (and pass again without the patch)."""

from __future__ import annotations

import pytest
import torchtune.models.t5._encoder as tt_t5
from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE
from torchtune.models.phi3._position_embeddings import Phi3RotaryPositionalEmbeddings
from torchtune.models.qwen2._positional_embeddings import Qwen2RotaryPositionalEmbeddings
from torchtune.modules import RotaryPositionalEmbeddings

import posenc.adapters.torchtune_adapter  # noqa: F401 - import before pytester snapshots sys.modules

PHI3 = "posenc.adapters.torchtune_adapter:PHI3_ADAPTER"


def _ignore_input_pos(cls):
    """``cls.forward`` that drops ``input_pos``: torchtune then uses arange(seq_len)."""
    forward = cls.forward

    def wrong(self, x, *args, input_pos=None, **kwargs):
        return forward(self, x)
    return wrong


def _no_llama3_scaling(self, freqs, *args, **kwargs):
    return freqs


def _rel_sign_flipped(num_buckets, max_dist, max_seq_len):
    """torchtune's bucket table with rel = query - key (the transpose)."""
    return _BUCKETS(num_buckets, max_dist, max_seq_len).T.contiguous()


_BUCKETS = tt_t5._calc_birectional_rel_pos_to_bucket

PATCHES = [
    # (adapter, owner, attribute, replacement, -k selection, divergence the diagnosis must name)
    ("torchtune", RotaryPositionalEmbeddings, "forward", _ignore_input_pos(RotaryPositionalEmbeddings),
     "test_golden and rope-llama4-interleaved", "DIV-ROPE-ARANGE-POSITIONS"),
    ("torchtune", Qwen2RotaryPositionalEmbeddings, "forward", _ignore_input_pos(Qwen2RotaryPositionalEmbeddings),
     "test_golden and rope-llama3-8b-scattered", "DIV-ROPE-ARANGE-POSITIONS"),
    (PHI3, Phi3RotaryPositionalEmbeddings, "forward", _ignore_input_pos(Phi3RotaryPositionalEmbeddings),
     "test_golden and rope-llama3-8b-scattered", "DIV-ROPE-ARANGE-POSITIONS"),
    ("torchtune", Llama3ScaledRoPE, "apply_scaling", _no_llama3_scaling,
     "scale-llama3.1-8b-inv-freq", "DIV-SCALE-LLAMA3-IGNORED"),
    ("torchtune", tt_t5, "_calc_birectional_rel_pos_to_bucket", _rel_sign_flipped,
     "t5-base-buckets-bidirectional or t5-base-bias-encoder-long", "DIV-T5-REL-SIGN"),
]


def test_unpatched_library_passes(run_suite):
    """The selections below pass unpatched, so each patched failure is the patch's doing."""
    for adapter in ("torchtune", PHI3):
        selections = [s for a, *_, s, _ in PATCHES if a == adapter]
        r = run_suite(adapter, "-k", " or ".join(f"({s})" for s in selections))
        assert r.ret == 0 and r.parseoutcomes().get("passed", 0) >= len(selections), r.stdout.str()[-2000:]


@pytest.mark.parametrize("adapter,owner,attr,wrong,select,divergence", PATCHES,
                         ids=[f"{getattr(o, '__name__', '').rsplit('.', 1)[-1]}.{a}" for _, o, a, *_ in PATCHES])
def test_patched_library_fails_the_suite(run_suite, monkeypatch, adapter, owner, attr, wrong, select, divergence):
    monkeypatch.setattr(owner, attr, wrong)
    r = run_suite(adapter, "-k", select)
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, out[-2000:]
    assert f"    {divergence} (violates" in out, out[-2000:]


def test_cache_growth_uses_torchtune(monkeypatch):
    """Positions past torchtune's default max_seq_len (4096) are served by the module's own
    ``build_rope_cache`` (called with max(position_ids) + 1), never by rows the wrapper makes."""
    import torch

    from posenc.adapters.torchtune_adapter import ADAPTER
    from posenc.spec.models import RopeParams

    op = ADAPTER().rope(RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved"),
                        dtype="float32", device="cpu")
    build, calls = RotaryPositionalEmbeddings.build_rope_cache, []

    def spy(self, max_seq_len=4096):
        calls.append(max_seq_len)
        build(self, max_seq_len)

    monkeypatch.setattr(RotaryPositionalEmbeddings, "build_rope_cache", spy)
    op.cos_sin(torch.tensor([[4095, 7]]))
    assert calls == [] and op.m.cache.shape[0] == 4096
    cos, _ = op.cos_sin(torch.tensor([[4095, 9000]]))
    assert calls == [9001] and op.m.cache.shape[0] == 9001 and cos.shape == (1, 2, 4)


@pytest.mark.parametrize("cls,pairing,rope_type", [(RotaryPositionalEmbeddings, "interleaved", "default"),
                                                   (Qwen2RotaryPositionalEmbeddings, "half", "default"),
                                                   (Llama3ScaledRoPE, "interleaved", "llama3")])
def test_a_module_is_shared_within_a_run_and_grown_rows_equal_fresh_ones(cls, pairing, rope_type):
    """One adapter (one run) builds a rotary module once per set of construction arguments, as a model does:
    a second prepared rope with the same arguments gets it, grown cache and all; other arguments or another
    adapter instance (another run) get a new one.  Sharing is sound only if a row of torchtune's cache does not
    depend on how many rows were built: checked here on the library's own build_rope_cache."""
    import torch

    from posenc.adapters.torchtune_adapter import ADAPTER
    from posenc.spec.models import RopeParams

    extra = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64) \
        if rope_type == "llama3" else {}
    p = RopeParams(head_dim=16, rope_theta=500000.0, pairing=pairing, rope_type=rope_type, **extra)
    a = ADAPTER()
    first = a.rope(p, dtype="float32", device="cpu")
    assert type(first.m) is cls
    first.cos_sin(torch.tensor([[9000]]))  # grows the cache past 4096 rows
    second = a.rope(p, dtype="bfloat16", device="cpu")
    assert second.m is first.m and second.m.cache.shape[0] == 9001
    other = a.rope(p.model_copy(update={"rope_theta": 10000.0}), dtype="float32", device="cpu")
    assert other.m is not first.m
    fresh = ADAPTER().rope(p, dtype="float32", device="cpu")
    assert fresh.m is not first.m and fresh.m.cache.shape[0] == 4096
    pos = torch.tensor([[0, 1, 77, 4095]])
    for got, want in zip(second.cos_sin(pos), fresh.cos_sin(pos)):
        assert torch.equal(got, want)


def test_kept_modules_are_bounded(monkeypatch):
    """At most MODULES_KEPT modules are kept, and besides the one just handed out MODULES_KEPT_BYTES of cache; the
    big one outlives small ones."""
    import torch

    import posenc.adapters.torchtune_adapter as tt
    from posenc.spec.models import RopeParams

    monkeypatch.setattr(tt, "MODULES_KEPT", 3)
    a = tt.ADAPTER()
    big = a.rope(RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved"), dtype="float32", device="cpu")
    big.cos_sin(torch.tensor([[20000]]))
    for theta in (1e3, 2e3, 3e3, 4e3):
        a.rope(RopeParams(head_dim=8, rope_theta=theta, pairing="interleaved"), dtype="float32", device="cpu")
    assert len(a._modules) == 3 and any(m is big.m for m in a._modules.values())
    monkeypatch.setattr(tt, "MODULES_KEPT_BYTES", 4096 * 8 * 4 * 2)  # room for two default-size caches
    a.rope(RopeParams(head_dim=8, rope_theta=5e3, pairing="interleaved"), dtype="float32", device="cpu")
    newest = a.rope(RopeParams(head_dim=8, rope_theta=6e3, pairing="interleaved"), dtype="float32", device="cpu")
    newest.cos_sin(torch.tensor([[30000]]))  # the module in use grows past the bound
    assert newest.m is list(a._modules.values())[-1]
    assert sum(m.cache.numel() for m in list(a._modules.values())[:-1]) * 4 <= tt.MODULES_KEPT_BYTES
    assert not any(m is big.m for m in a._modules.values())
    a.rope(RopeParams(head_dim=8, rope_theta=7e3, pairing="interleaved"), dtype="float32", device="cpu")
    assert not any(m is newest.m for m in a._modules.values())  # no longer in use: over the bound, gone


def test_a_shared_module_hands_out_copies_and_refuses_negative_positions():
    """What a case gets cannot change the module later cases share: inv_freq is a copy of torchtune's ``theta``;
    a negative position (torch reads it from the cache's end, whose length earlier cases set) is unsupported."""
    import torch

    from posenc.adapters.torchtune_adapter import ADAPTER
    from posenc.spec.errors import Unsupported
    from posenc.spec.models import RopeParams

    a, p = ADAPTER(), RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved")
    w, _ = a.rope(p, dtype="float32", device="cpu").inv_freq()
    w.mul_(0)
    again = a.rope(p, dtype="float32", device="cpu")
    assert torch.equal(again.inv_freq()[0], ADAPTER().rope(p, dtype="float32", device="cpu").inv_freq()[0])
    with pytest.raises(Unsupported, match="position -1: torchtune indexes its cache"):
        again.cos_sin(torch.tensor([[3, -1]]))
