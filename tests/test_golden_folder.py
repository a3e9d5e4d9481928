"""``posenc golden regenerate`` writes only into a golden folder, and only its own files (hostile review).

A folder holding a user's ``.npz`` files, a symlink to a file outside, or a ``manifest.json`` that is not a
golden manifest is refused before anything is written or removed; in a golden folder only the files its
previous manifest lists are removed; every file is written to a temporary file renamed over the old one,
so a link is replaced (never written through), a hard link keeps the old bytes, and a failed write leaves
the old file and no temporary file behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from posenc import cli
from posenc.harness import golden
from posenc.harness import golden_manifest as gm
from posenc.registry import cases_by_id as by_id
from posenc.spec.errors import GoldenError

SMALL = ["rope-tiny-half", "pos-packed", "alibi-slopes-8"]


def _cases():
    return [by_id()[c] for c in SMALL]


def _snapshot(d: Path) -> dict[str, object]:
    """Every entry of ``d``: a file's bytes, a link's target."""
    return {p.name: (f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes()) for p in sorted(d.iterdir())}


@pytest.fixture
def gfolder(tmp_path) -> Path:
    """A golden folder of three cases, as regenerate wrote it."""
    d = tmp_path / "golden"
    golden.regenerate(d, cases=_cases())
    assert golden.check(d, cases=_cases()) == []
    return d


@pytest.fixture
def victim(tmp_path) -> Path:
    v = tmp_path / "files" / "victim.txt"
    v.parent.mkdir()
    v.write_text("the user's file\n")
    return v


def test_a_folder_that_is_neither_empty_nor_golden_is_refused(tmp_path, capsys):
    """The review's folder: two user .npz files and no manifest -- both were deleted, 288 files written."""
    d = tmp_path / "experiments"
    d.mkdir()
    (d / "my_experiment_results.npz").write_bytes(b"results")
    (d / "weights.npz").write_bytes(b"weights")
    before = _snapshot(d)
    with pytest.raises(GoldenError, match=r"not a golden folder \(no manifest.json\) and not empty.*nothing was "
                                          r"written or removed"):
        golden.regenerate(d, cases=_cases())
    assert _snapshot(d) == before
    assert cli.main(["golden", "regenerate", "--dir", str(d)]) == 2  # the CLI: one line, no traceback
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a golden folder" in err and "Traceback" not in err
    assert _snapshot(d) == before


@pytest.mark.parametrize("text", ['{"name": "my web app", "version": "1.0"}', "not json", '{"format": 1}'])
def test_a_folder_whose_manifest_is_not_a_golden_manifest_is_refused(tmp_path, text):
    d = tmp_path / "app"
    d.mkdir()
    (d / "manifest.json").write_text(text)
    (d / "data.npz").write_bytes(b"data")
    before = _snapshot(d)
    with pytest.raises(GoldenError, match=r"manifest.json: .*rewrites only a folder whose manifest.json is a golden "
                                          r"manifest"):
        golden.regenerate(d, cases=_cases())
    assert _snapshot(d) == before


def test_a_file_is_not_a_folder(tmp_path):
    f = tmp_path / "file.npz"
    f.write_bytes(b"x")
    with pytest.raises(GoldenError, match=r"file.npz: not a folder"):
        golden.regenerate(f, cases=_cases())
    assert f.read_bytes() == b"x"


def test_an_empty_or_new_folder_is_written(tmp_path):
    (tmp_path / "empty").mkdir()
    for d in (tmp_path / "empty", tmp_path / "new" / "sub"):
        assert golden.regenerate(d, cases=_cases()) == [f"{c}.npz" for c in SMALL]
        assert sorted(p.name for p in d.iterdir()) == sorted([f"{c}.npz" for c in SMALL] + ["manifest.json"])
        assert golden.check(d, cases=_cases()) == []


def test_only_the_files_the_previous_manifest_lists_are_removed(gfolder):
    """A case gone from the kit: its file goes; the user's files in the folder stay, .npz or not."""
    m = json.loads((gfolder / "manifest.json").read_text())
    m["cases"].append({"id": "old-case", "file": "old-case.npz"})
    (gfolder / "manifest.json").write_text(json.dumps(m))
    (gfolder / "old-case.npz").write_bytes(b"old")
    (gfolder / "weights.npz").write_bytes(b"weights")
    (gfolder / "README.txt").write_text("notes")
    golden.regenerate(gfolder, cases=_cases())
    assert not (gfolder / "old-case.npz").exists()
    assert (gfolder / "weights.npz").read_bytes() == b"weights" and (gfolder / "README.txt").read_text() == "notes"
    assert golden.check(gfolder, cases=_cases()) == []


