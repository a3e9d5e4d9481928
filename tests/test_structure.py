"""The kit's shape is enforced, not described (docs/architecture.md, "Rooms and layers", "Public API").

* the import contracts of ``.importlinter`` (layers, no room but the families imports a family, the tools
  never import the suite, adapters and families import only the public façades) hold: import-linter, the
  tool made for this, checks them here and in CI;
* no cycle between modules, function-level imports counted (``if TYPE_CHECKING:`` ones not);
* no module of the package over :data:`MAX_MODULE_LINES` lines, no function over
  :data:`MAX_FUNCTION_LINES`, no room over :data:`MAX_ROOM_SHARE` of the package's lines;
* the code outside the package that shows how to extend the kit (``docs/example*.py``, the toy family)
  imports only the façades; the kit itself imports no deprecated module, and each deprecated module warns;
* no module of the suite names a family (a family's module path or an operation's name).
"""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_ROOM_SHARE = 0.30
#: Modules kept for one release (spec 0.4.x) that re-export what moved; importing one warns.
DEPRECATED = ("posenc.conformance.cases", "posenc.conformance.suite", "posenc.conformance.checks",
              "posenc.conformance.runner", "posenc.conformance.golden", "posenc.conformance.inference",
              "posenc.spec.hf_config", "posenc.reference.ops", "posenc.reference.mutants")
#: What code outside the kit may import (docs/architecture.md, "Public API"): the spec and the reference
#: in full, and one façade per role of the rooms above them.
FACADES = ("posenc.spec", "posenc.reference", "posenc.adapters", "posenc.adapters.model", "posenc.families",
           "posenc.harness.checks", "posenc.harness.generators", "posenc.hf")
FULL = ("posenc.spec", "posenc.reference")  # every module of these is public
EXTERNAL = sorted([*ROOT.glob("docs/example*.py"), *(ROOT / "tests" / "toy_family").glob("*.py")])


def _rooms() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(CONFIG)
    return cfg["importlinter"]["root_packages"].split()


def _files() -> dict[str, Path]:
    """module name -> file, for every module of the package (every room)."""
    import importlib.util
    out = {}
    for room in _rooms():
        base = Path(list(importlib.util.find_spec(room).submodule_search_locations)[0])
        for p in sorted(base.rglob("*.py")):
            if p.name == "__main__.py":  # runs the command when imported
                continue
            rel = p.relative_to(base).with_suffix("")
            parts = [x for x in rel.parts if x != "__init__"]
            out[".".join([room, *parts])] = p
    return out


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--config", str(CONFIG), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout, r.stdout[-3000:]


def test_no_cycle_between_modules():
    import grimp
    graph = grimp.build_graph(*_rooms(), exclude_type_checking_imports=True, cache_dir=None)
    cycles = _cycles({m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules})
    assert not cycles, "module cycles (function-level imports count):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return comps


