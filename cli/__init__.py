"""``posenc`` command line: goldens, spec schema, spec validation.

    posenc golden regenerate      recompute every golden with the reference, rewrite manifest (--family F)
    posenc golden check           tampering (sha256) and staleness (recompute) -> exit 1 on problems
    posenc spec schema [--check]  write (or check) spec/schema.json from the pydantic models
    posenc spec validate [DIR]    load and validate the spec YAML files
    posenc spec show ID           a clause, divergence or operation and what it links to (for a review)
    posenc spec list [FAMILY]     list clause and divergence IDs with their titles
    posenc spec release           keep the working spec as its version's released snapshot
    posenc config import FILE     a HF config.json as the spec's parameter models (JSON)
    posenc config survey [--check]  read every transformers model type (hf/hf_model_types.json,
                                  docs/model-coverage.md); needs the [hf] extra
    posenc matrix [--check]       run every adapter and model, write docs/conformance-matrix.{md,json} and
                                  docs/model-matrix.{md,json}
    posenc model-check CONFIG     a tiny random model of a config.json's architecture, every MODEL-* scenario
    posenc expectations convert FILE...          rewrite old expectation files (test_id lines) as format 2
    posenc expectations init --from-report R     draft an expectation file from a --report-json report
    posenc docs build [--out DIR] the spec as a static web site, every released version (needs the [docs] extra)
    posenc docs serve             serve the built site on localhost
    posenc cite-check PATH...     check the spec IDs cited in source files (exit 1 on an error)
    posenc card CONFIG            a positional-encoding card of a model's config.json (--format md|html)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from posenc import registry
from posenc.cli.commands import (
    config_import,
    coverage,
    expectations,
    golden_command,
    model_check,
    mutants_resolve,
    schema,
)
from posenc.cli.show import list_ids, show
from posenc.spec import load_spec
from posenc.spec.errors import PosencError, SpecError, printable


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="posenc", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="group", required=True)
    _golden_parser(sub)
    _spec_parsers(sub)
    _config_parsers(sub)
    _run_parsers(sub)
    _expectations_parser(sub)
    _docs_parsers(sub)
    return ap


def _golden_parser(sub) -> None:
    g = sub.add_parser("golden", help="golden vectors").add_subparsers(dest="cmd", required=True)
    for name, text in (("regenerate", "recompute every golden case with the reference"),
                       ("check", "detect tampering (sha256) and staleness (recomputation)")):
        p = g.add_parser(name, help=text)
        p.add_argument("--dir", type=Path, default=None, help="golden folder (default: the family's, or the kit's); "
                       "regenerate writes only into a new or empty folder or one holding a golden manifest.json")
        p.add_argument("--family", default=None, help="the golden folder of this registered family (every case "
                       "stored there); default: the kit's")


def _spec_parsers(sub) -> None:
    s = sub.add_parser("spec", help="the specification").add_subparsers(dest="cmd", required=True)
    p = s.add_parser("schema", help="export the JSON Schema of the spec files")
    p.add_argument("--check", action="store_true", help="fail if spec/schema.json is stale")
    p = s.add_parser("validate", help="load and validate the spec YAML files")
    p.add_argument("dir", nargs="?", type=Path)
    p = s.add_parser("show", help="print one clause, divergence or operation")
    p.add_argument("id", help="e.g. ROPE-PAIR-HALF, DIV-ROPE-BF16-ANGLE-PRODUCT (case-insensitive), rope.apply, or "
                   "ID@VERSION (the entry as that released version has it)")
    p.add_argument("--url", action="store_true", help="print only the ID's link on the spec site "
                   "(<base>/<version>/<family>.html#<ID>)")
    p.add_argument("--base", default=None, help="the site's base URL (default: $POSENC_DOCS_BASE, else "
                   "http://localhost:8000, where `posenc docs serve` serves it)")
    s.add_parser("release", help="keep the working spec as the released snapshot of its version "
                 "(spec/versions/<version>/, recorded in spec/versions/manifest.json)")
    p = s.add_parser("coverage", help="what the goldens and a default run's generated cases exercise: every "
                     "parameter field's values and both sides of every declared branch point")
    p.add_argument("--examples", type=int, default=None, help="generated cases per operation and dtype (default 6)")
    p = s.add_parser("list", help="list clause and divergence IDs")
    p.add_argument("family", nargs="?", help="only this family (rope, rope_scaling, sinusoidal, learned, "
                   "position_ids, alibi, t5, mrope, nope, or a registered one)")


def _config_parsers(sub) -> None:
    c = sub.add_parser("config", help="model configs").add_subparsers(dest="cmd", required=True)
    p = c.add_parser("import", help="read a HF config.json (4.x or 5.x) into the spec's parameter models; RoPE "
                     "models print {model_type, rule, read_from, sets: {all_layers | <layer type>: RopeParams}, "
                     "layers, provenance}, the other families {name: {params_model, ...}}")
    p.add_argument("file", type=Path)
    p = c.add_parser("survey", help="read every model type of the installed transformers: write the model-type "
                     "table the import reads (package data of posenc.hf) and DOCS/model-coverage.md (needs the [hf] "
                     "extra)")
    p.add_argument("--check", action="store_true", help="fail if either differs from what transformers gives")
    p.add_argument("--docs", type=Path, default=Path("docs"), metavar="DIR",
                   help="the folder of model-coverage.md (default: docs, in the working directory)")
    p.add_argument("--table", type=Path, default=None, metavar="PATH",
                   help="the model-type table (default: the one the import reads, hf_model_types.json of posenc.hf)")


def _run_parsers(sub) -> None:
    """``posenc matrix`` and ``posenc model-check``: commands that run the suite."""
    p = sub.add_parser("matrix", help="run every adapter and model (one process each) and write the conformance "
                       "matrix and the model matrix")
    p.add_argument("--adapter", action="append", dest="adapters", metavar="NAME",
                   help="only this adapter (repeatable); default: every registered adapter but numpy")
    p.add_argument("--model", action="append", dest="models", metavar="NAME",
                   help="only this model (hf:<model_type>, repeatable); default: every architecture of the model matrix")
    p.add_argument("--dtype", default="all", help="dtypes to run (default: all)")
    p.add_argument("--out", type=Path, default=None, help="the matrices' folder (default: docs, in the working "
                   "directory: a checkout's root)")
    p.add_argument("--check", action="store_true", help="fail if the committed matrix differs (write nothing)")
    p.add_argument("--jobs", type=int, default=1, help="adapters run in parallel (default 1)")
    p.add_argument("--device", default="cpu", help="device for every adapter (default cpu)")
    p = sub.add_parser("model-check", help="a tiny random model of a config.json's architecture with its positional "
                       "parameters: every MODEL-* scenario, the report and a short summary (needs the [hf] extra)")
    p.add_argument("config", type=Path, help="a Hugging Face config.json")
    p.add_argument("--dtype", default="float32", help="float32 (default), float64, bfloat16, float16, a comma list, or all")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    p.add_argument("--report-json", type=Path, default=None, metavar="PATH", help="also write the full report here")
    p.add_argument("--expectations", default=None, metavar="PATH|none",
                   help="an expectation file, or none (every failure counts); default: the architecture's recorded "
                        "divergences of transformers")


def _docs_parsers(sub) -> None:
    d = sub.add_parser("docs", help="the spec as a static web site").add_subparsers(dest="cmd", required=True)
    p = d.add_parser("build", help="write the site: every released spec version, cards of the registry's models")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: ./posenc-site)")
    p.add_argument("--base", default=None, help="the base URL the pages are published under (default: "
                   "$POSENC_DOCS_BASE, else http://localhost:8000)")
    p = d.add_parser("serve", help="serve a built site on localhost (build it first when absent)")
    p.add_argument("--dir", type=Path, default=None, help="the built site (default: ./posenc-site)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other than a loopback "
                   "address makes the site reachable from the network, and warns)")
    p = sub.add_parser("cite-check", help="check the spec IDs cited in source files: strict `posenc: ID@VERSION` "
                       "citations are errors when unknown, superseded, of a version that does not exist or changed "
                       "in meaning since; bare IDs are warnings")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders to scan")
    p.add_argument("--format", choices=("text", "json"), default="text", dest="fmt")
    p.add_argument("--no-warnings", action="store_true", help="report errors only")
    p = sub.add_parser("card", help="a positional-encoding card of a model: family, parameters with provenance, "
                       "applicable clauses, figures and plots, each wrapped implementation's status")
    p.add_argument("config", type=Path, help="a Hugging Face config.json, or hf:<model_type> / a registry model name")
    p.add_argument("--format", choices=("md", "html"), default="md", dest="fmt")
    p.add_argument("--out", type=Path, default=None, help="folder for the card and its plots (default: print the "
                   "Markdown, plots in ./posenc-card-<name>/)")


def _expectations_parser(sub) -> None:
    e = sub.add_parser("expectations", help="expectation files (known divergences of an implementation)")
    e = e.add_subparsers(dest="cmd", required=True)
    p = e.add_parser("convert", help="rewrite expectation files of the old format (test_id lines) as format 2, "
                     "in place, merging lines that differ only by dtype")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p = e.add_parser("init", help="draft a format-2 expectation file from a --report-json report")
    p.add_argument("--from-report", type=Path, required=True, metavar="REPORT", help="a --report-json report")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="write the draft here (refuses to overwrite); default: print it")


class _Shown:
    """stderr with every character that is not printable escaped, line by line (:func:`posenc.spec.errors.printable`):
    an error that quotes a hostile file name or config key cannot clear the screen, colour the rest of the
    output or reverse a line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write("\n".join(printable(line) for line in text.split("\n")))

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main(argv=None) -> int:
    err, sys.stderr = sys.stderr, _Shown(sys.stderr)
    try:
        return _main(argv)
    except BrokenPipeError:  # `posenc spec show ... | head`: the reader stopped; not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        sys.stderr = err


