"""Every YAML the kit reads refuses a key written twice (issue 28, finding 2): PyYAML alone keeps the last
one silently, so an expectation line with two ``divergence:`` keys, or a spec clause with two ``formula:``
keys, would mean something other than what its author sees.  One loader (``posenc.spec.read_yaml``, a
``SafeLoader`` subclass) for all of them, the error naming the file, the line and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import posenc.spec
from posenc.conformance import expectation_drafts as drafts
from posenc.conformance import expectations as exp
from posenc.spec import DuplicateKeyError, load_spec, read_yaml
from posenc.spec.errors import SpecError
from posenc.spec.loader import SPEC_DIR, load_family

KIT = Path(posenc.spec.__file__).resolve().parent.parent


@pytest.mark.parametrize("text, line, key, first", [
    ("a: 1\nb: 2\na: 3\n", 3, "a", 1),                                     # top level
    ("a:\n  b: 1\n  c: 2\n  b: 3\n", 4, "b", 2),                           # nested
    ("l:\n  - {x: 1}\n  - y: 1\n    z: 2\n    y: 3\n", 5, "y", 3),          # in a list's mapping
    ("a: {x: 1, x: 2}\n", 1, "x", 1),                                      # flow mapping, one line
    ("a:\n  b:\n    c:\n      d: 1\n      d: 1\n", 5, "d", 4),              # deep, even with the same value
])
def test_duplicate_keys_are_refused_at_any_depth(text, line, key, first):
    with pytest.raises(DuplicateKeyError) as ei:
        read_yaml(text)
    assert str(ei.value) == f"line {line}: duplicate key {key!r} (first on line {first})"
    assert isinstance(ei.value, yaml.YAMLError)  # every reader's existing YAML error handling names its file


def test_what_is_not_a_duplicate_still_loads():
    assert read_yaml("a: 1\nb: {a: 2}\nc: [{a: 1}, {a: 2}]\n") == {"a": 1, "b": {"a": 2}, "c": [{"a": 1}, {"a": 2}]}
    # a merge key's values may be overridden: that is what << means
    assert read_yaml("d: &x {e: 1, f: 2}\ng: {<<: *x, e: 3}\n")["g"] == {"e": 3, "f": 2}


def _rope_line(divergence_twice: bool) -> str:
    import torch
    extra = "    divergence: DIV-ROPE-PAIRING-SWAPPED\n" if divergence_twice else ""
    return ("format: 2\nexpected_failures:\n  - case: rope-tiny-half\n    check: golden\n    dtypes: [float32]\n"
            "    clause: ROPE-PAIR-HALF\n    divergence: DIV-UNNAMED-X\n" + extra +
            f"    evidence: \"e\"\n    library: torch\n    library_version: \"{torch.__version__}\"\n")


def test_an_expectation_file_with_a_duplicate_key_is_refused(tmp_path):
    import torch
    p = tmp_path / "exp.yaml"
    p.write_text(_rope_line(False))
    assert len(exp.load(p, load_spec(), {"torch": torch.__version__})) == 1  # the file without the duplicate loads
    p.write_text(_rope_line(True))
    with pytest.raises(exp.ExpectationError) as ei:
        exp.load(p, load_spec(), {"torch": torch.__version__})
    assert str(ei.value) == f"expectation file {p}: line 8: duplicate key 'divergence' (first on line 7)"
    with pytest.raises(exp.ExpectationError, match="line 8: duplicate key 'divergence'"):  # convert reads it too
        drafts.convert_text(_rope_line(True), p)


def test_a_spec_file_with_a_duplicate_key_is_refused(tmp_path):
    text = (SPEC_DIR / "rope.yaml").read_text(encoding="utf-8")
    load_family(SPEC_DIR / "rope.yaml")  # as shipped: loads
    lines = text.splitlines(keepends=True)
    i = next(n for n, ln in enumerate(lines) if re.match(r"^\s*- id: ROPE-", ln))
    indent = len(lines[i]) - len(lines[i].lstrip()) + 2
    lines.insert(i + 1, " " * indent + "id: ROPE-SOMETHING-ELSE\n")  # the clause's id twice: which one counts?
    p = tmp_path / "rope.yaml"
    p.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(SpecError) as ei:
        load_family(p)
    assert f"rope.yaml: not valid YAML: line {i + 2}: duplicate key 'id' (first on line {i + 1})" == str(ei.value)


def test_the_model_registry_and_the_hf_exceptions_refuse_duplicate_keys(tmp_path, monkeypatch):
    from posenc.hf import coverage, tables
    from posenc.spec import registry as named
    reg = tmp_path / "models.yaml"
    reg.write_text("registry_version: 1\nregistry_version: 2\nmodels: []\n")
    with pytest.raises(SpecError, match=r"models.yaml: line 2: duplicate key 'registry_version' \(first on line 1\)"):
        named.load(reg)
    exc = tmp_path / "hf_exceptions.yaml"
    exc.write_text('transformers: "5.24.0"\nexceptions:\n  glm4v: {kind: a, what: b}\n  glm4v: {kind: c, what: d}\n')
    monkeypatch.setattr(tables, "HF_EXCEPTIONS_PATH", exc)
    with pytest.raises(SpecError, match=r"hf_exceptions.yaml: line 4: duplicate key 'glm4v' \(first on line 3\)"):
        coverage._exceptions()


def test_the_kit_parses_yaml_only_through_the_strict_loader():
    """The whole kind: no module of the kit calls PyYAML's loaders itself (a new reader would keep the last
    of two keys again); writing YAML (``safe_dump``) is not reading it."""
    loaders = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all|full_load_all)\(")
    found = [f"{p.relative_to(KIT)}:{n}" for p in KIT.rglob("*.py") if "tests" not in p.relative_to(KIT).parts
             for n, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if loaders.search(ln) and p != SPEC_DIR / "loader.py"]
    assert found == [], found
    # and the shared loader is the one every shipped YAML file loads with (none has a duplicate key today)
    for path in [*SPEC_DIR.glob("*.yaml"), *(KIT / "adapters" / "expectations").rglob("*.yaml"),
                 KIT / "hf" / "hf_exceptions.yaml"]:
        read_yaml(path.read_text(encoding="utf-8"))


def test_a_run_with_a_duplicate_key_in_its_expectation_file_stops_naming_it(run_suite, tmp_path):
    """Before any test, in one line (file, line, key): no line of the file excuses a failure and no test
    is charged to the adapter."""
    p = tmp_path / "exp.yaml"
    p.write_text(_rope_line(True))
    r = run_suite("torch", "--expectations", str(p), "-k", "test_golden and rope-tiny-half")
    err = r.stderr.str()
    assert r.ret == 4 and f"expectation file {p}: line 8: duplicate key 'divergence' (first on line 7)" in err, err
    assert "Traceback" not in err + r.stdout.str()
