"""The conformance matrix: clause x adapter x dtype, written as Markdown and JSON under ``docs/``.

``posenc matrix`` runs ``pytest conformance --adapter NAME --dtype all --report-json ...`` once per
adapter, each in its own process (frameworks and Keras backends are fixed per process), and
aggregates the per-test verdicts of :mod:`posenc.conformance.plugin` into one cell per clause,
adapter and dtype:

* ``pass``        every check of the clause passed (``pass (k/n unsupported)`` when some were not
                  expressible);
* ``FAIL k/n``    k checks failed and no expectation file explains them;
* ``diverges``    the adapter's expectation file records the failure as a named divergence (listed);
* ``unsupported`` the adapter cannot express any check of the clause (the reasons are listed);
* ``.``           no verdict on the clause at that dtype: no test of it, or each test of it
                  ended in a recorded divergence, which counts under the clause its line names.

The ``numpy`` adapter runs the reference itself: it proves golden freshness only, so it is not a
column of the matrix.  The JSON holds the cells with their counts, every recorded divergence and failing test ID, and
the unsupported reasons; the Markdown is its summary.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter, defaultdict
from pathlib import Path

from posenc import registry
from posenc.spec import SPEC_VERSION
from posenc.spec.models import DTYPES
from posenc.tools import model_matrix
from posenc.tools.runs import run_all, run_summary, version_label

#: Where ``posenc matrix`` writes and checks the matrices unless ``--out`` says otherwise: ``docs`` of the
#: working directory (a checkout's root, as CI runs it), never a path inside the installed package.
DOCS_DIR = Path("docs")
MD_NAME, JSON_NAME = "conformance-matrix.md", "conformance-matrix.json"
#: Not a conforming implementation: it is the reference (golden freshness only).
EXCLUDED = {"numpy"}
DIFF_LINES = 120  # of the markdown diff --check prints for a stale matrix


def default_adapters() -> list[str]:
    from posenc.adapters import registered
    return [n for n in sorted(registered()) if n not in EXCLUDED]


def _cell(c: Counter, divs: set[str]) -> str:
    n = sum(c.values())
    if n == 0:
        return "."
    if c["error"]:  # the kit's own data failed verification: no verdict on the adapter
        return f"KIT ERROR {c['error']}/{n}"
    if c["failed"]:
        return f"FAIL {c['failed']}/{n}"
    if c["diverges"]:
        return "diverges: " + ", ".join(sorted(divs)) + (f" ({c['passed']}/{n} pass)" if c["passed"] else "")
    if c["passed"]:
        return "pass" if not c["unsupported"] else f"pass ({c['unsupported']}/{n} unsupported)"
    return "unsupported"


def aggregate(reports: list[dict], device: str = "cpu") -> dict:
    """The matrix as plain data: ``cells[dtype][clause][adapter]`` plus per-adapter summaries."""
    spec = registry.spec()
    cells: dict = {d: defaultdict(dict) for d in DTYPES}
    adapters = []
    for rep in reports:
        name = rep["adapter"]
        counts: dict = defaultdict(Counter)
        divs: dict = defaultdict(set)
        reasons: Counter = Counter()
        for r in rep["results"]:
            counted = r.get("counted")  # what the run's summary counted, per clause
            if counted is None:  # a report from before `counted`
                clauses = r["violated"] if r["outcome"] in ("failed", "diverges") and r["violated"] else r["clauses"]
                counted = {c: r["outcome"] for c in clauses}
            for c, outcome in counted.items():
                counts[(r["dtype"], c)][outcome] += 1
                if r["divergence"]:
                    divs[(r["dtype"], c)].add(r["divergence"])
            if r["outcome"] == "unsupported":
                reasons[r["reason"]] += 1
        for (dtype, clause), c in counts.items():
            cells[dtype][clause][name] = {"verdict": _cell(c, divs[(dtype, clause)]),
                                          **{k: c[k] for k in ("passed", "failed", "diverges", "unsupported")},
                                          "divergences": sorted(divs[(dtype, clause)])}
        total = Counter(r["outcome"] for r in rep["results"])
        forms: dict = defaultdict(Counter)  # call form -> its goldens' outcomes, every dtype (ROPE-CALL-FORM)
        form_divs: dict = defaultdict(set)
        for r in rep["results"]:
            form = form_operation(str(r.get("case") or ""))
            if form:
                forms[form][r["outcome"]] += 1
                form_divs[form] |= {r["divergence"]} if r["divergence"] else set()
        adapters.append({
            "adapter": name, "framework": rep["framework"],
            "versions": {k: version_label(v) for k, v in rep["versions"].items()},
            "expectations": rep["expectations"], "exit_status": rep["exit_status"],
            "examples": rep.get("examples"),
            "table_dtype": rep.get("table_dtype", "activation"),
            "totals": {k: total[k] for k in ("passed", "failed", "diverges", "unsupported")}
            | ({"error": total["error"]} if total["error"] else {}),
            "divergences": sorted({(r["test_id"], r["divergence"]) for r in rep["results"] if r["divergence"]}),
            "failures": sorted(r["test_id"] for r in rep["results"] if r["outcome"] in ("failed", "error")),
            "unsupported_reasons": sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])),
            "call_forms": {f: {"verdict": _cell(c, form_divs[f]), **{k: c[k] for k in ("passed", "failed", "diverges", "unsupported")}}
                           for f, c in sorted(forms.items())},
        })
    return {
        "spec_version": SPEC_VERSION,
        "device": device,
        "clauses": sorted(c for c in spec.clauses if spec.family_of_clause(c) != "model"),  # MODEL-*: the model matrix
        "dtypes": [d for d in DTYPES if cells[d]],
        "adapters": adapters,
        "cells": {d: {c: dict(v) for c, v in sorted(cells[d].items())} for d in DTYPES if cells[d]},
    }


def form_operation(case: str) -> str:
    """The call form operation a test of ``case`` ran through (``<case id>~<form>``: ``rope.apply_tokens``,
    ``mrope.apply_tokens``, ...), or ``""`` for a test of the case itself (or a case of no registered
    operation)."""
    cid, _, form = case.partition("~")
    c = registry.cases_by_id().get(cid) if form else None
    if c is None:
        return ""
    return next((o.name for o in registry.spec().operations.values() if o.form_of == c.op and o.form == form), "")


def markdown(m: dict) -> str:
    names = [a["adapter"] for a in m["adapters"]]
    lines = [
        f"# Conformance matrix (posenc spec {m['spec_version']})",
        "",
        "Written by `posenc matrix` (do not edit): every adapter's `pytest conformance --adapter NAME "
        f"--dtype all` on device `{m['device']}`, one process each. Cells: `pass`; `KIT ERROR k/n` (a golden failed verification: no verdict); `FAIL k/n` (not explained by the "
        "adapter's expectation file); `diverges: DIV-...` (a recorded, named divergence: see "
        "`posenc spec show DIV-...`); `unsupported` (the adapter cannot express the check; reasons below); "
        "`.` (no verdict on the clause at that dtype: no check of it, or each check ended in a recorded "
        "divergence, counted under the clause its expectation line names). *Generated cases*: drawn cases per "
        "operation and dtype (`--posenc-examples`, or the adapter's budget). *Tables*: the dtype of the cos/sin tables the "
        "adapter gives and gets at bfloat16 / float16 (`table_dtype`, ROPE-TABLE-DTYPE: `activation` or `float32`, both "
        "conforming). The `numpy` adapter is the reference itself and "
        "proves golden freshness only, so it is not a column. Counts per cell: "
        f"[{JSON_NAME}]({JSON_NAME}).",
        "",
        "## Adapters",
        "",
        "| adapter | framework | versions | generated cases | tables | passed | failed | diverges | unsupported | exit |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for a in m["adapters"]:
        t = a["totals"]
        vers = ", ".join(f"{k} {v}" for k, v in a["versions"].items())
        ex = a.get("examples")
        lines.append(f"| `{a['adapter']}` | {a['framework']} | {vers} | {'-' if ex is None else ex} | {a.get('table_dtype', 'activation')} | {t['passed']} | {t['failed']} | "
                     f"{t['diverges']} | {t['unsupported']} | {a['exit_status']} |")
    for dtype in m["dtypes"]:
        lines += ["", f"## {dtype}", "", "| clause | " + " | ".join(f"`{n}`" for n in names) + " |",
                  "|---|" + "---|" * len(names)]
        for clause, row in m["cells"][dtype].items():
            lines.append(f"| {clause} | " + " | ".join(row[n]["verdict"] if n in row else "." for n in names) + " |")
    forms = sorted({f for a in m["adapters"] for f in a.get("call_forms", {})})
    if forms:
        lines += ["", "## Call forms", "", "Each golden of an operation run through each call form the adapter declares "
                  "(`call_forms`; spec `form_of`, clause ROPE-CALL-FORM), every dtype together; a form it does not "
                  "declare is `unsupported`.", "", "| form | " + " | ".join(f"`{n}`" for n in names) + " |",
                  "|---|" + "---|" * len(names)]
        for f in forms:
            lines.append(f"| {f} | " + " | ".join(a.get("call_forms", {}).get(f, {}).get("verdict", ".")
                                                for a in m["adapters"]) + " |")
    lines += ["", "## Recorded divergences", ""]
    any_div = False
    for a in m["adapters"]:
        for test_id, div in a["divergences"]:
            any_div = True
            lines.append(f"- `{a['adapter']}` `{test_id}`: {div} (from `{a['expectations']}`)")
    if not any_div:
        lines.append("None recorded.")
    lines += ["", "## Unsupported, by reason", ""]
    for a in m["adapters"]:
        if a["unsupported_reasons"]:
            lines.append(f"### `{a['adapter']}`")
            lines.append("")
            lines += [f"- {n} x {reason}" for reason, n in a["unsupported_reasons"]]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render(m: dict) -> dict[str, str]:
    """``{file name: text}`` of the matrix: what ``posenc matrix`` writes and ``--check`` compares."""
    return {MD_NAME: markdown(m), JSON_NAME: json.dumps(m, indent=1, sort_keys=True) + "\n"}


def write(m: dict, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in render(m).items():
        (out_dir / name).write_text(text, encoding="utf-8")
        paths.append(out_dir / name)
    return paths


def main(adapters: list[str], dtype: str, out_dir: Path, check: bool, jobs: int, device: str = "cpu",
         models: tuple[str, ...] = ()) -> int:
    """Run every adapter (and every model of ``models``: the model matrix,
    :mod:`posenc.tools.model_matrix`), write (or ``check``) the matrices; 1 if a run failed or
    a file is stale.  Only the matrices of what ran are written or checked."""
    ok = True
    jobs_list = [(n, "--adapter") for n in adapters] + [(n, "--model") for n in models]
    runs = run_all(jobs_list, dtype, device, jobs)
    reports, model_reports = [], []
    for name, option, report, text, seconds in runs:
        summary = run_summary(text)
        status = report["exit_status"] if report else "no report"
        print(f"matrix: {name}: {summary} (exit {status}, {seconds:.0f} s)")
        if report is not None and not report.get("complete", True):
            print(f"matrix: {name}: the run was cut short (report complete: false): its cells are not written")
            report = None
        if report is None or report["exit_status"] != 0:
            ok = False
            print("\n".join(text.splitlines()[-60:]))
        if report is not None:
            (model_reports if option == "--model" else reports).append(report)
    files: dict[str, str] = {}
    if adapters:
        files.update(render(aggregate(reports, device)))
    if models:
        files.update(model_matrix.render(model_matrix.aggregate(model_reports, device)))
    if check:
        for name, text in files.items():
            path = out_dir / name
            old = path.read_text(encoding="utf-8") if path.is_file() else ""
            if old != text:
                ok = False
                print(f"matrix: {path} is stale: run `posenc matrix` and commit it")
                if name.endswith(".md"):  # what changed, readable in a CI log
                    diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), "committed", "this run",
                                                     n=0, lineterm=""))
                    print("\n".join(diff[:DIFF_LINES]) + (f"\n... {len(diff) - DIFF_LINES} more lines"
                                                          if len(diff) > DIFF_LINES else ""))
        print("matrix: fresh" if ok else "matrix: check failed")
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out_dir / name).write_text(text, encoding="utf-8")
            print(f"matrix: wrote {out_dir / name}")
    return 0 if ok else 1
