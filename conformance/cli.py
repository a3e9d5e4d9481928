"""``posenc`` command line: goldens, spec schema, spec validation.

    posenc golden regenerate      recompute every golden with the reference, rewrite manifest (--family F)
    posenc golden check           tampering (sha256) and staleness (recompute) -> exit 1 on problems
    posenc spec schema [--check]  write (or check) spec/schema.json from the pydantic models
    posenc spec validate [DIR]    load and validate the spec YAML files
    posenc spec show ID           a clause, divergence or operation and what it links to (for a review)
    posenc spec list [FAMILY]     list clause and divergence IDs with their titles
    posenc spec release           keep the working spec as its version's released snapshot
    posenc config import FILE     a HF config.json as the spec's parameter models (JSON)
    posenc config survey [--check]  read every transformers model type (spec/registry/hf_model_types.json,
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
import difflib
import sys
from pathlib import Path

from posenc.spec import SCHEMA_PATH, json_schema_text, load_spec
from posenc.spec.errors import PosencError, SpecError

from . import golden


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="posenc", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="group", required=True)
    g = sub.add_parser("golden", help="golden vectors").add_subparsers(dest="cmd", required=True)
    for name, text in (("regenerate", "recompute every golden case with the reference"),
                       ("check", "detect tampering (sha256) and staleness (recomputation)")):
        p = g.add_parser(name, help=text)
        p.add_argument("--dir", type=Path, default=None, help="golden folder (default: the family's, or the kit's)")
        p.add_argument("--family", default=None, help="the golden folder of this registered family (every case "
                       "stored there); default: the kit's")
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
    c = sub.add_parser("config", help="model configs").add_subparsers(dest="cmd", required=True)
    p = c.add_parser("import", help="read a HF config.json (4.x or 5.x) into the spec's parameter models; RoPE "
                     "models print {model_type, rule, read_from, sets: {all_layers | <layer type>: RopeParams}, "
                     "layers, provenance}, the other families {name: {params_model, ...}}")
    p.add_argument("file", type=Path)
    p = c.add_parser("survey", help="read every model type of the installed transformers: write "
                     "spec/registry/hf_model_types.json and docs/model-coverage.md (needs the [hf] extra)")
    p.add_argument("--check", action="store_true", help="fail if either differs from what transformers gives")
    p = sub.add_parser("matrix", help="run every adapter and model (one process each) and write the conformance "
                       "matrix and the model matrix")
    p.add_argument("--adapter", action="append", dest="adapters", metavar="NAME",
                   help="only this adapter (repeatable); default: every registered adapter but numpy")
    p.add_argument("--model", action="append", dest="models", metavar="NAME",
                   help="only this model (hf:<model_type>, repeatable); default: every architecture of the model matrix")
    p.add_argument("--dtype", default="all", help="dtypes to run (default: all)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: the kit's docs/)")
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
    _expectations_parser(sub)
    _docs_parsers(sub)
    return ap


def _docs_parsers(sub) -> None:
    d = sub.add_parser("docs", help="the spec as a static web site").add_subparsers(dest="cmd", required=True)
    p = d.add_parser("build", help="write the site: every released spec version, cards of the registry's models")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: ./posenc-site)")
    p.add_argument("--base", default=None, help="the base URL the pages are published under (default: "
                   "$POSENC_DOCS_BASE, else http://localhost:8000)")
    p = d.add_parser("serve", help="serve a built site on localhost (build it first when absent)")
    p.add_argument("--dir", type=Path, default=None, help="the built site (default: ./posenc-site)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
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


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `posenc spec show ... | head`: the reader stopped; not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv=None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.group == "expectations":
            return _expectations(a)
        if a.group == "matrix":
            from . import matrix
            from .model_matrix import default_models
            both = not a.adapters and not a.models
            return matrix.main(a.adapters or (matrix.default_adapters() if both else []), a.dtype,
                               a.out or matrix.DOCS_DIR, a.check, a.jobs, a.device,
                               tuple(a.models or (default_models() if both else ())))
        if a.group == "model-check":
            return _model_check(a)
        if a.group == "docs":
            from . import docs_site
            return docs_site.main(a)
        if a.group == "cite-check":
            from . import cite_check
            return cite_check.main(a)
        if a.group == "card":
            from . import card
            return card.main(a)
        if a.group == "config":
            if a.cmd == "survey":
                from . import hf_models
                return hf_models.main(a.check)
            return _config_import(a.file)
        if a.group == "golden":
            return _golden(a)
        if a.cmd == "schema":
            return _schema(a.check)
        if a.cmd == "coverage":
            return _coverage(a.examples)
        if a.cmd == "release":
            from posenc.spec.versions import release
            load_spec()  # only a valid spec is released
            print(f"released spec {release()}: spec/versions/{load_spec().version}/ (update spec/CHANGELOG.md's heading)")
            return 0
        spec = load_spec(getattr(a, "dir", None))
        if a.cmd == "validate" and a.dir is None:  # the packaged spec: every family's registrations too
            from posenc import families
            families.load_checks()
        if a.cmd == "validate":
            _mutants_resolve(spec)
            if a.dir is None:
                from posenc.spec.versions import check_released_unchanged
                problem = check_released_unchanged()
                if problem:
                    raise SpecError(problem)
            print(f"spec {spec.version}: {len(spec.clauses)} clauses, {len(spec.divergences)} divergences, "
                  f"{len(spec.operations)} operations: ok")
            return 0
        if a.cmd == "list":
            return _list(spec, a.family)
        return _show(spec, a.id, a.url, a.base)
    except PosencError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _model_check(a) -> int:
    """``posenc model-check CONFIG``: ``pytest conformance --model CONFIG`` in a fresh process, then a
    short summary per scenario and attention implementation; pytest's exit status."""
    import json as _json
    import subprocess
    import tempfile
    from .model_matrix import _cell
    if not a.config.is_file():
        print(f"error: {a.config}: no such file", file=sys.stderr)
        return 2
    from posenc.adapters import load_model_adapter
    try:  # the config's errors named here, before a test process starts
        load_model_adapter(str(a.config)).info()
    except PosencError as e:
        print(f"error: posenc model-check {a.config}: {str(e).split(': ', 1)[-1]}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(a.report_json) if a.report_json else Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pytest", str(Path(__file__).resolve().parent), "--model", str(a.config.resolve()),
               "--dtype", a.dtype, "--device", a.device, "--report-json", str(report.resolve()), "-q", "-rfE",
               "-p", "no:cacheprovider", "--import-mode=importlib"]
        if a.expectations is not None:
            cmd += ["--expectations", a.expectations]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if not report.is_file():
            print((proc.stdout + proc.stderr).strip(), file=sys.stderr)
            return proc.returncode or 2
        rep = _json.loads(report.read_text(encoding="utf-8"))
    if "= FAILURES =" in proc.stdout:  # the failures as pytest printed them, before the summary
        print(proc.stdout.split("= FAILURES =", 1)[1].split("posenc conformance:")[0].strip(" =\n"))
    grid: dict = {}
    for r in rep["results"]:
        attn, _, scen = r["case"].partition("-")
        grid.setdefault(scen, {}).setdefault(attn, {})[r["dtype"]] = r
    info = rep.get("model") or {}
    print(f"posenc model-check {a.config}: {rep['adapter']} ({info.get('architecture')}, transformers "
          f"{rep['versions'].get('transformers')}), dtypes {', '.join(rep['dtypes'])}")
    if info.get("notes"):
        print(info["notes"])
    attns = info.get("attn_implementations") or sorted({k for v in grid.values() for k in v})
    w = max(len(s) for s in grid) + 2 if grid else 10
    cells = {scen: [_cell(by_attn[x]) if by_attn.get(x) else "." for x in attns] for scen, by_attn in grid.items()}
    widths = [max([len(x)] + [len(c[i]) for c in cells.values()]) + 2 for i, x in enumerate(attns)]
    print(f"{'scenario':{w}s}" + "".join(f"{x:{n}s}" for x, n in zip(attns, widths)).rstrip())
    for scen, row in cells.items():
        print(f"{scen:{w}s}" + "".join(f"{c:{n}s}" for c, n in zip(row, widths)).rstrip())
    if any("diverges" in r["outcome"] for r in rep["results"]):
        print(f"diverges: what transformers itself does against the clause, recorded in {rep['expectations']} "
              "(posenc spec show DIV-...)")
    if any(r["outcome"] in ("failed", "error") and r.get("diagnosis") for r in rep["results"]):
        print("FAIL (DIV-...): a failure and the known divergence that reproduces it; `posenc spec show DIV-...` says "
              "whose behaviour it is (its evidence), the failures above where and how")
    print(f"exit status {proc.returncode}" + (f"; report: {a.report_json}" if a.report_json else ""))
    return proc.returncode


