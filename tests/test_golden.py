"""Golden vectors: freshness, tamper and staleness detection, the generator rule, size, format."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc import cli
from posenc.harness import golden
from posenc.registry import all_cases, cases_by_id as by_id
from posenc.registry.cases import Gen
from posenc.spec.errors import GoldenError

CASES = all_cases()

GDIR = golden.GOLDEN_DIR
M64 = (1 << 64) - 1


# =============================================================================================
# Freshness of the committed goldens
# =============================================================================================


def test_committed_goldens_are_fresh():
    problems = golden.check()
    assert problems == [], "stale or tampered goldens (run `posenc golden regenerate`):\n" + "\n".join(problems)


def test_manifest_matches_cases():
    m = golden.read_manifest()
    assert [e["id"] for e in m["cases"]] == [c.id for c in CASES]
    assert len(by_id()) == len(CASES)  # no duplicate case IDs
    assert m["seed"] == golden.SEED and m["generator"] == "splitmix64-v1"
    npz = sorted(p.name for p in GDIR.glob("*.npz"))
    assert npz == sorted(e["file"] for e in m["cases"]), "orphan or missing npz files"


def test_golden_check_cli_passes(capsys):
    assert cli.main(["golden", "check"]) == 0, capsys.readouterr().out


# =============================================================================================
# Tampering and staleness
# =============================================================================================


@pytest.fixture
def golden_copy(tmp_path) -> Path:
    d = tmp_path / "golden"
    shutil.copytree(GDIR, d)
    assert golden.check(d) == []
    return d


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name, where", [("rope-tiny-half.npz", 0.5), ("sin-concat-d512.npz", 0.9),
                                         ("opt-125m-rows.npz", 0.1)])
def test_tampered_file_is_reported(golden_copy, name, where):
    path = golden_copy / name
    _flip_byte(path, int(path.stat().st_size * where))
    problems = golden.check(golden_copy)
    assert len(problems) == 1, problems
    assert name in problems[0] and "sha256" in problems[0]
    case = by_id()[name[:-4]]
    with pytest.raises(GoldenError, match="sha256") as ei:
        golden.load(case, golden_copy)
    assert name in str(ei.value)
    # the other cases still load
    golden.load(by_id()["pos-packed"], golden_copy)


def test_missing_file_and_entry_are_reported(golden_copy):
    (golden_copy / "pos-decode.npz").unlink()
    m = json.loads((golden_copy / "manifest.json").read_text())
    m["cases"] = [e for e in m["cases"] if e["id"] != "pos-packed"]
    (golden_copy / "manifest.json").write_text(json.dumps(m))
    problems = golden.check(golden_copy)
    assert any("pos-decode.npz" in p and "missing" in p for p in problems), problems
    assert any("'pos-packed'" in p and "no golden" in p for p in problems), problems
    with pytest.raises(GoldenError, match="pos-packed"):
        golden.load(by_id()["pos-packed"], golden_copy)


def test_changed_generated_input_is_reported(golden_copy):
    """A generated (not stored) input's sha256 guards the generator rule."""
    m = json.loads((golden_copy / "manifest.json").read_text())
    e = next(e for e in m["cases"] if e["id"] == "gpt2-small-prefill")
    assert "generated" in e["inputs"]["wpe"]
    e["inputs"]["wpe"]["sha256"] = "0" * 64
    (golden_copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match="wpe"):
        golden.load(by_id()["gpt2-small-prefill"], golden_copy)


def _rewrite_output(directory: Path, case_id: str, fn) -> None:
    """Replace outputs of one npz via ``fn(arrays)`` and re-record its sha256 in the manifest,
    so that only the staleness check (recompute and compare) can notice."""
    path = directory / f"{case_id}.npz"
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    fn(arrays)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path.write_bytes(buf.getvalue())
    m = json.loads((directory / "manifest.json").read_text())
    for e in m["cases"]:
        if e["id"] == case_id:
            e["sha256"], e["size"] = hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue())
    (directory / "manifest.json").write_text(json.dumps(m, indent=1))


@pytest.fixture
def regenerated(tmp_path) -> Path:
    d = tmp_path / "regen"
    golden.regenerate(d)
    return d


def test_stale_float_output_is_reported(regenerated):
    def perturb(a):
        q = a["output/q"].copy()
        q.flat[3] *= 1 + 1e-9
        a["output/q"] = q
    _rewrite_output(regenerated, "rope-llama3-8b", perturb)
    # the sha256 is consistent again: only the recomputation on every load can tell
    with pytest.raises(GoldenError, match=r"output 'q' differs from the reference's recomputation at \[0, 0, 0, 3\]"):
        golden.load(by_id()["rope-llama3-8b"], regenerated)
    problems = golden.check(regenerated)
    assert len(problems) == 1, problems
    assert "rope-llama3-8b" in problems[0] and "'q'" in problems[0] and "stale" in problems[0]


