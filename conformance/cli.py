"""``posenc`` command line: goldens, spec schema, spec validation.

    posenc golden regenerate      recompute every golden with the reference, rewrite manifest
    posenc golden check           tampering (sha256) and staleness (recompute) -> exit 1 on problems
    posenc spec schema [--check]  write (or check) spec/schema.json from the pydantic models
    posenc spec validate [DIR]    load and validate the spec YAML files
    posenc spec show ID           print one clause or divergence (for citing in a review)
    posenc spec list [FAMILY]     list clause and divergence IDs with their titles
    posenc config import FILE     a HF config.json as the spec's parameter models (JSON)
    posenc matrix [--check]       run every adapter, write docs/conformance-matrix.{md,json}
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from posenc.spec import SCHEMA_PATH, json_schema_text, load_spec
from posenc.spec.errors import PosencError

from . import golden


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="posenc", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="group", required=True)
    g = sub.add_parser("golden", help="golden vectors").add_subparsers(dest="cmd", required=True)
    for name, text in (("regenerate", "recompute every golden case with the reference"),
                       ("check", "detect tampering (sha256) and staleness (recomputation)")):
        p = g.add_parser(name, help=text)
        p.add_argument("--dir", type=Path, default=golden.GOLDEN_DIR)
    s = sub.add_parser("spec", help="the specification").add_subparsers(dest="cmd", required=True)
    p = s.add_parser("schema", help="export the JSON Schema of the spec files")
    p.add_argument("--check", action="store_true", help="fail if spec/schema.json is stale")
    p = s.add_parser("validate", help="load and validate the spec YAML files")
    p.add_argument("dir", nargs="?", type=Path)
    p = s.add_parser("show", help="print one clause or divergence")
    p.add_argument("id", help="e.g. ROPE-PAIR-HALF or DIV-ROPE-BF16-ANGLES (case-insensitive)")
    p = s.add_parser("list", help="list clause and divergence IDs")
    p.add_argument("family", nargs="?", help="only this family (rope, rope_scaling, sinusoidal, learned, "
                   "position_ids, alibi, t5)")
    c = sub.add_parser("config", help="model configs").add_subparsers(dest="cmd", required=True)
    p = c.add_parser("import", help="read a HF config.json (4.x or 5.x) into the spec's parameter models")
    p.add_argument("file", type=Path)
    p = sub.add_parser("matrix", help="run every adapter (one process each) and write the conformance matrix")
    p.add_argument("--adapter", action="append", dest="adapters", metavar="NAME",
                   help="only this adapter (repeatable); default: every registered adapter but numpy")
    p.add_argument("--dtype", default="all", help="dtypes to run (default: all)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: the kit's docs/)")
    p.add_argument("--check", action="store_true", help="fail if the committed matrix differs (write nothing)")
    p.add_argument("--jobs", type=int, default=1, help="adapters run in parallel (default 1)")
    p.add_argument("--device", default="cpu", help="device for every adapter (default cpu)")
    a = ap.parse_args(argv)
    try:
        if a.group == "matrix":
            from . import matrix
            return matrix.main(a.adapters or matrix.default_adapters(), a.dtype, a.out or matrix.DOCS_DIR,
                               a.check, a.jobs, a.device)
        if a.group == "config":
            import json as _json

            from posenc.spec.hf_config import params_from_hf_config
            found = params_from_hf_config(a.file)
            if set(found) == {"rope"}:  # RoPE models: the RopeParams themselves
                print(found["rope"].model_dump_json(indent=2, exclude_none=True))
            else:
                print(_json.dumps({k: {"params_model": type(v).__name__, **v.model_dump(mode="json", exclude_none=True)}
                                   for k, v in found.items()}, indent=2))
            return 0
        if a.group == "golden" and a.cmd == "regenerate":
            files = golden.regenerate(a.dir)
            print(f"wrote {len(files)} golden files and {golden.MANIFEST} to {a.dir}")
            return 0
        if a.group == "golden":
            problems = golden.check(a.dir)
            for line in problems:
                print(line)
            print(f"golden check: {len(problems)} problem(s) in {len(golden.CASES)} cases")
            return 1 if problems else 0
        if a.cmd == "schema":
            text = json_schema_text()
            if a.check:
                if not SCHEMA_PATH.is_file() or SCHEMA_PATH.read_text() != text:
                    print(f"{SCHEMA_PATH} is stale: run `posenc spec schema`")
                    return 1
                print("schema is fresh")
                return 0
            SCHEMA_PATH.write_text(text)
            print(f"wrote {SCHEMA_PATH}")
            return 0
        spec = load_spec(getattr(a, "dir", None))
        if a.cmd == "validate":
            print(f"spec {spec.version}: {len(spec.clauses)} clauses, {len(spec.divergences)} divergences: ok")
            return 0
        if a.cmd == "list":
            for fam in spec.families.values():
                if a.family and fam.family != a.family:
                    continue
                print(f"{fam.family}:")
                for c in fam.clauses:
                    print(f"  {c.id:28s} {c.title}{'' if c.required else ' (opt-in)'}")
                for d in fam.divergences:
                    print(f"  {d.id:28s} {d.description}")
            return 0
        return _show(spec, a.id)
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _show(spec, ident: str) -> int:
    items = {**spec.clauses, **spec.divergences}
    item = items.get(ident.upper())
    if item is None:
        near = difflib.get_close_matches(ident.upper(), items, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else "; `posenc spec list` shows them all"
        print(f"error: unknown clause or divergence ID {ident!r}{hint}", file=sys.stderr)
        return 2
    data = item.model_dump(mode="json")
    print(f"{data.pop('id')}  (posenc spec {spec.version})")
    for key, value in data.items():
        if value in ([], None, ""):
            continue
        if isinstance(value, list):
            print(f"{key}:")
            for v in value:
                print("  - " + (", ".join(f"{k}: {x}" for k, x in v.items() if x is not None)
                                if isinstance(v, dict) else str(v)))
        else:
            print(f"{key}: {str(value).strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
