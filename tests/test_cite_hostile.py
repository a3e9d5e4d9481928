"""``posenc cite-check`` against the second hostile review: distinct unknown IDs resolved without reloading the
spec (docs/citing.md)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from posenc.spec import loader, versions
from posenc.tools import cite_check


# ---- 1. each distinct unknown ID is resolved without loading the spec's YAML again --------------------------

def test_distinct_unknown_ids_load_the_spec_once(monkeypatch):
    calls = []
    real = versions.load_spec
    monkeypatch.setattr(versions, "load_spec", lambda *a, **k: calls.append(1) or real(*a, **k))
    src = "".join(f"# posenc: ROPE-X{i}@0.{i}.0\n" for i in range(300))
    got = cite_check.check_text(src, "python")
    assert len(calls) == 1, len(calls)  # was: once per distinct ID (~45 ms each)
    assert {(f.code, f.hint) for f in got if f.code == "unknown-id"} == {("unknown-id", "posenc spec list shows every ID")}
    assert sum(f.code == "unknown-version" for f in got) == 300 - len(versions.known_versions())


def test_a_family_registered_later_is_still_seen(monkeypatch):
    """The loaded spec is keyed by the files it reads: a family registered after a first resolution counts."""
    toy = Path(__file__).resolve().parent / "toy_family" / "toy.yaml"
    monkeypatch.setattr(loader, "_REGISTERED_FILES", [])
    assert [p[0] for p in versions.resolve("TOY-RAMP").problems] == ["unknown-id"]
    monkeypatch.setattr(loader, "_REGISTERED_FILES", [toy])
    r = versions.resolve("TOY-RAMP")
    assert r.entry is not None and r.entry["family"] == "toy" and not r.problems


def test_the_did_you_mean_hint_is_difflibs_own():
    """The length pre-filter of versions._near keeps exactly difflib's matches."""
    current = versions.snapshot(versions.SPEC_VERSION)
    tokens = ["ROPE-PAIR-HALFX", "ROPE-X1", "T5-X", "SCALE-LLAMA33", "DIV-ROPE-BF16-ANGLESS", "A-B",
              "ROPE-PAIR-INTERLEAVED-AND-MORE-WORDS", "MROPE-PARTIALL", "ALIBI-SLOPE"]
    for t in tokens:
        close = difflib.get_close_matches(t, list(current.entries), n=3, cutoff=0.7)
        want = f"did you mean {' or '.join(close)}?" if close else "posenc spec list shows every ID"
        assert versions._near(t, current) == want, t
