"""``posenc`` command line: goldens, spec schema, spec validation.

    posenc golden regenerate      recompute every golden with the reference, rewrite manifest
    posenc golden check           tampering (sha256) and staleness (recompute) -> exit 1 on problems
    posenc spec schema [--check]  write (or check) spec/schema.json from the pydantic models
    posenc spec validate [DIR]    load and validate the spec YAML files
    posenc spec show CLAUSE-ID    print one clause (for citing in a review)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from posenc.spec import SCHEMA_PATH, json_schema_text, load_spec
from posenc.spec.errors import PosencError

from . import golden


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="posenc", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="group", required=True)
    g = sub.add_parser("golden", help="golden vectors").add_subparsers(dest="cmd", required=True)
    for name in ("regenerate", "check"):
        p = g.add_parser(name)
        p.add_argument("--dir", type=Path, default=golden.GOLDEN_DIR)
    s = sub.add_parser("spec", help="the specification").add_subparsers(dest="cmd", required=True)
    p = s.add_parser("schema")
    p.add_argument("--check", action="store_true", help="fail if spec/schema.json is stale")
    p = s.add_parser("validate")
    p.add_argument("dir", nargs="?", type=Path)
    p = s.add_parser("show")
    p.add_argument("clause_id")
    a = ap.parse_args(argv)
    try:
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
        print(yaml.safe_dump(spec.clause(a.clause_id).model_dump(mode="json"), sort_keys=False, allow_unicode=True))
        return 0
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