def test_cycle_finder_finds_a_cycle():
    """The check above can fail: a planted two-module and three-module cycle are found."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == [["x", "y", "z"]]
    assert _cycles({"x": {"y"}, "y": set()}) == []


def _sizes(path: Path) -> tuple[int, list[tuple[str, int]]]:
    src = path.read_text(encoding="utf-8")
    funcs = [(f"{n.name} (line {n.lineno})", n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(src))
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return len(src.splitlines()), funcs


def test_modules_and_functions_are_small():
    over = []
    for name, path in _files().items():
        lines, funcs = _sizes(path)
        if lines > MAX_MODULE_LINES:
            over.append(f"module {name}: {lines} lines (at most {MAX_MODULE_LINES})")
        over += [f"function {name}.{f}: {n} lines (at most {MAX_FUNCTION_LINES})" for f, n in funcs
                 if n > MAX_FUNCTION_LINES]
    assert not over, "\n".join(over)


def test_the_size_check_can_fail(tmp_path):
    p = tmp_path / "big.py"
    p.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "\n" * MAX_MODULE_LINES, encoding="utf-8")
    lines, funcs = _sizes(p)
    assert lines > MAX_MODULE_LINES and funcs == [("f (line 1)", MAX_FUNCTION_LINES + 1)]


def test_no_room_holds_most_of_the_package():
    files = _files()
    per_room: dict[str, int] = {}
    for name, path in files.items():
        room = ".".join(name.split(".")[:2])
        per_room[room] = per_room.get(room, 0) + len(path.read_text(encoding="utf-8").splitlines())
    total = sum(per_room.values())
    big = {r: n / total for r, n in per_room.items() if n / total > MAX_ROOM_SHARE}
    assert not big, f"rooms over {MAX_ROOM_SHARE:.0%} of the package's {total} lines: {big}"


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``posenc`` import of a file: ``from posenc.x import y`` is ``posenc.x.y``
    where that is a module (a private module reached through its package), else ``posenc.x``; a string
    handed to ``importlib.import_module`` / ``__import__`` counts too."""
    import importlib.util
    out = []

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            return False
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names if a.name.split(".")[0] == "posenc"]
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0 and n.module.split(".")[0] == "posenc":
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                out.append((n.lineno, sub if n.module == "posenc" or is_module(sub) else n.module))
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in (
                "import_module", "__import__") and n.args and isinstance(n.args[0], ast.Constant) \
                and str(n.args[0].value).startswith("posenc"):
            out.append((n.lineno, str(n.args[0].value)))
    return out


def _public(module: str) -> bool:
    return module in FACADES or any(module.startswith(f + ".") for f in FULL)