def _mutants_resolve(spec) -> None:
    """Every divergence's ``mutant:`` names a registered mutant (a typo would silently drop the
    diagnosis of that divergence): a SpecError listing each unresolved one, with a near name."""
    from posenc import families
    families.load_modules()
    known = families.mutants()
    bad = []
    for d in spec.divergences.values():
        names = families.model_mutants() if d.level == "model" else known
        if d.mutant not in names:
            near = difflib.get_close_matches(d.mutant, names, n=1)
            bad.append(f"{d.id}: {'model ' if d.level == 'model' else ''}mutant {d.mutant!r} is not registered"
                       + (f" (did you mean {near[0]!r}?)" if near else ""))
    if bad:
        raise SpecError("; ".join(bad) + " (mutants are registered with @posenc.families.mutant, model-level ones "
                        "with @posenc.families.model_mutant)")


def _expectations(a) -> int:
    """``posenc expectations convert`` / ``init``: 0 on success, 2 on a file or report error."""
    import json as _json

    from . import expectations as exp
    try:
        if a.cmd == "convert":
            for f in a.files:
                counts = exp.convert_file(f)
                print(f"{f}: already format {exp.FORMAT}, unchanged" if counts is None else
                      f"{f}: {counts[0]} line(s) of format 1 -> {counts[1]} line(s) of format {exp.FORMAT}")
            return 0
        try:
            report = _json.loads(Path(a.from_report).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise exp.ExpectationError(f"{a.from_report}: {e}") from None
        text, n = exp.draft_from_report(report)
        if a.out is None:
            sys.stdout.write(text)
        elif a.out.exists():
            raise exp.ExpectationError(f"{a.out} exists: not overwritten (choose another --out)")
        else:
            a.out.write_text(text, encoding="utf-8")
            print(f"wrote {a.out}: {n} draft line(s); fill in every evidence before using it")
        return 0
    except exp.ExpectationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _coverage(examples) -> int:
    from . import coverage
    from .generated import DEFAULT_EXAMPLES
    fields, branches = coverage.report(DEFAULT_EXAMPLES if examples is None else examples)
    print("parameter fields (golden and generated cases):")
    for r in fields:
        print("  " + r.describe())
    print("branch points:")
    for r in branches:
        print("  " + r.describe())
    gaps = sum(not r.ok for r in fields) + sum(not r.ok for r in branches)
    print(f"{gaps} gap(s)")
    return 1 if gaps else 0


def _config_import(path: Path) -> int:
    import json as _json

    from posenc.spec.hf_config import (axial_provenance, component_imports, is_rope_import, params_from_hf_config,
                                       read_config, rope_import, table_row)
    try:
        config = read_config(path)
        components = component_imports(config)
        imported = rope_import(config) if components is None and is_rope_import(config) else None
        found = {} if imported is not None or components is not None else params_from_hf_config(config)
    except SpecError as e:  # the messages name the field as config.json: ...; say which file it was
        msg = str(e)
        raise SpecError(f"{path}: {msg.removeprefix('config.json: ')}" if msg.startswith("config.json: ") else
                        f"{path}{msg.removeprefix('config.json')}" if msg.startswith("config.json") else msg) from None
    if components is not None:  # RoPE in several sub-models (BLT): each one's import, and why the top is not read
        note = table_row(config)["components_evidence"]
        print(_json.dumps({"components": {a: imp.as_json() for a, imp in components.items()}, "note": note}, indent=2))
    elif imported is not None:  # RoPE: the sets (per layer type or all_layers), the rule, the provenance
        print(_json.dumps(imported.as_json(), indent=2))
    else:
        out = {k: {"params_model": type(v).__name__, **v.model_dump(mode="json", exclude_none=True)}
               for k, v in found.items()}
        if "axial" in out:  # a module's own grid: Llama 4 vision's positions, EoMT-DINOv3's grid_size
            extra = axial_provenance(config)
            if "positions" in extra:
                out["axial"]["positions"] = extra.pop("positions")
            if extra:
                out["axial"]["provenance"] = extra
        print(_json.dumps(out, indent=2))
    return 0


def _golden(a) -> int:
    home, cases = golden.family_cases(a.family)  # the whole folder the family's goldens live in
    directory = a.dir or home
    if a.cmd == "regenerate":
        files = golden.regenerate(directory, cases=cases)
        print(f"wrote {len(files)} golden files and {golden.MANIFEST} to {directory}")
        return 0
    problems = golden.check(directory, cases=cases)
    for line in problems:
        print(line)
    print(f"golden check: {len(problems)} problem(s) in {len(cases)} cases")
    return 1 if problems else 0


def _schema(check: bool) -> int:
    text = json_schema_text()
    if check:
        if not SCHEMA_PATH.is_file() or SCHEMA_PATH.read_text() != text:
            print(f"{SCHEMA_PATH} is stale: run `posenc spec schema`")
            return 1
        print("schema is fresh")
        return 0
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


def _list(spec, family) -> int:
    from posenc import families
    if family and family not in spec.families:
        print(f"error: unknown family {family!r}; families: {', '.join(spec.families)}", file=sys.stderr)
        return 2
    order = {name: i for i, name in enumerate(families.FAMILIES)}
    for fam in sorted(spec.families.values(), key=lambda f: order.get(f.family, len(order))):
        if family and fam.family != family:
            continue
        w = max(len(x) for x in [c.id for c in fam.clauses] + [d.id for d in fam.divergences]
                + [o.name for o in fam.operations]) + 2
        print(f"{fam.family} ({', '.join(fam.id_prefixes)}):")
        for head, rows in (("clauses", [(c.id, c.title + ("" if c.required else " (opt-in)")) for c in fam.clauses]),
                           ("divergences", [(d.id, d.description) for d in fam.divergences]),
                           ("operations", [(o.name, o.title) for o in fam.operations])):
            if rows:
                print(f"  {head}:")
                for ident, text in rows:
                    text = " ".join(text.split())  # a folded YAML block ends in a newline
                    print(f"    {ident:{w}s}{text}" + (" [superseded]" if ident in spec.divergences
                                                       and spec.divergences[ident].superseded_by else ""))
    return 0


def _print_model(data: dict) -> None:
    for key, value in data.items():
        if value in ([], None, ""):
            continue
        if isinstance(value, list):
            print(f"{key}:")
            for v in value:
                print("  - " + (", ".join(f"{k}: {x}" for k, x in v.items() if x is not None and x is not False and x != [])
                                if isinstance(v, dict) else str(v)))
        else:
            print(f"{key}: {str(value).strip()}")


def _show(spec, ident: str, url: bool = False, base=None) -> int:
    if "@" in ident:
        return _show_version(*ident.split("@", 1), url=url, base=base)
    items = {**spec.clauses, **spec.divergences}
    key = ident.lower() if "." in ident else ident.upper()  # operations are lower-case, IDs upper-case
    item = items.get(key) or spec.operations.get(key)
    if item is None and _show_case(ident.lower()):
        return 0
    if item is None:
        near = difflib.get_close_matches(key, list(spec.operations) if "." in ident else list(items), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else "; `posenc spec list` shows them all"
        print(f"error: unknown clause, divergence or operation {ident!r}{hint}", file=sys.stderr)
        return 2
    from posenc.spec.versions import snapshot

    from .docs_site import page_url
    # a registered family's IDs are not in the kit's released snapshots: no page on the kit's site
    on_site = key in items and snapshot(spec.version).entry(key) is not None
    link = page_url(key, base=base) if on_site else None
    if url:
        if link is None:
            why = ("is an operation: the site links clauses and divergences" if key not in items else
                   "belongs to a family registered outside the kit: the kit's site has no page for it")
            print(f"error: {ident!r} {why}", file=sys.stderr)
            return 2
        print(link)
        return 0
    data = item.model_dump(mode="json")
    print(f"{data.pop('id', None) or data.pop('name')}  (posenc spec {spec.version})" + (f"  {link}" if link else ""))
    if getattr(item, "superseded_by", None):
        print(f"SUPERSEDED by {', '.join(item.superseded_by)}: kept with its meaning since {item.since}; "
              "no longer checked or diagnosed")
    _print_model(data)
    _show_domains(spec, key)
    _show_links(spec, key)
    return 0


def _show_version(ident: str, version: str, url: bool = False, base=None) -> int:
    """``posenc spec show ID@VERSION``: the entry as that released version has it (its snapshot)."""
    import yaml

    from posenc.spec.versions import resolve, snapshot

    from .docs_site import page_url
    ident = ident.upper()
    entry = snapshot(version).entry(ident)  # SpecError for a version that does not exist
    if entry is None:
        near = difflib.get_close_matches(ident, list(snapshot(version).entries), n=3)
        print(f"error: {ident} does not exist in spec {version}" + (f"; did you mean {', '.join(near)}?" if near else ""),
              file=sys.stderr)
        return 2
    link = page_url(ident, version, base=base)
    if url:
        print(link)
        return 0
    print(f"{ident}  (posenc spec {version})  {link}")
    data = {k: v for k, v in entry.items() if k not in ("id", "kind")}
    print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100).rstrip())
    for code, message, hint in resolve(ident, version).problems:
        print(f"now: {message} ({hint})")
    return 0


