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
from posenc.hf import params_from_hf_config, rope_import
from posenc.spec.models import AxialRopeParams
from posenc import registry

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


# ---- centred coordinates (AXIAL-COORDINATES-CENTRED: DINOv3 / EoMT-DINOv3) -------------------

CENTRED = dict(coordinates="centred")


@pytest.mark.parametrize("n, want", [
    (1, [0.0]),                         # one patch: its centre is the middle of [-1, 1]
    (2, [-0.5, 0.5]),
    (3, [-2 / 3, 0.0, 2 / 3]),
    (4, [-0.75, -0.25, 0.25, 0.75]),
])
def test_patch_centres_by_hand(n, want):
    np.testing.assert_allclose(axial.centred(np.arange(n), n), want, rtol=0, atol=1e-15)


def test_the_centred_figures_angles():
    # grid (2, 4), patch (h, w) = (1, 0): c = (3/2 - 1, 1/4 - 1) = (0.5, -0.75); f = [1, 100^-0.5]
    p = AxialRopeParams(**FIG, **CENTRED, grid_size=(2, 4))
    got = axial.angles(np.array([[[1]], [[0]]]), p)[0, 0]
    np.testing.assert_allclose(got, [math.pi, 0.1 * math.pi, -1.5 * math.pi, -0.15 * math.pi], rtol=1e-14)
    # width first: the width's angles lead
    got = axial.angles(np.array([[[1]], [[0]]]), p.model_copy(update={"axis_order": (1, 0)}))[0, 0]
    np.testing.assert_allclose(got, [-1.5 * math.pi, -0.15 * math.pi, math.pi, 0.1 * math.pi], rtol=1e-14)


def test_the_centred_figure_end_to_end():
    p = AxialRopeParams(**FIG, **CENTRED, grid_size=(2, 4))
    x = np.arange(8, dtype=np.float64)
    want = x.copy()
    for i, j, a in [(0, 4, math.pi), (1, 5, 0.1 * math.pi), (2, 6, -1.5 * math.pi), (3, 7, -0.15 * math.pi)]:
        _rot(want, x, i, j, a)
    got = axial.apply(x[None, None, None], x[None, None, None], np.array([[[1]], [[0]]]), p)[0]
    np.testing.assert_allclose(got[0, 0, 0], want, rtol=1e-13, atol=1e-13)
    # the centre patch of an odd grid turns by 0 on that axis: (1, 1) of (3, 3) leaves x as it is
    odd = AxialRopeParams(**FIG, **CENTRED, grid_size=(3, 3))
    np.testing.assert_allclose(axial.apply(x[None, None, None], x[None, None, None], np.array([[[1]], [[1]]]), odd)[0],
                               x[None, None, None], rtol=0, atol=1e-15)


@pytest.mark.parametrize("kw, message", [
    ({**CENTRED}, "needs grid_size"),
    ({"grid_size": (4, 4)}, "grid_size .* is read only with coordinates 'centred'"),
    ({**CENTRED, "grid_size": (4,)}, "one size per axis"),
    ({**CENTRED, "grid_size": (4, 0)}, "at least one patch"),
    ({**CENTRED, "grid_size": (4, 4, 4)}, "one size per axis"),
    ({"coordinates": "normalised", "grid_size": (4, 4)}, "'index' or 'centred'"),
])
def test_malformed_centred_parameters_name_the_rule(kw, message):
    with pytest.raises(ValueError, match=message):
        AxialRopeParams(**FIG, **kw)


@pytest.mark.parametrize("pos", [[[[2]], [[0]]], [[[0]], [[4]]], [[[-1]], [[0]]]])
def test_an_index_outside_the_grid_is_an_error_naming_the_clause(pos):
    p = AxialRopeParams(**FIG, **CENTRED, grid_size=(2, 4))
    with pytest.raises(ValueError, match=r"AXIAL-COORDINATES-CENTRED: position_ids\[.*is not a patch index"):
        axial.cos_sin(np.array(pos), p)


def _eomt_module(head_dim: int, theta: float):
    from transformers import EomtDinov3Config
    from transformers.models.eomt_dinov3 import modeling_eomt_dinov3 as m
    cfg = EomtDinov3Config(hidden_size=head_dim, num_attention_heads=1,
                           rope_parameters={"rope_type": "default", "rope_theta": theta})
    return m, cfg, m.EomtDinov3RotaryEmbedding(cfg).eval()


