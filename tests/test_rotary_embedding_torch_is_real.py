"""The rotary-embedding-torch adapter really runs lucidrains' RotaryEmbedding: patch the library
with a wrong behaviour and watch the adapter's conformance run fail (and pass without the patch);
remove the recorded divergence from the library and watch its strict expectation turn into a
failure; check linear interpolation, which no golden case reaches with interleaved pairing."""

from __future__ import annotations

import numpy as np
import pytest
import rotary_embedding_torch.rotary_embedding_torch as rer
import torch
from einops import rearrange

import posenc.adapters.rotary_embedding_torch_adapter  # noqa: F401 - import before pytester snapshots sys.modules
from posenc.adapters import Unsupported
from posenc.adapters.rotary_embedding_torch_adapter import ADAPTER
from posenc.reference import rope
from posenc.spec.models import RopeParams
from posenc.spec.tolerance import bound
from posenc import registry

NAME = "rotary-embedding-torch"


def _half_rotate(x):
    """GPT-NeoX's rotate_half where the library pairs (2i, 2i + 1)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _no_offset(self, seq_len, device=None, dtype=None, offset=0):
    return _GET_SEQ_POS(self, seq_len, device=device, dtype=dtype, offset=0)


def _no_scale(freqs, t, start_index=0, scale=1.0, **kwargs):
    return _APPLY(freqs, t, start_index=start_index, **kwargs)


_GET_SEQ_POS, _APPLY = rer.RotaryEmbedding.get_seq_pos, rer.apply_rotary_emb

PATCHES = [
    # (owner, attribute, replacement, -k selection, divergence the diagnosis must name or None)
    (rer, "rotate_half", _half_rotate, "test_golden and rope-gptj-6b", None),
    (rer.RotaryEmbedding, "get_seq_pos", _no_offset, "test_golden and rope-llama4-interleaved",
     "DIV-ROPE-ARANGE-POSITIONS"),
    (rer, "apply_rotary_emb", _no_scale, "test_golden and rope-cos-sin-factor", "DIV-ROPE-FACTOR-IGNORED"),
]


def test_unpatched_library_passes(run_suite):
    selections = [s for *_, s, _ in PATCHES]
    r = run_suite(NAME, "-k", " or ".join(f"({s})" for s in selections))
    assert r.ret == 0 and r.parseoutcomes().get("passed", 0) >= len(selections), r.stdout.str()[-2000:]


@pytest.mark.parametrize("owner,attr,wrong,select,divergence", PATCHES,
                         ids=[f"{o.__name__.rsplit('.', 1)[-1]}.{a}" for o, a, *_ in PATCHES])
def test_patched_library_fails_the_suite(run_suite, monkeypatch, owner, attr, wrong, select, divergence):
    monkeypatch.setattr(owner, attr, wrong)
    r = run_suite(NAME, "-k", select)
    out = r.stdout.str()
    assert r.ret == 1 and r.parseoutcomes().get("failed", 0) >= 1, out[-2000:]
    if divergence:
        assert f"    {divergence} (violates" in out, out[-2000:]


def test_recorded_divergence_is_the_librarys_get_seq_pos(run_suite, monkeypatch):
    """With get_seq_pos building positions in float32 whatever ``dtype`` it is given, the
    expected divergences at bf16 / f16 disappear: the strict expectation lines then fail."""
    select = ("-k", "test_golden and rope-llama4-interleaved", "--dtype", "bfloat16,float16")
    base = run_suite(NAME, *select)
    assert base.ret == 0 and base.parseoutcomes().get("xfailed") == 2, base.stdout.str()[-2000:]

    def float32_positions(self, seq_len, device=None, dtype=None, offset=0):
        return _GET_SEQ_POS(self, seq_len, device=device, dtype=torch.float32, offset=offset)

    monkeypatch.setattr(rer.RotaryEmbedding, "get_seq_pos", float32_positions)
    r = run_suite(NAME, *select)
    assert r.ret == 1 and r.parseoutcomes().get("failed") == 2, r.stdout.str()[-2000:]
    assert "XPASS(strict)" in r.stdout.str()


def test_linear_interpolate_factor():
    """SCALE-LINEAR through interpolate_factor (interleaved, partial, offsets per row) agrees with
    the reference; and factor 4 differs from plain RoPE far beyond the tolerance."""
    lin = RopeParams(head_dim=16, rotary_dim=12, rope_theta=10000.0, pairing="interleaved",
                     rope_type="linear", factor=4.0)
    x = np.arange(2 * 3 * 4 * 16, dtype=np.float64).reshape(2, 3, 4, 16) % 128 / 64 - 1  # exact in every dtype
    pid = np.array([[0, 1, 2, 3], [3000, 3001, 3002, 3003]])
    a = ADAPTER()
    op = a.rope(lin, dtype="float32", device="cpu")
    yq, _ = op.apply(torch.from_numpy(x).float(), torch.from_numpy(x).float(), torch.from_numpy(pid))
    want, _ = rope.apply(x, x, pid, lin)
    sc, an = registry.reference_of("rope.apply").scales(lin, {"q": x, "k": x, "position_ids": pid})["q"]
    tol = bound("float32", sc, an, True)
    assert (np.abs(yq.numpy() - want) <= tol).all()
    plain, _ = rope.apply(x, x, pid, lin.model_copy(update={"rope_type": "default", "factor": None}))
    assert (np.abs(plain - want) > 100 * tol).any()
    with pytest.raises(Unsupported, match="linear scaling has no scaled inv_freq"):
        op.inv_freq()


def test_cos_sin_probe_reads_library_rotation():
    """cos_sin is the library's forward + apply_rotary_emb: pairs (cos, sin) of its own freqs."""
    p = RopeParams(head_dim=8, rope_theta=10000.0, pairing="interleaved")
    op = ADAPTER().rope(p, dtype="float64", device="cpu")
    pid = torch.tensor([[5, 2, 9]])
    cos, sin = op.cos_sin(pid)
    freqs = rearrange(op.rotary(pid), "... (n r) -> ... n r", r=2)[..., 0]
    assert cos.dtype == torch.float64
    assert torch.equal(cos, freqs.cos().double()) and torch.equal(sin, freqs.sin().double())