def test_stale_integer_output_is_reported(regenerated):
    def perturb(a):
        a["output/position_ids"] = a["output/position_ids"] + np.eye(1, 9, 5, dtype=np.int64)
    _rewrite_output(regenerated, "pos-packed", perturb)
    problems = golden.check(regenerated)
    assert len(problems) == 1 and "pos-packed" in problems[0] and "stale" in problems[0], problems


def test_one_ulp_is_not_stale(regenerated):
    """Staleness compares within a few ulp (float64 libm differs by an ulp across CPUs)."""
    def perturb(a):
        q = a["output/q"].copy()
        q.flat[3] = np.nextafter(q.flat[3], np.inf)
        a["output/q"] = q
    _rewrite_output(regenerated, "rope-llama3-8b", perturb)
    assert golden.check(regenerated) == []


def test_shape_change_is_reported(regenerated):
    def perturb(a):
        a["output/pe"] = a["output/pe"][..., :-1]
    _rewrite_output(regenerated, "sin-concat-d8", perturb)
    problems = golden.check(regenerated)
    assert any("sin-concat-d8" in p for p in problems), problems


def test_regenerate_cli_then_check(tmp_path, capsys):
    d = tmp_path / "cli-regen"
    assert cli.main(["golden", "regenerate", "--dir", str(d)]) == 0
    assert golden.check(d) == []
    assert cli.main(["golden", "check", "--dir", str(d)]) == 0
    # the regenerated manifest equals the committed one, except the npz files' own sha256
    # (outputs may differ by an ulp on another CPU, which changes the bytes, not the meaning)
    def strip(m):
        for e in m["cases"]:
            e.pop("sha256")
        return m
    new = strip(json.loads((d / "manifest.json").read_text()))
    old = strip(json.loads((GDIR / "manifest.json").read_text()))
    assert new == old
    capsys.readouterr()


def test_regenerate_removes_orphans(regenerated):
    """An orphan is a file the previous manifest lists that no case writes now; a file it does not list
    is not the kit's and stays (tests/test_golden_folder.py)."""
    m = json.loads((regenerated / "manifest.json").read_text())
    m["cases"].append({"id": "old-case", "file": "old-case.npz"})
    (regenerated / "manifest.json").write_text(json.dumps(m))
    (regenerated / "old-case.npz").write_bytes(b"x")
    (regenerated / "unlisted.npz").write_bytes(b"y")
    golden.regenerate(regenerated)
    assert not (regenerated / "old-case.npz").exists()
    assert (regenerated / "unlisted.npz").read_bytes() == b"y"


def test_check_on_empty_dir_reports_missing_manifest(tmp_path):
    problems = golden.check(tmp_path)
    assert len(problems) == 1 and "manifest" in problems[0] and "regenerate" in problems[0]


# =============================================================================================
# The generator rule splitmix64-v1, re-implemented here from the docstring in golden.py
# =============================================================================================


def _py_splitmix64(state: int, n: int) -> list[int]:
    out = []
    for k in range(n):
        z = (state + (k + 1) * 0x9E3779B97F4A7C15) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out.append(z ^ (z >> 31))
    return out


def _py_fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def _py_generate(case_id: str, name: str, gen: Gen, seed: int) -> list:
    n = 1
    for s in gen.shape:
        n *= s
    zs = _py_splitmix64(seed ^ _py_fnv1a64(f"{case_id}/{name}"), n)
    if gen.kind == "values":
        return [gen.offset + gen.scale * ((z >> 56) - 128) / 64 for z in zs]
    return [z % gen.high for z in zs]


# Published splitmix64 outputs from state 0 (Vigna's reference splitmix64.c, seeded with 0).
SPLITMIX64_SEED0 = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
                    0xF88BB8A8724C81EC, 0x1B39896A51A8749B]
# Published FNV-1a 64-bit test vectors.
FNV1A64 = {"": 0xCBF29CE484222325, "a": 0xAF63DC4C8601EC8C, "foobar": 0x85944171F73967E8}


def test_independent_splitmix64_matches_published_vectors():
    assert _py_splitmix64(0, 5) == SPLITMIX64_SEED0
    for text, h in FNV1A64.items():
        assert _py_fnv1a64(text) == h


@pytest.mark.parametrize("state", [0, 1, 0xFFFFFFFFFFFFFFFF, golden.SEED,
                                   golden.SEED ^ _py_fnv1a64("rope-llama3-8b/q")])