def _show_domains(spec, key: str) -> None:
    """The declared domains (range or values, default, library defaults) of the parameters a
    clause names, or of every field of the parameter models an operation's cases use."""
    from posenc import families as fams
    if key in spec.operations:
        models = {type(c.params).__name__ for c in fams.all_cases() if c.op == key}
        wanted = [(m, f) for m in sorted(models) for f in spec.parameters.get(m, {})]
    elif key in spec.clauses:
        names = {p.name for p in spec.clauses[key].parameters}
        wanted = [(m, f) for m, fields in spec.parameters.items() for f in fields if f in names]
    else:
        return
    if not wanted:
        return
    print("parameter domains:")
    for m, f in wanted:
        r = spec.parameters[m][f]
        dom = (f"values {r.values}" if r.values is not None else
               f"nested {r.nested}" if r.nested else
               f"range [{r.range[0]:g}, {r.range[1]:g}]" + (" (log)" if r.scale == "log" else "")
               + (f", multiple of {r.multiple_of}" if r.multiple_of else ""))
        extra = "".join([f"; default {r.default}" if r.default is not None else "",
                         f"; library defaults {r.library_defaults}" if r.library_defaults else "",
                         f"; length {r.length}" if r.length else "", f"; {r.description}" if r.description else ""])
        print(f"  - {m}.{f}: {dom}{extra}")