@pytest.mark.parametrize("path", EXTERNAL, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_and_the_toy_family_import_only_the_facades(path):
    bad = [f"{path.relative_to(ROOT)}:{line}: {m}" for line, m in _imports(path) if not _public(m)]
    assert not bad, "imports of private modules (docs/architecture.md, 'Public API'):\n" + "\n".join(bad)


def test_the_facade_check_can_fail(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("from posenc.harness.runner import run_op\nfrom posenc.harness.checks import fail\n"
                 "from posenc import families\nimport posenc.spec.models\nfrom posenc.adapters import base\n"
                 "from posenc.families import rope\nimport importlib\nimportlib.import_module('posenc.harness.golden')\n",
                 encoding="utf-8")
    assert [m for _, m in _imports(p) if not _public(m)] == ["posenc.harness.runner", "posenc.adapters.base",
                                                             "posenc.families.rope", "posenc.harness.golden"]


def test_the_kit_imports_no_deprecated_module_and_each_warns():
    """Every module of the package imports with deprecation warnings as errors, but the deprecated ones
    (which must warn, each in a fresh process)."""
    modules = [m for m in _files() if m not in DEPRECATED]
    code = ("import importlib, sys, warnings\n"
            "warnings.filterwarnings('error', category=DeprecationWarning, module='posenc')\n"
            "warnings.filterwarnings('error', category=DeprecationWarning, message='posenc')\n"
            f"for m in {modules!r}:\n    importlib.import_module(m)\n"
            f"assert not [m for m in {list(DEPRECATED)!r} if m in sys.modules], 'a deprecated module was imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-4000:]
    for m in DEPRECATED:
        r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", f"import {m}"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode != 0 and "DeprecationWarning" in r.stderr and "is deprecated" in r.stderr, (m, r.stderr[-800:])


def test_no_module_of_the_suite_names_a_family():
    """The suite (``posenc.conformance``) finds the families through the registry: no string of it is a
    family module's path or an operation's name."""
    from posenc import registry
    ops = set(registry.spec().operations)
    bad = []
    for name, path in _files().items():
        if not name.startswith("posenc.conformance") or name in DEPRECATED:
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                hits = sorted(op for op in ops if re.search(rf"(?<![\w.]){re.escape(op)}(?!\w)", n.value))
                hits += ["posenc.families." + m for m in re.findall(r"posenc\.families\.(\w+)", n.value)]
                bad += [f"{name}:{n.lineno}: {w}" for w in hits]
    assert not bad, "\n".join(bad)


#: Kit modules reached by name at run time (not by an import statement), each a documented exception to
#: the layers: the registry discovers the kit's families by name, the tools find the suite to run it,
#: a deprecated re-export forwards to the families' modules.
DYNAMIC_ALLOWED = {("posenc.registry", "posenc.families"), ("posenc.tools", "posenc.conformance"),
                   ("posenc.reference.ops", "posenc.families")}


def _layers() -> list[set[str]]:
    cfg = configparser.ConfigParser()
    cfg.read(CONFIG)
    return [set(p.strip() for p in line.split("|")) for line in cfg["importlinter:contract:layers"]["layers"].splitlines()
            if line.strip()]


def _dynamic_targets(tree: ast.Module) -> list[tuple[int, str]]:
    """Kit modules a module reaches by a string: ``import_module``, ``find_spec``, ``resources.files``,
    ``__import__`` of a literal, an f-string or a module-level constant starting with ``posenc.``."""
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
              and isinstance(n.value.value, str) for t in n.targets if isinstance(t, ast.Name)}
    out = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in (
                "import_module", "find_spec", "files", "__import__") and n.args):
            continue
        a = n.args[0]
        text = (a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else
                consts.get(a.id) if isinstance(a, ast.Name) else
                "".join(v.value if isinstance(v, ast.Constant) else consts.get(getattr(v.value, "id", ""), "{}")
                        for v in a.values) if isinstance(a, ast.JoinedStr) else None)
        if text and text.startswith("posenc."):
            out.append((n.lineno, text))
    return out


def test_modules_reached_by_name_respect_the_layers():
    """A string import cannot go round the contracts: a kit module reached by name from a room above it is
    one of :data:`DYNAMIC_ALLOWED`."""
    rank = {room: i for i, layer in enumerate(_layers()) for room in layer}
    bad = []
    for name, path in _files().items():
        src_room = ".".join(name.split(".")[:2])
        for line, target in _dynamic_targets(ast.parse(path.read_text(encoding="utf-8"))):
            dst_room = ".".join(target.split(".")[:2])
            if dst_room == src_room or rank.get(dst_room, -1) > rank.get(src_room, 99):
                continue  # the same room, or a room below
            if (src_room, dst_room) in DYNAMIC_ALLOWED or (name, dst_room) in DYNAMIC_ALLOWED:
                continue
            bad.append(f"{name}:{line}: reaches {target} by name, above or beside its room")
    assert not bad, "\n".join(bad)


def test_the_dynamic_import_check_can_fail():
    tree = ast.parse("import importlib\nPKG = 'posenc.families'\ndef f(x):\n"
                     "    importlib.import_module(f'{PKG}.{x}')\n    importlib.import_module('posenc.harness.runner')\n")
    assert _dynamic_targets(tree) == [(4, "posenc.families.{}"), (5, "posenc.harness.runner")]


def test_every_package_folder_is_in_the_wheel():
    """Every folder of the kit with an ``__init__.py`` is a package of pyproject.toml, at its folder:
    ``posenc.tools.card`` was missing, so an installed wheel had no ``posenc card``."""
    import tomllib
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = conf["package-dir"]
    folders = {str(p.parent.relative_to(ROOT)) for p in ROOT.rglob("__init__.py")
               if p.parent.relative_to(ROOT).parts[0] not in ("tests", "docs", "bench", "scripts", "build")
               and not any(part.startswith(".") or part.endswith(".egg-info") for part in p.parent.relative_to(ROOT).parts)}
    def folder(pkg: str) -> str:  # its own package-dir entry, or its parent's folder and its name
        parent, _, name = pkg.rpartition(".")
        return dirs[pkg] if pkg in dirs else f"{folder(parent)}/{name}"
    packaged = {folder(p) for p in conf["packages"]}
    assert folders == packaged, sorted(folders ^ packaged)
