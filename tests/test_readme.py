"""The README stays true: its two first commands, and the example adapter it shows."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert README.index("```sh") < README.index("\n## ")
    assert first_block == [
        'pip install torch==2.13.0 -e ".[torch]" && pytest conformance --adapter torch',
        'pip install torch==2.13.0 -e ".[test]" && pytest tests -n 2 --dist worksteal',
    ]


def test_readme_example_is_the_file_ci_runs():
    example = (ROOT / "docs" / "example_adapter.py").read_text().rstrip("\n")
    assert f"```python\n{example}\n```" in README
    assert len(example.splitlines()) <= 40


def test_ci_runs_the_readme_commands_and_every_adapter():
    """CI runs both README commands (the kit's tests run the numpy adapter at every dtype) and the matrix
    check, which runs every other registered adapter at every dtype; the committed matrix has a column for each."""
    import json

    from posenc.adapters import registered
    from posenc.tools import matrix

    ci = (ROOT / ".ci" / "run").read_text()
    assert "awk '/^```sh$/" in ci
    assert 'bash -c "${readme_cmds[0]}"' in ci and 'bash -c "${readme_cmds[1]}"' in ci
    assert "posenc matrix --check" in ci
    # numpy at every dtype: a kit test (the README's second command), the matrix excludes it
    assert '"numpy": "all"' in (ROOT / "tests" / "test_suite.py").read_text()
    assert "docs/example_adapter.py" in ci
    assert set(matrix.default_adapters()) == set(registered()) - {"numpy"}
    committed = json.loads((ROOT / "docs" / matrix.JSON_NAME).read_text())
    assert {a["adapter"] for a in committed["adapters"]} == set(matrix.default_adapters())


def test_readme_cite_check_run_is_real(monkeypatch):
    """The README's `posenc cite-check` run is what the command prints today."""
    monkeypatch.delenv("POSENC_DOCS_BASE", raising=False)
    import re

    from posenc.cli import main
    import contextlib
    import io
    block = re.search(r"```text\n\$ posenc cite-check (\S+)\n(.*?)\n```", README, re.S)
    assert block, "the README shows a cite-check run"
    out = io.StringIO()
    import os
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            status = main(["cite-check", block.group(1)])
    finally:
        os.chdir(cwd)
    assert status == 1
    assert out.getvalue().rstrip("\n") == block.group(2)
    assert "http://localhost:8000/0.4.0/rope.html#ROPE-PAIR-HALF" in README