def _show_case(case_id: str) -> bool:
    """A golden case by its ID (as failure messages name it): operation, clauses, params, test ID."""
    from posenc import families
    case = next((c for c in families.all_cases() if c.id == case_id), None)
    if case is None:
        return False
    print(f"{case.id}  (golden case of operation {case.op}; test_golden[<dtype>-{case.test_id}])")
    print(f"clauses: {', '.join(case.clauses)}")
    print(f"params: {type(case.params).__name__}({case.params.model_dump(exclude_none=True)})")
    print(f"inputs: {', '.join(case.inputs)}")
    if case.note:
        print(f"note: {case.note}")
    return True


def _show_scenario(spec, sc) -> None:
    """A MODEL-* clause's scenario: its test, what it applies to, and the divergences its run is
    diagnosed with (the model-level ones that violate it, and the operation-level position bugs
    with a model-level form that violate the clauses its rule uses)."""
    from posenc import families as fams
    print(f"scenario: {sc.name} -- test_model[<dtype>-<attention>-{sc.name}@{'+'.join((sc.clause, *sc.implies))}]; "
          f"pytest conformance --model NAME --clause {sc.clause}")
    print(f"applies to: {', '.join(sc.kinds)} models" + (f"; needs {', '.join(sc.needs)}" if sc.needs else ""))
    print(f"position rule uses: {', '.join(sc.implies) or 'none'}")
    clauses = {sc.clause, *sc.implies}
    divs = [d for d in spec.current_divergences.values()
            if clauses & set(d.violates) and (d.level == "model" or d.mutant in fams.model_mutants())]
    print("divergences diagnosed here:" + ("" if divs else " none"))
    for d in divs:
        print(f"  - {d.id}: {d.description}")


