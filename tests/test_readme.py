"""The README stays true: its two first commands, and the example adapter it shows."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert README.index("```sh") < README.index("\n## ")
    assert first_block == [
        'pip install torch==2.13.0 -e ".[torch]" && pytest conformance --adapter torch',
        'pip install torch==2.13.0 -e ".[test]" && pytest tests',
    ]


def test_readme_example_is_the_file_ci_runs():
    example = (ROOT / "docs" / "example_adapter.py").read_text().rstrip("\n")
    assert f"```python\n{example}\n```" in README
    assert len(example.splitlines()) <= 40


def test_ci_runs_the_readme_commands_and_every_adapter():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "awk '/^```sh$/" in ci and 'bash -c "$cmd"' in ci
    for adapter in ("numpy", "torch", "hf-transformers"):
        assert adapter in ci
    assert "--dtype all" in ci and "docs/example_adapter.py" in ci
