"""The ``posenc`` subcommands that are not the spec's own: ``model-check``, ``expectations``,
``spec coverage``, ``config import``, ``golden``, ``spec schema`` (and the check that every
divergence's mutant resolves, for ``spec validate``).
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

from posenc.harness import golden
from posenc.spec import SCHEMA_PATH, json_schema_text
from posenc.spec.errors import PosencError, SpecError, exception_text

#: The most bytes of a --report-json report ``posenc expectations init --from-report`` reads (far above what a run
#: writes); a bigger file, a FIFO or a device is refused, never read
REPORT_LIMIT = 1 << 30


def model_check(a) -> int:
    """``posenc model-check CONFIG``: ``pytest conformance --model CONFIG`` in a fresh process, then a
    short summary per scenario and attention implementation; pytest's exit status."""
    import json as _json
    import subprocess
    import tempfile

    from posenc.tools.model_matrix import _cell
    from posenc.tools.runs import suite_dir
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
        cmd = [sys.executable, "-m", "pytest", str(suite_dir()), "--model", str(a.config.resolve()),
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


def mutants_resolve(spec) -> None:
    """Every divergence's ``mutant:`` names a registered mutant (a typo would silently drop the
    diagnosis of that divergence): a SpecError listing each unresolved one, with a near name."""
    from posenc import registry
    registry.load_modules()
    known = registry.mutants()
    bad = []
    for d in spec.divergences.values():
        names = registry.model_mutants() if d.level == "model" else known
        if d.mutant not in names:
            near = difflib.get_close_matches(d.mutant, names, n=1)
            bad.append(f"{d.id}: {'model ' if d.level == 'model' else ''}mutant {d.mutant!r} is not registered"
                       + (f" (did you mean {near[0]!r}?)" if near else ""))
    if bad:
        raise SpecError("; ".join(bad) + " (mutants are registered with @posenc.families.mutant, model-level ones "
                        "with @posenc.families.model_mutant)")


def expectations(a) -> int:
    """``posenc expectations convert`` / ``init``: 0 on success, 2 on a file or report error."""
    from posenc.conformance import expectation_drafts as drafts
    from posenc.conformance import expectations as exp
    from posenc.spec.files import loads_json, read_regular
    try:
        if a.cmd == "convert":
            for f in a.files:
                counts = drafts.convert_file(f)
                print(f"{f}: already format {exp.FORMAT}, unchanged" if counts is None else
                      f"{f}: {counts[0]} line(s) of format 1 -> {counts[1]} line(s) of format {exp.FORMAT}")
            return 0
        try:
            report = loads_json(read_regular(a.from_report, REPORT_LIMIT, "report").decode("utf-8-sig"))
        except (OSError, ValueError) as e:  # a FIFO or a device (never opened blocking), malformed, nested too deep
            raise exp.ExpectationError(f"{a.from_report}: {e}") from None
        try:
            text, n = drafts.draft_from_report(report)
            left = drafts.left_out_of_draft(report)
        except exp.ExpectationError as e:  # named with the report's path, as every other error of it
            raise exp.ExpectationError(f"{a.from_report}: {e}") from None
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:  # a record of another shape
            raise exp.ExpectationError(f"{a.from_report}: not a --report-json report this kit can read "
                                       f"({type(e).__name__}: {e})") from None
        for line in left:  # said here too, not only in the file's header
            print(f"not drafted: {line}", file=sys.stderr)
        if a.out is None:
            sys.stdout.write(text)
        elif a.out.exists() or a.out.is_symlink():  # a link, dangling too: never written through
            raise exp.ExpectationError(f"{a.out} exists{' (a link)' if a.out.is_symlink() else ''}: not overwritten "
                                       "(choose another --out)")
        else:
            try:  # created, never opened if it appeared meanwhile (O_EXCL; a link is not followed)
                fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:  # a missing folder, no permission: one line, no traceback
                raise exp.ExpectationError(f"--out {a.out}: cannot write it ({e.strerror})") from None
            print(f"wrote {a.out}: {n} draft line(s); fill in every evidence before using it")
        return 0
    except exp.ExpectationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def coverage(examples) -> int:
    from posenc.harness.generation import DEFAULT_EXAMPLES
    from posenc.tools import coverage
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


def config_import(path: Path) -> int:
    import json as _json

    from posenc.hf import (
        axial_provenance,
        component_imports,
        is_rope_import,
        params_from_hf_config,
        read_config,
        rope_import,
        table_row,
    )
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


def golden_command(a) -> int:
    home, cases = golden.family_cases(a.family)  # the whole folder the family's goldens live in
    directory = a.dir or home
    if a.cmd == "regenerate":
        files = golden.regenerate(directory, cases=cases)
        print(f"wrote {len(files)} golden files and {golden.MANIFEST} to {directory}")
        return 0
    try:
        problems = golden.check(directory, cases=cases)  # each a GoldenError's one line, whatever went wrong
    except Exception as e:  # noqa: BLE001 - a kit bug reading the folder: one line too, never a traceback
        problems = [f"{directory}: golden check failed: {type(e).__name__}: {exception_text(e)}"]
    for line in problems:
        print(" ".join(str(line).split()))  # one line each (a message that quotes a multi-line error)
    print(f"golden check: {len(problems)} problem(s) in {len(cases)} cases")
    return 1 if problems else 0


def schema(check: bool) -> int:
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
