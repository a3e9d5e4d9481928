"""The machine-readable spec: loads, is consistent, is covered, and rejects bad input precisely."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

import posenc.conformance
import posenc.spec as spec_pkg
from posenc import cli
from posenc.cli import commands
from posenc.registry import all_cases

from posenc.spec import SPEC_DIR, SPEC_VERSION, json_schema_text, load_spec
from posenc.spec.errors import SpecError
from posenc.spec.models import CLAUSE_ID, DIVERGENCE_ID, RopeParams
from posenc import registry

CASES = all_cases()

CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent
SPEC = load_spec()
FAMILY_FILES = sorted(p.name for p in SPEC_DIR.glob("*.yaml"))


# =============================================================================================
# The committed spec
# =============================================================================================


def test_load_spec():
    assert SPEC.version == SPEC_VERSION
    assert {"rope", "sinusoidal", "learned", "position_ids"} <= set(SPEC.families)
    assert len(SPEC.clauses) >= 20
    assert SPEC.clause("ROPE-PAIR-HALF").id == "ROPE-PAIR-HALF"
    with pytest.raises(SpecError, match="NOPE-NOT-A-CLAUSE"):
        SPEC.clause("NOPE-NOT-A-CLAUSE")


def test_ids_unique_across_files_and_match_pattern():
    ids = [c.id for f in SPEC.families.values() for c in f.clauses]
    div_ids = [d.id for f in SPEC.families.values() for d in f.divergences]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(div_ids) == len(set(div_ids))
    assert not set(ids) & set(div_ids)
    for i in ids:
        assert re.fullmatch(CLAUSE_ID, i), i
    for i in div_ids:
        assert re.fullmatch(DIVERGENCE_ID, i), i


def test_clause_family_prefix_matches_file():
    prefix = {"rope": "ROPE-", "sinusoidal": "SIN-", "learned": "LEARNED-", "position_ids": "POS-"}
    for fam, f in SPEC.families.items():
        if fam in prefix:
            for c in f.clauses:
                assert c.id.startswith(prefix[fam]), (fam, c.id)
            for d in f.divergences:
                assert d.id.startswith("DIV-" + prefix[fam]), (fam, d.id)


def test_every_clause_has_a_source_with_provenance():
    for c in SPEC.clauses.values():
        assert c.sources, c.id
        for s in c.sources:
            assert s.provenance in ("paper", "library-default", "published-config", "derivation"), c.id
            assert s.citation.strip() and s.location.strip(), c.id
            if s.kind == "upstream" and "transformers" in s.citation:
                assert s.version, f"{c.id}: an upstream transformers source needs its version"


def test_every_divergence_mutant_exists_and_violates_known_clauses():
    from posenc import families
    for d in SPEC.divergences.values():
        if d.level == "model":  # a rule over a scenario's forward passes (spec/model.yaml)
            assert d.mutant in families.model_mutants(), f"{d.id}: model mutant {d.mutant!r} not registered"
        else:
            assert d.mutant in registry.mutants(), f"{d.id}: mutant {d.mutant!r} not in reference.registry.mutants()"
        for cid in d.violates:
            assert cid in SPEC.clauses, (d.id, cid)


def test_case_clause_ids_exist():
    unknown = sorted({(c.id, cid) for c in CASES for cid in c.clauses if cid not in SPEC.clauses})
    assert not unknown, f"cases cite clauses the spec does not define: {unknown}"


def test_every_clause_is_checked():
    """Required clauses have a golden case (a call form's clauses: a golden case put in that form, the test
    ``test_call_form`` collects); opt-in clauses at least a conformance test citing them."""
    from posenc import families
    from posenc.conformance.collect import form_params
    used = {cid for c in CASES for cid in c.clauses}
    used |= {cid for p in form_params() for m in p.marks if m.name == "clauses" for cid in m.args}
    scenarios = families.scenarios()  # the model family's clauses are scenarios, run on whole models
    uncovered_required = sorted(c.id for c in SPEC.clauses.values() if c.required and c.id not in used
                                and c.id not in scenarios)
    assert not uncovered_required, f"required clauses with no golden case: {uncovered_required}"
    checked = {cid for chk in families.checks().values() if chk.select for c in CASES if chk.select(c)
               for cid in chk.clauses(c)}
    optional_unchecked = sorted(c.id for c in SPEC.clauses.values()
                                if not c.required and c.id not in used and c.id not in checked)
    assert not optional_unchecked, f"opt-in clauses no conformance test checks: {optional_unchecked}"


def test_invariants_declared_are_known():
    """Every invariant a clause declares is checked: some family registered a check for it."""
    from posenc import families
    known = {c.invariant for c in families.checks().values()}
    for c in SPEC.clauses.values():
        assert set(c.invariants) <= known, (c.id, set(c.invariants) - known)


def test_since_not_newer_than_spec_version():
    v = tuple(int(x) for x in SPEC_VERSION.split("."))
    for item in [*SPEC.clauses.values(), *SPEC.divergences.values()]:
        assert tuple(int(x) for x in item.since.split(".")) <= v, item.id


# =============================================================================================
# Bad input gives precise errors (each on a copy of the real files)
# =============================================================================================


@pytest.fixture
def spec_copy(tmp_path) -> Path:
    d = tmp_path / "spec"
    d.mkdir()
    for name in FAMILY_FILES:
        shutil.copy(SPEC_DIR / name, d / name)
    assert load_spec(d).clauses.keys() == SPEC.clauses.keys()  # the copy itself is valid
    return d


def _edit(path: Path, fn) -> None:
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _expect(directory: Path, *fragments: str) -> str:
    with pytest.raises(SpecError) as ei:
        load_spec(directory)
    msg = str(ei.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in SpecError message:\n{msg}"
    return msg


def test_bad_clause_id(spec_copy):
    _edit(spec_copy / "rope.yaml", lambda d: d["clauses"][0].update(id="rope-inv-freq"))
    _expect(spec_copy, "rope.yaml", "clauses.0.id", "pattern")


def test_bad_clause_id_in_later_clause(spec_copy):
    _edit(spec_copy / "learned.yaml", lambda d: d["clauses"][3].update(id="LEARNED_BERT"))
    _expect(spec_copy, "learned.yaml", "clauses.3.id")


def test_missing_required_field(spec_copy):
    _edit(spec_copy / "sinusoidal.yaml", lambda d: d["clauses"][1].pop("statement"))
    _expect(spec_copy, "sinusoidal.yaml", "clauses.1.statement", "required")


def test_missing_source_provenance(spec_copy):
    _edit(spec_copy / "rope.yaml", lambda d: d["clauses"][2]["sources"][0].pop("provenance"))
    _expect(spec_copy, "rope.yaml", "clauses.2.sources.0.provenance")


def test_unknown_field(spec_copy):
    _edit(spec_copy / "position_ids.yaml", lambda d: d["divergences"][0].update(severity="high"))
    _expect(spec_copy, "position_ids.yaml", "divergences.0.severity")


def test_invalid_yaml(spec_copy):
    (spec_copy / "learned.yaml").write_text("family: learned\nclauses: [\n  - id: {\n")
    msg = _expect(spec_copy, "learned.yaml", "not valid YAML")
    assert "line" in msg  # the parser's position is kept


def test_divergence_violates_unknown_clause(spec_copy):
    _edit(spec_copy / "rope.yaml", lambda d: d["divergences"][1].update(violates=["ROPE-NO-SUCH-CLAUSE"]))
    _expect(spec_copy, "rope.yaml", "divergences.1.violates", "ROPE-NO-SUCH-CLAUSE")


def test_divergence_violates_unknown_clause_names_the_real_file(spec_copy):
    """The message must name the file that holds the divergence, even when the file name is not
    ``<family>.yaml`` (load_spec loads every ``*.yaml``, whatever its name)."""
    (spec_copy / "rope.yaml").rename(spec_copy / "rotary.yaml")
    assert load_spec(spec_copy).families.keys() == SPEC.families.keys()  # renamed copy is valid
    _edit(spec_copy / "rotary.yaml", lambda d: d["divergences"][1].update(violates=["ROPE-NO-SUCH-CLAUSE"]))
    _expect(spec_copy, "rotary.yaml", "divergences.1.violates", "ROPE-NO-SUCH-CLAUSE")


def test_spec_version_mismatch(spec_copy):
    _edit(spec_copy / "sinusoidal.yaml", lambda d: d.update(spec_version="9.9.9"))
    _expect(spec_copy, "sinusoidal.yaml", "spec_version", "9.9.9")


def test_duplicate_clause_id_across_files(spec_copy):
    dup = yaml.safe_load((SPEC_DIR / "rope.yaml").read_text())["clauses"][0]  # ROPE-INV-FREQ
    _edit(spec_copy / "sinusoidal.yaml", lambda d: d["clauses"].append(dup))
    n = len(yaml.safe_load((SPEC_DIR / "sinusoidal.yaml").read_text())["clauses"])
    # sinusoidal.yaml sorts after rope.yaml, so the duplicate is found in sinusoidal.yaml
    msg = _expect(spec_copy, "sinusoidal.yaml", "ROPE-INV-FREQ", "rope.yaml")
    assert f"clauses.{n}.id" in msg, f"the field path clauses.{n}.id is not named:\n{msg}"


def test_family_defined_twice(spec_copy):
    shutil.copy(spec_copy / "rope.yaml", spec_copy / "rope2.yaml")
    _expect(spec_copy, "rope2.yaml", "family")


def test_empty_directory(tmp_path):
    with pytest.raises(SpecError, match="no spec YAML"):
        load_spec(tmp_path)


def test_cli_validate_reports_error(spec_copy, capsys):
    _edit(spec_copy / "rope.yaml", lambda d: d["clauses"][0].update(id="bad id"))
    assert cli.main(["spec", "validate", str(spec_copy)]) == 2
    err = capsys.readouterr().err
    assert "rope.yaml" in err and "clauses.0.id" in err
    assert cli.main(["spec", "validate", str(SPEC_DIR)]) == 0


def test_cli_validate_refuses_an_unregistered_mutant(spec_copy, capsys):
    """A typo in a divergence's ``mutant:`` would silently drop its diagnosis: validate names it."""
    def typo(d):
        d["divergences"][0]["mutant"] += "_typo"
    _edit(spec_copy / "rope.yaml", typo)
    assert cli.main(["spec", "validate", str(spec_copy)]) == 2
    err = capsys.readouterr().err
    assert "mutant '" in err and "_typo' is not registered (did you mean" in err