def _main(argv=None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.group == "expectations":
            return expectations(a)
        if a.group == "matrix":
            from posenc.tools import matrix
            from posenc.tools.model_matrix import default_models
            both = not a.adapters and not a.models
            return matrix.main(a.adapters or (matrix.default_adapters() if both else []), a.dtype,
                               a.out or matrix.DOCS_DIR, a.check, a.jobs, a.device,
                               tuple(a.models or (default_models() if both else ())))
        if a.group == "model-check":
            return model_check(a)
        if a.group == "docs":
            from posenc.tools import docs_site
            return docs_site.main(a)
        if a.group == "cite-check":
            from posenc.tools import cite_check
            return cite_check.main(a)
        if a.group == "card":
            from posenc.tools import card
            return card.main(a)
        if a.group == "config":
            if a.cmd == "survey":
                from posenc.hf import survey
                return survey.main(a.check, a.docs, a.table)
            return config_import(a.file)
        if a.group == "golden":
            return golden_command(a)
        if a.cmd == "schema":
            return schema(a.check)
        if a.cmd == "coverage":
            return coverage(a.examples)
        if a.cmd == "release":
            from posenc.spec.versions import release
            load_spec()  # only a valid spec is released (the kit's own files: a registered family is not the kit's)
            print(f"released spec {release()}: spec/versions/{load_spec().version}/ (update spec/CHANGELOG.md's heading)")
            return 0
        spec = registry.spec() if getattr(a, "dir", None) is None else load_spec(a.dir)
        if a.cmd == "validate" and a.dir is None:  # the packaged spec: every family's registrations too
            registry.load_checks()
        if a.cmd == "validate":
            mutants_resolve(spec)
            if a.dir is None:
                from posenc.spec.versions import check_released_unchanged
                problem = check_released_unchanged()
                if problem:
                    raise SpecError(problem)
            print(f"spec {spec.version}: {len(spec.clauses)} clauses, {len(spec.divergences)} divergences, "
                  f"{len(spec.operations)} operations: ok")
            return 0
        if a.cmd == "list":
            return list_ids(spec, a.family)
        return show(spec, a.id, a.url, a.base)
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
