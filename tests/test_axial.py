"""Axial RoPE (AXIAL-*): the reference against hand-derived figures (not computed by the
reference), the config import of the axial model types, and what it refuses.  The reference
against every transformers 5.24 axial rotary module and apply function is
tests/test_hf_model_types.py (compare_axial)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.reference import axial
from posenc.spec.errors import SpecError
from posenc.spec.hf_config import params_from_hf_config, rope_import
from posenc.spec.models import AxialRopeParams

FIG = dict(head_dim=8, rope_theta=100.0)
HW = np.array([[[3]], [[5]]])  # (h, w) = (3, 5), [A, B, T]


@pytest.mark.parametrize("kw, angles", [
    ({}, [3, 0.3, 5, 0.5]),                                          # AXIAL-SPLIT: f = [1, 100^-0.5]
    ({"layout": "blocks"}, [3, 0.3, 5, 0.5]),                        # the same angles, other pairs
    ({"layout": "interleaved"}, [3, 0.3, 5, 0.5]),
    ({"axis_order": (1, 0)}, [5, 0.5, 3, 0.3]),                      # AXIAL-AXIS-ORDER
    ({"layout": "alternate", "axis_order": (1, 0)}, [5, 3, 0.5, 0.3]),  # AXIAL-ALTERNATE (Kimi)
    ({"layout": "alternate"}, [3, 5, 0.3, 0.5]),
    ({"frequencies": "alternating"}, [3, 0.3, 5 * 100 ** -0.25, 5 * 100 ** -0.75]),  # Pixtral
])
def test_the_figures_angles(kw, angles):
    got = axial.angles(HW, AxialRopeParams(**FIG, **kw))[0, 0]
    np.testing.assert_allclose(got, angles, rtol=1e-14)


def _rot(y, x, i, j, a):
    y[i] = x[i] * math.cos(a) - x[j] * math.sin(a)
    y[j] = x[j] * math.cos(a) + x[i] * math.sin(a)


@pytest.mark.parametrize("layout, pairs", [
    ("split", [(0, 4, 3), (1, 5, 0.3), (2, 6, 5), (3, 7, 0.5)]),
    ("blocks", [(0, 2, 3), (1, 3, 0.3), (4, 6, 5), (5, 7, 0.5)]),
    ("interleaved", [(0, 1, 3), (2, 3, 0.3), (4, 5, 5), (6, 7, 0.5)]),
])
def test_the_figures_pairs(layout, pairs):
    x = np.arange(8, dtype=np.float64)
    want = x.copy()
    for i, j, a in pairs:
        _rot(want, x, i, j, a)
    got = axial.apply(x[None, None, None], x[None, None, None], HW, AxialRopeParams(**FIG, layout=layout))[0]
    np.testing.assert_allclose(got[0, 0, 0], want, rtol=1e-13, atol=1e-13)


def test_three_axes_rotate_78_of_80_and_the_figure():
    p = AxialRopeParams(head_dim=80, num_axes=3)
    assert (p.adim, p.rdim) == (26, 78)  # MiniMax-M3: 2 * ((80 // 3) // 2)
    x = np.arange(8, dtype=np.float64)
    want = x.copy()
    for i, j, a in [(0, 3, 2), (1, 4, 3), (2, 5, 5)]:  # axis_dim 2: f = [1]; (t, h, w) = (2, 3, 5)
        _rot(want, x, i, j, a)
    k = x[::-1].copy()
    want_k = k.copy()
    for i, j, a in [(0, 3, 2), (1, 4, 3), (2, 5, 5)]:
        _rot(want_k, k, i, j, a)
    got, got_k = axial.apply(x[None, None, None], k[None, None, None], np.array([[[2]], [[3]], [[5]]]),
                             AxialRopeParams(**FIG, num_axes=3))
    np.testing.assert_allclose(got[0, 0, 0], want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got_k[0, 0, 0], want_k, rtol=1e-13, atol=1e-13)
    assert got[0, 0, 0, 6:].tolist() == [6.0, 7.0]  # AXIAL-PARTIAL


@pytest.mark.parametrize("kw, message", [
    ({"head_dim": 7}, "head_dim must be even"),
    ({"head_dim": 8, "axis_dim": 6}, "exceeds head_dim"),
    ({"head_dim": 8, "axis_dim": 3}, "axis_dim must be even"),
    ({"head_dim": 8, "axis_order": (0, 0)}, "permutation"),
    ({"head_dim": 8, "num_axes": 4}, "less than or equal to 3"),
])
def test_malformed_parameters_name_the_field(kw, message):
    with pytest.raises(ValueError, match=message):
        AxialRopeParams(**kw)


@pytest.mark.parametrize("config, want", [
    ({"model_type": "pixtral"}, dict(head_dim=64, rope_theta=10000.0, frequencies="alternating", layout="split")),
    ({"model_type": "pixtral", "hidden_size": 2048, "rope_parameters": {"rope_type": "axial", "rope_theta": 5e4}},
     dict(head_dim=128, rope_theta=5e4, frequencies="alternating")),
    # Qwen2-VL's vision head width is embed_dim / num_heads (its hidden_size is the language model's)
    ({"model_type": "qwen2_vl_vision", "embed_dim": 1280, "num_heads": 16}, dict(head_dim=80, layout="split")),
    ({"model_type": "gemma4_vision"}, dict(head_dim=64, rope_theta=100.0, layout="blocks")),
    ({"model_type": "kimi_k25_vision", "hidden_size": 1152, "num_attention_heads": 16},
     dict(head_dim=72, layout="alternate", axis_order=(1, 0))),
    ({"model_type": "inkling2_vision"}, dict(head_dim=64, layout="interleaved", axis_order=(1, 0))),
    ({"model_type": "minimax_m3_vl_vision"}, dict(head_dim=80, num_axes=3)),
    ({"model_type": "sam2_video"}, dict(layout="interleaved")),
    ({"model_type": "glm5_next", "vision_config": {"hidden_size": 512, "num_heads": 8}}, dict(head_dim=64)),
    # Pixtral's head_dim is hidden_size // num_attention_heads (PixtralVisionConfig.__post_init__)
    ({"model_type": "pixtral", "hidden_size": 1536, "num_attention_heads": 16}, dict(head_dim=96)),
    ({"model_type": "pixtral", "head_dim": None, "hidden_size": 2048}, dict(head_dim=128)),
    # a declared head_dim: the class default when absent, hidden_size / heads when null
    ({"model_type": "gemma4_vision", "hidden_size": 1536}, dict(head_dim=64)),
    # compute_axial_rope_parameters reads getattr(config, "head_dim", None) first: equal to the rule here
    ({"model_type": "qwen2_5_vl_vision", "hidden_size": 1280, "num_heads": 16, "head_dim": 80}, dict(head_dim=80)),
    # SAM 2 video's deprecated memory_attention_rope_theta (its setter writes rope_parameters)
    ({"model_type": "sam2_video", "memory_attention_rope_theta": 5000.0}, dict(rope_theta=5000.0)),
    # ... except SAM 2's memory attention
    ({"model_type": "sam2_video", "head_dim": 32}, dict(head_dim=256)),
    # a 4.x top-level rope_theta and a legacy rope_scaling dict, as transformers folds them
    ({"model_type": "pixtral", "rope_theta": 5e4}, dict(rope_theta=5e4)),
    ({"model_type": "pixtral", "rope_scaling": {"type": "axial", "rope_theta": 3e4}}, dict(rope_theta=3e4)),
])
def test_axial_configs_import(config, want):
    p = params_from_hf_config(config)["axial"]
    for k, v in want.items():
        assert getattr(p, k) == v, (k, getattr(p, k), v)


@pytest.mark.parametrize("config, message", [
    ({"model_type": "pixtral", "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, "supports only 'axial'"),
    ({"model_type": "pixtral", "rope_parameters": {"rope_type": "axial", "rope_theta": -1}}, "rope_theta: expected a positive"),
    ({"model_type": "pixtral", "rope_parameters": {"rope_type": "axial", "factor": 2.0}}, "unknown key(s) factor"),
    ({"model_type": "qwen2_vl_vision", "embed_dim": 1000, "num_heads": 16}, "embed_dim / num_attention_heads"),
    ({"model_type": "minimax_m3_vl_vision", "hidden_size": 1296, "num_attention_heads": 16}, "head_dim must be even"),
    # two axes of head_dim // 2 = odd dims: transformers rotates more than the head (or uneven axes)
    ({"model_type": "pixtral", "hidden_size": 1056}, "not a multiple of 4"),
    ({"model_type": "gemma4_vision", "head_dim": 6}, "not a multiple of 4"),
    ({"model_type": "qwen2_5_vl_vision", "hidden_size": 1080, "num_heads": 12}, "not a multiple of 4"),
    ({"model_type": "pixtral", "head_dim": "64"}, "head_dim: expected a positive integer"),
    # the rotary module would read head_dim, the attention splits hidden_size / heads: cannot run
    ({"model_type": "pixtral", "head_dim": 128}, "disagrees with pixtral's head width"),
    ({"model_type": "qwen2_5_vl_vision", "hidden_size": 1280, "num_heads": 16, "head_dim": 64}, "cannot run"),
    ({"model_type": "gemma4_vision", "head_dim": None}, "transformers refuses null"),
    ({"model_type": "pixtral", "rope_theta": 1e4, "rope_parameters": {"rope_type": "axial", "rope_theta": 2e4}},
     "disagrees"),
    ({"model_type": "glm5_next", "vision_config": [1]}, "vision_config: expected an object"),
])
def test_malformed_axial_configs_are_one_named_error(config, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        params_from_hf_config(config)


def test_rope_import_points_an_axial_config_to_its_reader():
    with pytest.raises(SpecError, match="axial .*params_from_hf_config"):
        rope_import({"model_type": "pixtral"})