# =============================================================================================
# Schema freshness
# =============================================================================================


def test_schema_json_is_fresh():
    committed = spec_pkg.SCHEMA_PATH.read_text()
    assert json_schema_text() == committed, "spec/schema.json is stale: run `posenc spec schema`"


def test_schema_check_cli(capsys):
    assert cli.main(["spec", "schema", "--check"]) == 0, capsys.readouterr().out


def test_schema_check_cli_detects_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "schema.json"
    stale.write_text(json_schema_text().replace('"title"', '"Title"', 1))
    monkeypatch.setattr(commands, "SCHEMA_PATH", stale)
    assert cli.main(["spec", "schema", "--check"]) == 1
    assert "posenc spec schema" in capsys.readouterr().out


def test_schema_rejects_what_the_models_reject():
    """The exported schema carries the ID pattern and forbids unknown fields."""
    import json
    s = json.loads(json_schema_text())
    clause = s["$defs"]["Clause"]
    assert clause["properties"]["id"]["pattern"] == CLAUSE_ID
    assert clause.get("additionalProperties") is False
    assert set(s["required"]) >= {"family", "spec_version", "description", "clauses"}


# =============================================================================================
# Parameter models
# =============================================================================================


@pytest.mark.parametrize("kwargs, field", [
    (dict(head_dim=8, rotary_dim=5), "rotary_dim"),
    (dict(head_dim=8, rotary_dim=10), "rotary_dim"),
    (dict(head_dim=8, rope_type="yarnn"), "rope_type"),
    (dict(head_dim=8, rope_scaling_factor=2.0), "rope_scaling_factor"),
    (dict(head_dim=8, pairing="neox"), "pairing"),
    (dict(head_dim=0), "head_dim"),
    (dict(head_dim=8, rope_theta=0.0), "rope_theta"),
    (dict(head_dim=8, attention_factor=-1.0), "attention_factor"),
])
def test_rope_params_reject(kwargs, field):
    with pytest.raises(ValidationError) as ei:
        RopeParams(**kwargs)
    assert field in str(ei.value)


def test_rope_params_accept():
    p = RopeParams(head_dim=96, rotary_dim=24)
    assert p.rdim == 24 and p.pairing == "half" and p.rope_theta == 10000.0
    assert RopeParams(head_dim=8).rdim == 8
    with pytest.raises(ValidationError, match="must be even"):
        RopeParams(head_dim=7)  # odd head_dim without rotary_dim
    with pytest.raises(ValidationError):
        p.model_copy(update={"pairing": "half"}).__class__(head_dim=8, rotary_dim=None, extra=1)