@pytest.mark.parametrize("head_dim, theta, grid", [
    (64, 100.0, (3, 5)), (64, 100.0, (5, 3)), (64, 100.0, (1, 7)), (32, 10000.0, (6, 2)), (16, 7.5, (4, 4)),
    (64, 100.0, (40, 40)),
])
def test_transformers_eomt_dinov3_module_is_the_centred_rule(head_dim, theta, grid):
    """EomtDinov3RotaryEmbedding (eval) on a [1, 3, n_h 16, n_w 16] image against the reference at
    every patch of the grid, row by row; its apply_rotary_pos_emb with 1 + 4 prefix tokens leaves
    them as they are and rotates the patches as the reference does."""
    import torch
    m, cfg, rotary = _eomt_module(head_dim, theta)
    n_h, n_w = grid
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, 3, n_h * cfg.patch_size, n_w * cfg.patch_size))
    i = np.arange(n_h * n_w)
    pos = np.stack([i // n_w, i % n_w])[:, None, :]
    p = AxialRopeParams(head_dim=head_dim, rope_theta=theta, **CENTRED, grid_size=grid)
    c, s = axial.cos_sin(pos, p)
    np.testing.assert_allclose(cos.double().numpy(), axial.full_width(c, p)[0], rtol=0, atol=2e-6)
    np.testing.assert_allclose(sin.double().numpy(), axial.full_width(s, p)[0], rtol=0, atol=2e-6)
    q = torch.randn(1, 2, 5 + n_h * n_w, head_dim, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        yq, yk = m.apply_rotary_pos_emb(q, q.flip(-1), cos, sin)
    assert torch.equal(yq[:, :, :5], q[:, :, :5]) and torch.equal(yk[:, :, :5], q.flip(-1)[:, :, :5])
    want_q, want_k = axial.apply(q[:, :, 5:].double().numpy(), q.flip(-1)[:, :, 5:].double().numpy(), pos, p)
    np.testing.assert_allclose(yq[:, :, 5:].double().numpy(), want_q, rtol=0, atol=2e-5)
    np.testing.assert_allclose(yk[:, :, 5:].double().numpy(), want_k, rtol=0, atol=2e-5)


def test_the_transformers_module_is_not_the_corner_nor_the_index_rule():
    """The comparison above can fail: the module's cos is far from each wrong rule's."""
    import torch
    _, cfg, rotary = _eomt_module(64, 100.0)
    with torch.no_grad():
        cos, _ = rotary(torch.zeros(1, 3, 3 * 16, 5 * 16))
    i = np.arange(15)
    pos = np.stack([i // 5, i % 5])[:, None, :]
    p = AxialRopeParams(head_dim=64, rope_theta=100.0, **CENTRED, grid_size=(3, 5))
    for wrong in (p.model_copy(update={"coordinates": "index", "grid_size": None}),
                  p.model_copy(update={"axis_order": (1, 0)}), p.model_copy(update={"rope_theta": 10000.0})):
        assert np.abs(cos.double().numpy() - axial.full_width(axial.cos_sin(pos, wrong)[0], wrong)[0]).max() > 0.1


CENTRED_DIVERGENCES = ("DIV-AXIAL-CORNER-COORDINATES", "DIV-AXIAL-UNNORMALISED-COORDINATES",
                       "DIV-AXIAL-CENTRED-WITHOUT-2PI")


def _computed(case_id):
    from posenc import families
    from posenc.harness import golden
    case = next(c for c in families.all_cases() if c.id == case_id)
    return golden.computed(case, golden.case_inputs(case))


@pytest.mark.parametrize("case_id", ["axial-figure-centred-cos-sin", "axial-eomt-dinov3-grid-3x5",
                                     "axial-eomt-dinov3-grid-1x8"])
@pytest.mark.parametrize("div_id", CENTRED_DIVERGENCES)
def test_each_centred_divergence_is_caught_and_named_alone(div_id, case_id):
    """Each new mutant fails the reference's tolerance on the centred cases, the diagnosis names it,
    and the other two do not reproduce its output (they are told apart on every one of these cases)."""
    from posenc import families
    from posenc.harness.diagnosis import diagnose
    from posenc.harness.runner import compare_outputs

    spec = families.spec()
    g = _computed(case_id)
    d = spec.divergences[div_id]
    out = {k: np.asarray(v) for k, v in registry.run_mutant(d.mutant, g.case.op, g.case.params, g.inputs).items()}
    assert not all(c.ok for c in compare_outputs(g, out, "float32"))
    named = [m.divergence for m in diagnose(spec, g, out, "float32")]
    assert div_id in named and not set(named) & (set(CENTRED_DIVERGENCES) - {div_id}), named


def test_the_centred_mutants_have_no_form_for_index_coordinates():

    p = AxialRopeParams(**FIG)
    for name in ("axial_corner_coordinates", "axial_unnormalised_coordinates", "axial_centred_without_2pi"):
        assert registry.run_mutant(name, "axial.cos_sin", p, {"position_ids": HW}) is None
    # and 1-D positions have none for centred ones
    c = AxialRopeParams(**FIG, **CENTRED, grid_size=(4, 6))
    assert registry.run_mutant("axial_1d_positions", "axial.cos_sin", c, {"position_ids": np.array([[[0, 1]], [[2, 3]]])}) is None


def test_the_corner_mutant_is_the_corner_by_hand():
    """grid (2, 4), patch (1, 0): the corner is (2/2 - 1, 0/4 - 1) = (0, -1): angles [0, 0, -2 pi, -0.2 pi]."""

    p = AxialRopeParams(**FIG, **CENTRED, grid_size=(2, 4))
    out = registry.run_mutant("axial_corner_coordinates", "axial.cos_sin", p, {"position_ids": np.array([[[1]], [[0]]])})
    np.testing.assert_allclose(out["cos"][0, 0], np.cos([0, 0, -2 * math.pi, -0.2 * math.pi]), atol=1e-15)
    out = registry.run_mutant("axial_centred_without_2pi", "axial.cos_sin", p, {"position_ids": np.array([[[1]], [[0]]])})
    np.testing.assert_allclose(out["sin"][0, 0], np.sin([0.5, 0.05, -0.75, -0.075]), atol=1e-15)


@pytest.mark.parametrize("port", ["torch", "hf-transformers"])
def test_the_ports_run_a_centred_full_grid(port):
    """The torch port and the transformers wrapper (EoMT-DINOv3's own module) on a full 3 x 5 grid."""
    from posenc.adapters import load_adapter
    from posenc.harness.runner import compare_outputs, run_case
    g = _computed("axial-eomt-dinov3-grid-3x5")
    out = run_case(load_adapter(port), g, "float32", "cpu")
    assert all(c.ok for c in compare_outputs(g, out, "float32"))


@pytest.mark.parametrize("case_id, reason", [
    ("axial-eomt-dinov3-default-grid-scattered", "only position_ids that are that full grid"),
    ("axial-figure-centred-apply", "only position_ids that are that full grid"),
    ("axial-centred-interleaved-width-first-cos-sin", "centred-coordinate axial RoPE .EoMT-DINOv3's, run here"),
    ("axial-centred-3-axes-blocks", "centred-coordinate axial RoPE .EoMT-DINOv3's, run here"),
])
def test_the_transformers_wrapper_refuses_what_eomt_cannot_express(case_id, reason):
    from posenc.adapters import Unsupported, load_adapter
    from posenc.harness.runner import run_case
    with pytest.raises(Unsupported, match=reason):
        run_case(load_adapter("hf-transformers"), _computed(case_id), "float32", "cpu")


# ---- the config import of EoMT-DINOv3 (transformers 5.24 eomt_dinov3) -----------------------

@pytest.mark.parametrize("config, want", [
    ({"model_type": "eomt_dinov3"}, dict(head_dim=64, rope_theta=100.0, layout="split", coordinates="centred",
                                         grid_size=(40, 40), axis_order=None, frequencies="shared")),
    ({"model_type": "eomt_dinov3", "hidden_size": 768, "num_attention_heads": 12, "image_size": 448, "patch_size": 14,
      "rope_parameters": {"rope_type": "default", "rope_theta": 250.0}},
     dict(head_dim=64, rope_theta=250.0, grid_size=(32, 32))),
    ({"model_type": "eomt_dinov3", "image_size": 500, "patch_size": 14}, dict(grid_size=(35, 35))),  # floored
    ({"model_type": "eomt_dinov3", "rope_theta": 50.0}, dict(rope_theta=50.0)),  # a 4.x top-level theta
    # the rotary module and the attention take hidden_size // heads: a stated head_dim is ignored
    ({"model_type": "eomt_dinov3", "head_dim": 32}, dict(head_dim=64)),
])
def test_eomt_dinov3_configs_import(config, want):
    p = params_from_hf_config(config)["axial"]
    for k, v in want.items():
        assert getattr(p, k) == v, (k, getattr(p, k), v)


@pytest.mark.parametrize("config, message", [
    ({"model_type": "eomt_dinov3", "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}, "supports only 'default'"),
    ({"model_type": "eomt_dinov3", "rope_parameters": {"rope_type": "default", "factor": 2.0}}, "unknown key(s) factor"),
    ({"model_type": "eomt_dinov3", "patch_size": 0}, "patch_size: expected a positive integer"),
    ({"model_type": "eomt_dinov3", "image_size": "640"}, "image_size: expected a positive integer"),
    ({"model_type": "eomt_dinov3", "image_size": 8}, "image_size: 8 is smaller than patch_size 16"),
    ({"model_type": "eomt_dinov3", "hidden_size": 1000}, "expected positive integers that divide"),
    ({"model_type": "eomt_dinov3", "hidden_size": 88, "num_attention_heads": 4}, "not a multiple of 4"),
])
def test_malformed_eomt_dinov3_configs_are_one_named_error(config, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        params_from_hf_config(config)


def test_config_import_prints_the_grids_provenance(tmp_path, capsys):
    import json
    from posenc.cli import main
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "eomt_dinov3", "image_size": 512}))
    assert main(["config", "import", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)["axial"]
    assert (out["coordinates"], out["grid_size"], out["head_dim"], out["rope_theta"]) == ("centred", [32, 32], 64, 100.0)
    assert out["provenance"]["grid_size"].startswith("image_size // patch_size = 512 // 16 per axis (patch_size: "
                                                     "EomtDinov3Config default)")
    assert "recomputes it from each image" in out["provenance"]["grid_size"]
    assert "prefix tokens (class, registers) are not rotated" in out["provenance"]["coordinates"]
    with pytest.raises(SpecError, match="axial .*params_from_hf_config"):
        rope_import({"model_type": "eomt_dinov3"})


@pytest.mark.parametrize("hidden, heads", [(784, 4), (1568, 4), (824, 2)])
def test_the_import_refuses_the_widths_eomt_cannot_run(hidden, heads):
    """EomtDinov3RotaryEmbedding's arange(0, 1, 4 / head_dim) has one entry too many at some widths
    (196, 392, 412, ...): transformers' own module gives D/4 + 1 frequencies there, so its apply cannot
    broadcast; the import refuses them, naming the width, and the wrapper reports them unsupported."""
    import torch
    from posenc.adapters import Unsupported, load_adapter
    from posenc.spec.errors import SpecError
    from posenc.hf import params_from_hf_config
    D = hidden // heads
    assert len(torch.arange(0, 1, 4 / D, dtype=torch.float32)) == D // 4 + 1  # the defect itself
    with pytest.raises(SpecError, match=f"head width {D}: .* gives {D // 4 + 1} frequencies per axis, not {D // 4}"):
        params_from_hf_config({"model_type": "eomt_dinov3", "hidden_size": hidden, "num_attention_heads": heads})
    with pytest.raises(Unsupported, match=f"head_dim {D}"):
        load_adapter("hf-transformers").axial(AxialRopeParams(head_dim=D, rope_theta=100.0, coordinates="centred",
                                                              grid_size=(2, 2)), dtype="float32", device="cpu")
    ok = params_from_hf_config({"model_type": "eomt_dinov3", "hidden_size": 192 * heads, "num_attention_heads": heads})
    assert ok["axial"].head_dim == 192
