"""The kit from a wheel: data found by package, not by path (issue: from a wheel, paths built from
``__file__`` across folders point into site-packages).

The wheel is built (not editable) and installed into a fresh virtual environment; its dependencies are
the ones this test environment has (a ``.pth`` line adds this environment's site-packages after the
new one's, so the installed ``posenc`` is the wheel's).  From another directory: ``posenc spec
validate``, ``posenc config import`` on a config.json, and ``pytest --pyargs posenc.conformance
--adapter numpy`` (the goldens, the model-type tables and the expectation files come from the wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    wheels = tmp / "dist"
    src = tmp / "src"  # built from a copy: a build writes build/ and *.egg-info beside the sources
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                              ".import_linter_cache", ".hypothesis", "posenc-site*"))
    import setuptools
    # this environment's setuptools builds it where it is new enough (pyproject.toml: setuptools>=69), else
    # pip's isolated build environment does
    isolation = [] if int(setuptools.__version__.split(".")[0]) >= 69 else ["--use-pep517"]
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                        *(["--no-build-isolation"] if not isolation else isolation), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (wheel,) = wheels.glob("posenc_conformance-*.whl")
    venv = tmp / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    py = venv / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    new_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]} if Path(p).is_dir()]
    (new_site / "posenc-test-deps.pth").write_text("\n".join(ours) + "\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv, elsewhere, env


def _run(wheel_env, *cmd, timeout=600):
    venv, elsewhere, env = wheel_env
    exe = venv / "bin" / cmd[0]
    return subprocess.run([str(exe), *cmd[1:]], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_installed_kit_is_the_wheels(wheel_env):
    venv = wheel_env[0]
    r = _run(wheel_env, "python", "-c", "import posenc.spec, posenc.conformance.state as s, posenc.hf.tables as t, "
             "posenc.registry as g; print(posenc.spec.__file__); print(s.EXPECTATIONS_DIR.is_dir()); "
             "print(t.HF_TABLE_PATH.is_file()); print(g.kit_golden_dir()); print((g.kit_golden_dir() / 'manifest.json')"
             ".is_file())")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split()
    assert lines[0].startswith(str(venv)) and ROOT.as_posix() not in lines[0], lines
    assert lines[1:3] == ["True", "True"] and lines[3].startswith(str(venv)) and lines[4] == "True", lines


def test_spec_validate_from_the_wheel(wheel_env):
    r = _run(wheel_env, "posenc", "spec", "validate")
    assert r.returncode == 0 and ": ok" in r.stdout, r.stdout + r.stderr[-3000:]


def test_config_import_from_the_wheel(wheel_env):
    cfg = wheel_env[1] / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
                               "max_position_embeddings": 4096, "rope_theta": 500000.0,
                               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 2048}}))
    r = _run(wheel_env, "posenc", "config", "import", str(cfg))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    p = out["sets"]["all_layers"]
    assert out["model_type"] == "llama" and p["head_dim"] == 64 and p["rope_type"] == "llama3", out


def test_the_suite_runs_by_package_from_the_wheel(wheel_env):
    r = _run(wheel_env, "python", "-m", "pytest", "--pyargs", "posenc.conformance", "--adapter", "numpy",
             "-p", "no:cacheprovider", "-q", "-k", "rope or learned")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = r.stdout.strip().splitlines()[-1]
    assert " passed" in summary and " failed" not in summary and " error" not in summary, summary
