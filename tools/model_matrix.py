"""The model matrix: architecture x scenario x attention implementation, under ``docs/``.

``posenc matrix`` runs ``pytest conformance --model hf:<model_type> --dtype all --report-json ...``
once per architecture of :mod:`posenc.adapters.hf_model.architectures` (each in its own process,
like the adapters) and writes ``docs/model-matrix.md`` and its JSON: for every architecture,
attention implementation and MODEL-* scenario, over the four dtypes, ``pass``; ``FAIL`` with the
dtypes (not explained by the architecture's expectation file); ``diverges: DIV-...`` with the
dtypes where not all of them (a recorded divergence of transformers itself, with its evidence in
``adapters/expectations/models/hf-<model_type>.yaml``); ``n/a`` (the scenario does not apply: the
reason is listed); ``unsupported`` (the model lacks a capability the scenario needs: listed).
``posenc matrix --check`` fails when the runs differ from the committed files.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from posenc import registry
from posenc.spec import SPEC_VERSION
from posenc.spec.models import DTYPES
from posenc.tools.runs import version_label

MD_NAME, JSON_NAME = "model-matrix.md", "model-matrix.json"


def default_models() -> list[str]:
    from posenc.adapters.hf_model.architectures import architectures
    return [f"hf:{a}" for a in architectures()]


def _scenarios() -> list[tuple[str, str]]:
    return [(sc.name, sc.clause) for sc in registry.scenarios().values()]


def _cell(by_dtype: dict[str, dict]) -> str:
    """One cell: the verdicts of one (model, attention, scenario) over the dtypes run."""
    outcomes = {d: r["outcome"] for d, r in by_dtype.items()}
    kinds = set(outcomes.values())
    if kinds == {"passed"}:
        return "pass"
    if kinds == {"n/a"}:
        return "n/a"
    if kinds == {"unsupported"}:
        return "unsupported"
    parts = []
    fails = [d for d, o in outcomes.items() if o in ("failed", "error")]
    if fails:  # with what the failures were diagnosed as, where a divergence reproduces them
        named = list(dict.fromkeys(m["divergence"] for d in fails for m in by_dtype[d].get("diagnosis") or ()))
        parts.append(f"FAIL {', '.join(fails)}" + (f" ({', '.join(named)})" if named else ""))
    divs: dict[str, list[str]] = defaultdict(list)
    for d, r in by_dtype.items():
        if r["outcome"] == "diverges":
            divs[r["divergence"]].append(d)
    for div, dts in divs.items():
        parts.append(f"diverges: {div}" + ("" if len(dts) == len(by_dtype) else f" ({', '.join(dts)})"))
    passed = [d for d, o in outcomes.items() if o == "passed"]
    if passed:  # beside something else: which dtypes passed
        parts.append(f"pass ({', '.join(passed)})")
    unsup = [d for d, o in outcomes.items() if o == "unsupported"]
    if unsup:
        parts.append(f"unsupported ({', '.join(unsup)})")
    return "; ".join(parts)


def aggregate(reports: list[dict], device: str = "cpu") -> dict:
    """The model matrix as plain data."""
    models, cells, reasons = [], {}, {}
    for rep in reports:
        name = rep["adapter"]
        info = rep.get("model") or {}
        grid: dict = defaultdict(dict)
        why: Counter = Counter()
        for r in rep["results"]:
            attn, _, scen = r["case"].partition("-")
            grid[(attn, scen)][r["dtype"]] = r
            if r["outcome"] in ("n/a", "unsupported"):
                why[f"{scen} ({r['outcome']}): {r['reason']}"] += 1
        total = Counter(r["outcome"] for r in rep["results"])
        models.append({"model": name, "architecture": info.get("architecture"), "kind": info.get("kind"),
                       "versions": {k: version_label(v) for k, v in rep["versions"].items()},
                       "expectations": rep["expectations"], "exit_status": rep["exit_status"],
                       "attn_implementations": info.get("attn_implementations", []),
                       "totals": {k: total[k] for k in ("passed", "failed", "diverges", "unsupported", "n/a")},
                       "failures": sorted(r["test_id"] for r in rep["results"] if r["outcome"] in ("failed", "error"))})
        cells[name] = {f"{attn}-{scen}": {"verdict": _cell(by), **{d: by[d]["outcome"] for d in by},
                                          "divergences": sorted({r["divergence"] for r in by.values() if r["divergence"]})}
                       for (attn, scen), by in sorted(grid.items())}
        reasons[name] = sorted(why.items())
    return {"spec_version": SPEC_VERSION, "device": device, "dtypes": list(DTYPES),
            "scenarios": [{"name": n, "clause": c} for n, c in _scenarios()], "models": models, "cells": cells,
            "reasons": reasons}


def markdown(m: dict) -> str:
    scen = m["scenarios"]
    lines = [
        f"# Model matrix (posenc spec {m['spec_version']})",
        "",
        "Written by `posenc matrix` (do not edit): `pytest conformance --model hf:<model_type> --dtype all` for every "
        f"architecture of the kit's tiny transformers models, on device `{m['device']}`, one process each "
        "(docs/model-adapter.md). A row is an architecture and attention implementation, a column a MODEL-* scenario; "
        "a cell sums up the four dtypes: `pass`; `FAIL <dtypes>` (not explained by the architecture's expectation file; "
        "with the divergences diagnosed); "
        "`diverges: DIV-... (<dtypes>)` (what transformers itself does against the clause, recorded with its evidence "
        "in `adapters/expectations/models/hf-<model_type>.yaml`: `posenc spec show DIV-...`); `n/a` (the scenario does "
        "not apply to the model); `unsupported` (the model lacks what the scenario needs). The reasons are listed below; "
        f"counts per dtype: [{JSON_NAME}]({JSON_NAME}).",
        "",
        "## Scenarios",
        "",
        "| column | clause |",
        "|---|---|",
    ]
    lines += [f"| {s['name']} | {s['clause']} |" for s in scen]
    lines += ["", "## Models", "",
              "| model | kind | versions | passed | failed | diverges | unsupported | n/a | exit |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for a in m["models"]:
        t = a["totals"]
        vers = ", ".join(f"{k} {v}" for k, v in a["versions"].items())
        lines.append(f"| `{a['model']}` | {a['kind']} | {vers} | {t['passed']} | {t['failed']} | {t['diverges']} | "
                     f"{t['unsupported']} | {t['n/a']} | {a['exit_status']} |")
    lines += ["", "## Verdicts", "", "| model | attention | " + " | ".join(s["name"] for s in scen) + " |",
              "|---|---|" + "---|" * len(scen)]
    for a in m["models"]:
        row = m["cells"][a["model"]]
        for attn in a["attn_implementations"]:
            lines.append(f"| `{a['model']}` | {attn} | " + " | ".join(row.get(f"{attn}-{s['name']}", {}).get("verdict", ".")
                                                               for s in scen) + " |")
    lines += ["", "## n/a and unsupported, by reason", ""]
    for a in m["models"]:
        reasons = m["reasons"].get(a["model"])
        if reasons:
            lines.append(f"### `{a['model']}`")
            lines.append("")
            lines += [f"- {n} x {reason}" for reason, n in reasons]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render(m: dict) -> dict[str, str]:
    return {MD_NAME: markdown(m), JSON_NAME: json.dumps(m, indent=1, sort_keys=True) + "\n"}