def _show_links(spec, key: str) -> None:
    """What the one-ID thread reaches from a clause, divergence or operation: operations and their
    reference functions, golden cases, invariant checks, divergences and mutants."""
    from posenc import families as fams
    if key in spec.divergences and spec.divergences[key].level == "model":
        d = spec.divergences[key]
        fn = fams.model_mutants().get(d.mutant)
        print(f"model-level mutant (a rule over a scenario run's facts): "
              + (f"{fn.__module__}.{fn.__qualname__}" if fn else f"{d.mutant} (not registered)"))
        sc = [s for c, s in fams.scenarios().items() if c in d.violates]
        print("scenarios it is diagnosed in: " + (", ".join(f"{s.name} ({s.clause})" for s in sc) or "none")
              + "; planted in transformers models by tests/model_bugs.py")
        return
    if key in fams.scenarios():
        _show_scenario(spec, fams.scenarios()[key])
        return
    if key in spec.divergences:
        d = spec.divergences[key]
        forms = fams.mutants().get(d.mutant, {})
        fn = fams.MUTANT_NAMES.get(d.mutant)
        print(f"mutant function: {fn.__module__}.{fn.__qualname__}" if fn else f"mutant function: {d.mutant} (not registered)")
        print(f"mutant operations: {', '.join(sorted(forms)) or 'none'}")
        cases = [c for c in fams.all_cases() if c.op in forms and set(c.clauses) & set(d.violates)]
        print(f"golden cases of the clauses it violates ({len(cases)}): {', '.join(c.id for c in cases) or 'none'}")
        return
    if key in spec.operations:
        ops, clauses = [spec.operations[key]], set(spec.operations[key].clauses)
        cases = [c for c in fams.all_cases() if c.op == key]
        print(f"reference: {fams.reference_of(key).qualname}")
    else:
        ops, clauses = [o for o in spec.operations.values() if key in o.clauses], {key}
        cases = [c for c in fams.all_cases() if key in c.clauses]
        print("operations:")
        for o in ops:
            print(f"  - {o.name}: adapter method {o.method}{'' if o.call is None else f' -> {o.call}'}; "
                  f"reference {fams.reference_of(o.name).qualname}")
    print(f"golden cases ({len(cases)}):")
    for c in cases:
        print(f"  - {c.id} ({c.op}): test_golden[<dtype>-{c.test_id}]")
    gens = [o.name for o in ops if o.name in fams.generators()]
    print("generated cases: " + (", ".join(f"test_generated[<dtype>-{o}]" for o in gens) or "none"))
    invs = {inv for cid in clauses for inv in spec.clauses[cid].invariants}
    checks = [c for c in fams.checks().values()
              if (c.invariant in invs and set(c.handlers) & {o.name for o in ops})
              or (c.select and any(c.select(x) and set(c.clauses(x)) & clauses for x in cases))]
    print("invariant checks:" + ("" if checks else " none"))
    for c in checks:
        print(f"  - test_{c.name} ({c.invariant or 'own selection'}): {', '.join(sorted(set(c.handlers)))}")
    divs = [d for d in spec.divergences.values() if clauses & set(d.violates)]
    print("divergences:" + ("" if divs else " none"))
    for d in divs:
        print(f"  - {d.id} (mutant {d.mutant}): {d.description}")


if __name__ == "__main__":
    sys.exit(main())