def test_kit_splitmix64_matches_independent(state):
    got = [int(v) for v in golden.splitmix64(state, 1000)]
    assert got == _py_splitmix64(state, 1000)
    assert golden.splitmix64(state, 1000).dtype == np.uint64


@pytest.mark.parametrize("case_id, name", [("rope-llama3-8b", "q"), ("rope-neox-20b", "k"),
                                           ("bert-base-token-types", "layer_norm_weight"),
                                           ("bert-base-token-types", "layer_norm_bias"),
                                           ("gpt2-small-prefill", "input_ids"),
                                           ("bert-base-token-types", "token_type_embeddings")])
def test_generated_inputs_reproduced_without_the_kit(case_id, name):
    """A non-Python-style consumer following the docstring gets the same values and sha256."""
    case = by_id()[case_id]
    gen = case.inputs[name]
    vals = _py_generate(case_id, name, gen, golden.SEED)
    kit = golden.case_inputs(case)[name]
    assert kit.reshape(-1).tolist() == vals
    fmt = "<d" if gen.kind == "values" else "<q"
    digest = hashlib.sha256(b"".join(struct.pack(fmt, v) for v in vals)).hexdigest()
    entry = next(e for e in golden.read_manifest()["cases"] if e["id"] == case_id)
    assert entry["inputs"][name]["sha256"] == digest
    assert entry["inputs"][name]["generated"] == gen.describe()


def _generated_value_inputs():
    for c in CASES:
        for name, v in c.inputs.items():
            if isinstance(v, Gen) and v.kind == "values":
                yield c, name, v


def test_generated_values_exact_in_bf16_and_f16():
    seen = 0
    for case, name, gen in _generated_value_inputs():
        a = golden.generate(case.id, name, gen)
        assert a.shape == gen.shape
        t = torch.from_numpy(a)
        for dt in (torch.bfloat16, torch.float16):
            back = t.to(dt).to(torch.float64).numpy()
            assert np.array_equal(back, a), f"{case.id}/{name} not exact in {dt}"
        lo, hi = gen.offset - 2 * gen.scale, gen.offset + 2 * gen.scale
        assert a.min() >= lo and a.max() < hi, f"{case.id}/{name} outside [{lo}, {hi})"
        if gen.scale == 1.0 and gen.offset == 0.0:
            assert a.min() >= -2.0 and a.max() < 2.0
            assert np.array_equal(a * 64, np.round(a * 64))  # multiples of 1/64
        seen += 1
    assert seen >= 15


def test_generated_values_cover_the_range():
    """Not degenerate: the big tables hit both ends of [-2, 2) and many distinct values."""
    a = golden.case_inputs(by_id()["gpt2-small-prefill"])["wpe"]
    assert a.min() == -2.0 and a.max() == 2.0 - 1 / 64
    assert len(np.unique(a)) == 256


def test_generated_ids_in_range():
    for c in CASES:
        for name, v in c.inputs.items():
            if isinstance(v, Gen) and v.kind == "ids":
                a = golden.generate(c.id, name, v)
                assert a.dtype == np.int64 and a.min() >= 0 and a.max() < v.high


# =============================================================================================
# Size and format
# =============================================================================================


def test_committed_goldens_are_small():
    total = sum(p.stat().st_size for p in GDIR.iterdir() if p.is_file())
    # a budget for the repository, raised twice: 5.5 MB at 199 cases, 8.3 MB at 278 (ROPE-ROTATION-NEGATIVE and
    # AXIAL-COORDINATES-CENTRED cases added, their largest inputs already halved), 9.2 MB at 315 (spec 0.5.0's
    # parameter forms: 37 cases, 0.3 MB, the real-size ones shrunk first), 10.0 MB at 331 (issue 30: the table
    # dtype, long positions -- 2**24, int32's largest, offsets with scaled frequencies, M-RoPE, T5 -- and the
    # head sizes kernels special-case: 14 cases, 0.45 MB, each at its smallest shape; 9.89 MB)
    assert total < 10_000_000, f"committed goldens take {total} bytes (limit 10.0 MB; 9.89 MB at 331 cases)"


def test_npz_members_need_no_pickle():
    for path in sorted(GDIR.glob("*.npz")):
        with np.load(path, allow_pickle=False) as z:
            for k in z.files:
                a = z[k]  # raises ValueError if a member is an object array
                assert a.dtype != object, (path.name, k)
                assert a.dtype.kind in "fiub", (path.name, k, a.dtype)
        with zipfile.ZipFile(path) as zf:
            assert all(n.endswith(".npy") for n in zf.namelist()), path.name