def test_a_case_no_longer_regenerated_is_removed(gfolder):
    golden.regenerate(gfolder, cases=_cases()[:2])
    assert not (gfolder / f"{SMALL[2]}.npz").exists()
    assert golden.check(gfolder, cases=_cases()[:2]) == []


def test_a_symlink_where_regenerate_writes_is_refused(gfolder, victim):
    """The review's link: rope-tiny-half.npz -> a file outside, which write_bytes overwrote."""
    (gfolder / "rope-tiny-half.npz").unlink()
    os.symlink(os.path.relpath(victim, gfolder), gfolder / "rope-tiny-half.npz")
    before = _snapshot(gfolder)
    with pytest.raises(GoldenError, match=r"rope-tiny-half.npz is a symlink \(to \.\./files/victim.txt\): `posenc "
                                          r"golden regenerate` replaces or removes only regular files.*nothing was "
                                          r"written or removed"):
        golden.regenerate(gfolder, cases=_cases())
    assert victim.read_text() == "the user's file\n" and _snapshot(gfolder) == before


def test_a_symlink_or_folder_the_previous_manifest_lists_is_refused(gfolder, victim):
    (gfolder / "pos-packed.npz").unlink()
    (gfolder / "pos-packed.npz").mkdir()
    (gfolder / "pos-packed.npz" / "keep").write_text("keep")
    os.symlink(victim, gfolder / "old-case.npz")
    m = json.loads((gfolder / "manifest.json").read_text())
    m["cases"].append({"id": "old-case", "file": "old-case.npz"})
    (gfolder / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(GoldenError, match=r"old-case.npz is a symlink .*; pos-packed.npz is a folder"):
        golden.regenerate(gfolder, cases=_cases()[:1])
    assert victim.exists() and (gfolder / "old-case.npz").is_symlink()
    assert (gfolder / "pos-packed.npz" / "keep").read_text() == "keep"


def test_a_manifest_that_is_a_symlink_is_refused_by_regenerate(gfolder, tmp_path):
    outside = tmp_path / "elsewhere.json"
    (gfolder / "manifest.json").rename(outside)  # a valid golden manifest, outside the folder
    os.symlink(outside, gfolder / "manifest.json")
    before = outside.read_bytes()
    with pytest.raises(GoldenError, match=r"manifest.json: the manifest is a symlink \(to .*elsewhere.json\): refused"):
        golden.regenerate(gfolder, cases=_cases())
    assert outside.read_bytes() == before and (gfolder / "manifest.json").is_symlink()


def test_a_link_that_appears_after_the_check_is_replaced_never_written_through(gfolder, victim, monkeypatch):
    """The folder check and the writes are not one step: a link made in between is replaced by the rename."""
    real = gm.golden_folder

    def then_link(directory, writes, name):
        listed = real(directory, writes, name)
        (directory / "rope-tiny-half.npz").unlink()
        os.symlink(victim, directory / "rope-tiny-half.npz")
        return listed
    monkeypatch.setattr(gm, "golden_folder", then_link)
    golden.regenerate(gfolder, cases=_cases())
    assert victim.read_text() == "the user's file\n"
    assert not (gfolder / "rope-tiny-half.npz").is_symlink()
    assert golden.check(gfolder, cases=_cases()) == []


def test_files_are_replaced_by_a_rename_not_rewritten_in_place(gfolder, tmp_path):
    """A hard link to the old file keeps the old bytes (a reader of the old file never sees half a new one)."""
    path = gfolder / "rope-tiny-half.npz"
    path.write_bytes(b"old bytes")
    os.link(path, tmp_path / "hardlink.npz")
    os.link(gfolder / "manifest.json", tmp_path / "manifest-hardlink.json")
    old_manifest = (gfolder / "manifest.json").read_bytes()
    golden.regenerate(gfolder, cases=_cases())
    assert (tmp_path / "hardlink.npz").read_bytes() == b"old bytes"
    assert (tmp_path / "manifest-hardlink.json").read_bytes() == old_manifest
    assert golden.check(gfolder, cases=_cases()) == []
    assert not [p.name for p in gfolder.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(gfolder, monkeypatch):
    before = _snapshot(gfolder)
    calls = []

    def disk_full(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(gm.os, "fsync", disk_full)
    with pytest.raises(GoldenError, match=r"pos-packed.npz: cannot be written \(No space left on device\); the old "
                                          r"file is left as it was"):
        golden.regenerate(gfolder, cases=_cases())
    assert _snapshot(gfolder) == before  # the same files (rope-tiny-half's bytes are the same), no temporary one
