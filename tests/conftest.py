"""Shared helpers for the kit's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import hypothesis.strategies  # noqa: F401 - likewise: a re-imported Hypothesis rejects the first one's strategies
import ml_dtypes  # noqa: F401 - likewise: ml_dtypes 0.7 refuses to register its dtypes twice
import torch  # noqa: F401 - imported before pytester's in-process runs snapshot sys.modules

import posenc.adapters.hf_transformers  # noqa: F401 - likewise (C extensions cannot be imported twice)
import posenc.adapters.torch_adapter  # noqa: F401
import posenc.conformance
import posenc.harness.generation  # noqa: F401
import posenc.harness.runner  # noqa: F401
import posenc.harness.failure  # noqa: F401 - one module for the tests that patch its golden loading
from posenc import registry

# every family's modules (references, cases, checks, generators, inference models) likewise: the registry
# imports them by name on first use, and one first imported inside an in-process run would be dropped with
# the snapshot and, imported again, register its parts twice
registry.load_checks()

CONFORMANCE_DIR = Path(posenc.conformance.__file__).resolve().parent

pytest_plugins = ["pytester"]


@pytest.fixture
def run_suite(pytester):
    """Run the conformance suite in-process, the adapter in pytest's own process too
    (``--posenc-isolation none``: the patch tests patch libraries here; tests/test_isolation.py
    checks that an isolated run gives the same verdicts); returns pytester's RunResult."""

    def run(adapter: str, *args: str):
        iso = () if any(a.startswith("--posenc-isolation") for a in args) else ("--posenc-isolation", "none")
        return pytester.runpytest_inprocess(
            str(CONFORMANCE_DIR), "--adapter", adapter, "-p", "no:cacheprovider",
            "--import-mode=importlib", "-q", "-rfEsxX", *iso, *args)

    return run


@pytest.fixture
def fails_naming(run_suite):
    """``fails_naming(adapter, k, divergence)``: run the suite on the ``-k`` selection and assert
    it fails with ``divergence`` among the diagnoses; returns the output."""

    def check(adapter: str, k: str, divergence: str) -> str:
        r = run_suite(adapter, "-k", k)
        out = r.stdout.str()
        assert r.ret == 1 and f"    {divergence} (violates" in out, out[-2000:]
        return out

    return check


#: The files whose tests run the suite in a child run (tens of seconds each; `pytest tests -n 2 --durations=80`):
#: collected first, so that under `--dist worksteal` (the README's command) the worker that runs out steals
#: short tests at the end instead of one worker running a long test alone (under `--dist load`, xdist's default,
#: the first worker's first chunk would hold all of them).
HEAVY_FIRST = ("test_suite.py", "test_isolation.py", "test_xdist.py", "test_model_suite.py", "test_model_hostile.py",
               "test_model_review.py", "test_model_forms.py", "test_generated_expectations.py")


def pytest_collection_modifyitems(config, items):
    """Order only: the tests of :data:`HEAVY_FIRST` first, each file's tests in their own order."""
    rank = {name: k for k, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(HEAVY_FIRST)))