def test_tampered_scales_with_matching_sha_are_reported(regenerated):
    """Widening the stored error scales (and fixing the sha256) must not loosen a run silently."""
    def widen(arrays):
        for k in list(arrays):
            if k.startswith(("scale/", "angle/")):
                arrays[k] = arrays[k] * 1e6
    _rewrite_output(regenerated, "rope-llama3-8b-scattered", widen)
    problems = golden.check(regenerated)
    assert any("rope-llama3-8b-scattered.npz" in p and "error scales" in p for p in problems), problems


@pytest.mark.parametrize("case_id,edit", [
    ("bert-base-cache", lambda a: a.update({"acc/embeddings": a["acc/embeddings"] * 1e6})),  # widened
    ("bert-base-cache", lambda a: a.pop("acc/embeddings")),  # dropped: the run would lose the term
    ("rope-llama3-8b-scattered", lambda a: a.update({"acc/q": np.full_like(a["scale/q"], 1e30)})),  # added
])
def test_tampered_accumulation_scales_are_reported(regenerated, case_id, edit):
    """The accumulation term's stored scales (``acc/``) are verified like the other two: widened,
    dropped or added where the reference states none, the golden is refused."""
    _rewrite_output(regenerated, case_id, edit)
    problems = golden.check(regenerated)
    assert any(f"{case_id}.npz" in p and "error scales" in p for p in problems), problems


def test_stored_inputs_must_equal_the_case_definition(regenerated):
    """Replacing stored position_ids (outputs recomputed, sha256 fixed) is still reported."""
    case = by_id()["rope-llama3-8b-scattered"]

    def arange_positions(arrays):
        arrays["input/position_ids"] = np.broadcast_to(np.arange(3), (2, 3)).copy()
    _rewrite_output(regenerated, case.id, arange_positions)
    m = json.loads((regenerated / "manifest.json").read_text())
    e = next(e for e in m["cases"] if e["id"] == case.id)
    e["inputs"]["position_ids"]["sha256"] = golden.sha256_array(np.broadcast_to(np.arange(3), (2, 3)))
    (regenerated / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match="position_ids.*differs from the case definition"):
        golden.load(case, regenerated)


@pytest.mark.parametrize("edit,message", [
    (lambda e: e.pop("sha256"), "no field 'sha256'"),
    (lambda e: e["params"].update(model="Nope"), "is not a parameter model"),
    (lambda e: e["outputs"]["q"].update(shape=[1]), "the manifest says"),
])
def test_malformed_manifest_entries_are_named(regenerated, edit, message):
    m = json.loads((regenerated / "manifest.json").read_text())
    edit(next(e for e in m["cases"] if e["id"] == "rope-tiny-half"))
    (regenerated / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match=message):
        golden.load(by_id()["rope-tiny-half"], regenerated)


def test_corrupt_npz_is_named(regenerated):
    path = regenerated / "rope-tiny-half.npz"
    path.write_bytes(b"not a zip")
    m = json.loads((regenerated / "manifest.json").read_text())
    next(e for e in m["cases"] if e["id"] == "rope-tiny-half").update(sha256=hashlib.sha256(b"not a zip").hexdigest(),
                                                                     size=len(b"not a zip"))
    (regenerated / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match="rope-tiny-half.npz: not a readable npz"):
        golden.load(by_id()["rope-tiny-half"], regenerated)


def test_an_added_output_or_mask_is_refused(regenerated):
    """A .compared mask (all False: nothing compared) or an output the reference does not give,
    added with the sha256 fixed: refused on load, before any adapter is compared with it."""
    def add_masks(arrays):
        arrays["output/q.compared"] = np.zeros(arrays["output/q"].shape, bool)
    _rewrite_output(regenerated, "rope-tiny-half", add_masks)
    m = json.loads((regenerated / "manifest.json").read_text())
    e = next(e for e in m["cases"] if e["id"] == "rope-tiny-half")
    e["outputs"]["q.compared"] = {"shape": e["outputs"]["q"]["shape"], "dtype": "bool"}  # the manifest edited too
    (regenerated / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match=r"stored output\(s\) q.compared that the reference does not give"):
        golden.load(by_id()["rope-tiny-half"], regenerated)


def test_loaded_goldens_cannot_be_written(golden_copy):
    g = golden.load(by_id()["rope-tiny-half"], golden_copy)
    with pytest.raises(TypeError):
        g.outputs["q.compared"] = np.zeros(1, bool)  # a read-only mapping
    a = g.inputs["q"]
    with pytest.raises(ValueError):
        a[...] = 0
    with pytest.raises(ValueError):
        a.flags.writeable = True  # a view of a read-only base
