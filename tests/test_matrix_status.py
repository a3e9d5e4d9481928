"""Each implementation's status on a clause, read from the committed matrices (posenc.tools.matrix_status)."""

import json

from posenc.tools.matrix_status import _summarise, clause_status


def test_status_from_the_committed_matrix():
    rows = {r.implementation: r for r in clause_status("ROPE-PAIR-HALF")}
    assert rows["torch"].status == "conforms" and rows["hf-transformers"].status == "conforms"
    assert rows["rotary-embedding-torch"].status == "cannot express"
    rows = {r.implementation: r for r in clause_status("MODEL-LEFT-PAD")}
    assert rows["hf:bart"].status == "not applicable"
    assert rows["hf:llama"].status == "diverges" and "DIV-MODEL-PADDED-ROWS-NAN" in rows["hf:llama"].divergences
    assert clause_status("NO-SUCH-CLAUSE") == []


def test_no_matrix_is_no_status(tmp_path):
    assert clause_status("ROPE-PAIR-HALF", tmp_path) is None
    assert clause_status("MODEL-BATCH", tmp_path) is None


def test_summaries_never_hide_a_failure_or_a_pass():
    assert _summarise("x", {"float64": "passed", "float32": "n/a"}, []).status == "conforms"
    assert _summarise("x", {"float64": "passed", "float32": "error"}, []).status == "fails"
    assert _summarise("x", {"float64": "passed", "float32": "something new"}, []).status == "fails"
    s = _summarise("x", {"float64": "pass", "bfloat16": "diverges: DIV-A"}, ["DIV-A"])
    assert s.status == "diverges" and s.note == "at bfloat16"
    s = _summarise("x", {"float64": "pass", "bfloat16": "unsupported"}, [])
    assert s.status == "conforms" and s.note == "unsupported at bfloat16"
    assert _summarise("x", {"float64": "n/a"}, []).status == "not applicable"


def test_model_cell_with_an_error_is_a_failure(tmp_path):
    """A model matrix cell whose eager run errors while sdpa passes: the model fails the scenario."""
    mm = {"dtypes": ["float32"], "scenarios": [{"clause": "MODEL-BATCH", "name": "batch"}],
          "cells": {"hf:llama": {"eager-batch": {"float32": "error", "divergences": []},
                                 "sdpa-batch": {"float32": "passed", "divergences": []}}}}
    (tmp_path / "model-matrix.json").write_text(json.dumps(mm), encoding="utf-8")
    [row] = clause_status("MODEL-BATCH", tmp_path)
    assert row.status == "fails" and row.dtypes == {"float32": "error"}
