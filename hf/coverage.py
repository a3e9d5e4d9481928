"""The coverage table (``model-coverage.md``): every transformers model type by the positional encoding
found in its code -- the RoPE types by the import's agreement with their own rotary module, every other
type by the names in its modeling source (:data:`SOURCE_FAMILIES`, evidence per row).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from posenc.hf.agreement import agreement
from posenc.hf.tables import _nested
from posenc.hf.modeling import is_axial_rope
from posenc.spec.errors import SpecError

#: positional encodings recognised in a modeling module's source, in order: (family, what the spec
#: covers of it or None, pattern).  A module may match several (a learned table and a sinusoid).
SOURCE_FAMILIES = (
    ("ALiBi", "ALIBI-*", r"alibi"),
    ("T5 relative buckets", "T5-*", r"relative_attention_num_buckets|_relative_position_bucket"),
    ("DeBERTa disentangled relative attention", None, r"DisentangledSelfAttention|pos_att_type"),
    ("Swin / BEiT relative position bias table", None, r"relative_position_bias_table"),
    ("Transformer-XL / XLNet relative sinusoid", None, r"r_w_bias|RelPartialLearnable|relative_positional_encoding"),
    ("Reformer axial learned embeddings", None, r"AxialPositionEmbeddings"),
    ("convolutional positional embedding", None, r"PositionalConvEmbedding|pos_conv_embed"),
    ("RoPE without rope_parameters", "ROPE-*", r"RotaryEmbedding|rotate_every_two|apply_rotary_pos_emb"
                                               r"|create_sinusoidal_positions"),
    ("2-D sine position embedding (DETR-style)", None, r"SinePositionEmbedding|PositionEmbeddingSine"),
    ("sinusoidal table", "SIN-*", r"SinusoidalPositionalEmbedding|def sinusoids|_get_sinusoid|sinusoidal_embedding"
                                  r"|def positional_encoding|SinusoidsPositionEmbedding"),
    ("learned patch position parameter (vision, interpolated)", None,
     r"position_embeddings = nn\.Parameter|pos_embed = nn\.Parameter|position_embedding = nn\.Parameter"),
    ("learned absolute table", "LEARNED-*", r"nn\.Embedding\(\s*config\.max_position_embeddings|position_embeddings = nn\.Embedding"
                                            r"|position_embedding = nn\.Embedding|nn\.Embedding\(self\.num_positions"
                                            r"|LearnedPositionalEmbedding"),
    ("other relative position scheme", None, r"relative_position_embeddings|rel_pos_|relative_position_index"),
    ("state-space / recurrent (no positions)", None, r"selective_scan|MambaMixer|ssm_state|RwkvLinearAttention"),
)


def default_config(model_type: str) -> dict:
    """The default config of a model type's transformers config class, as a ``config.json`` dict."""
    from transformers import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]().to_dict()


def _source(model_type: str) -> Optional[str]:
    import importlib.util

    from transformers.models.auto.configuration_auto import model_type_to_module_name
    mod = model_type_to_module_name(model_type)
    spec = importlib.util.find_spec(f"transformers.models.{mod}")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / f"modeling_{mod}.py"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def source_families(model_type: str) -> list[tuple[str, Optional[str], str]]:
    """``[(family, spec clauses or None, evidence)]`` found in the model type's modeling source."""
    text = _source(model_type)
    if text is None:
        return []
    out = []
    for family, clauses, pattern in SOURCE_FAMILIES:
        m = re.search(pattern, text)
        if m:
            out.append((family, clauses, m.group(0)))
    return out


def _sub_config_families(model_type: str) -> list[tuple[str, Optional[str], str]]:
    """The families of a composite model's sub-configs' model types (a wrapper whose modeling
    module builds its parts from other model types)."""
    try:
        d = default_config(model_type)
    except Exception:  # noqa: BLE001 - listed as found nothing
        return []
    out = []
    for key, sub in sorted(d.items()):
        if isinstance(sub, dict) and isinstance(sub.get("model_type"), str) and sub["model_type"] != model_type:
            for family, clauses, evidence in source_families(sub["model_type"]):
                if all(f != family for f, _, _ in out):
                    out.append((family, clauses, f"{key} {sub['model_type']}: {evidence}"))
    return out


def _exceptions() -> dict:
    import yaml

    from posenc.hf.tables import HF_EXCEPTIONS_PATH
    from posenc.spec import read_yaml
    from posenc.spec.errors import SpecError
    try:
        return read_yaml(HF_EXCEPTIONS_PATH.read_text(encoding="utf-8"))["exceptions"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError) as e:
        raise SpecError(f"{HF_EXCEPTIONS_PATH}: {e if isinstance(e, yaml.YAMLError) else 'no exceptions mapping'}"
                        ) from None


def coverage_rows(table: dict, results: Optional[dict] = None) -> list[dict]:
    """One row per model type: family, variant, status and evidence (see docs/model-coverage.md).
    ``results``: :func:`agreement` per RoPE model type when already computed (the kit test's)."""
    from posenc.hf.components import FAMILY_RULES, params_from_hf_config
    from posenc.hf.tables import MODEL_RULES
    from posenc.hf.mrope import MROPE_RULES
    exceptions = _exceptions()
    rows = table["model_types"]
    out = []
    for mt, row in sorted(rows.items()):
        r = {"model_type": mt, "config_class": row.get("config_class", "")}
        if "error" in row:
            r.update(family="unknown", variant="", status="default config does not build", evidence=row["error"])
        elif "defaults" in row:
            rope = row["defaults"]["rope_parameters"]
            types = sorted({s.get("rope_type", "default") for s in (rope.values() if _nested(rope) else [rope]) if s})
            variant = ", ".join(types) + (" per layer type" if _nested(rope) else "")
            variant += f" ({row['where']})" if row.get("where") else ""
            flag = row.get("pairing_flag")
            layout = [f"{row['pairing']} pairs" if row.get("pairing") not in (None, "half") else "",
                      f"{flag['key']}: {flag['true']} or {flag['false']} pairs" if flag else "",
                      "rotation -phi" if row.get("rotation") == "negative" else "",
                      "centred coordinates" if (row.get("axial") or {}).get("coordinates") == "centred" else ""]
            variant += "".join(f", {x}" for x in layout if x)  # what the table probed beyond the rope_type
            r.update(family="M-RoPE" if mt in MROPE_RULES or "mrope_section" in json.dumps(rope) else
                     "axial RoPE" if is_axial_rope(rope) or row.get("axial") else "RoPE",
                     variant=variant, evidence=row.get("rotary_class") or "; ".join(
                         f"{a}: {t}" for a, t in (row.get("components") or {}).items()))
            if "not_covered" in row:
                r["status"] = f"not covered: {row['not_covered']}"
            elif mt in exceptions:
                e = exceptions[mt]
                r["status"] = f"{'not covered' if e['kind'] == 'not-covered' else 'transformers defect'}: {e['what']}"
            else:
                status, detail = results[mt] if results and mt in results else agreement(mt, rows)
                r["status"] = "agrees" if status == "agrees" else f"{status}: {detail}"
                if status == "agrees" and detail.startswith("no RoPE"):  # switched off by default (Zamba2)
                    r["variant"] = f"none by default ({detail.split(' (')[0].removeprefix('no RoPE: ')})"
        else:
            found = source_families(mt) or _sub_config_families(mt)
            r["family"] = "; ".join(f for f, _, _ in found) or "none found"
            r["variant"] = ""
            r["evidence"] = "; ".join(f"`{e}`" for _, _, e in found) or "no positional code matched"
            covered = [c for _, c, _ in found if c]
            if mt in FAMILY_RULES or mt in MODEL_RULES:
                try:
                    params_from_hf_config(default_config(mt))
                    r["status"] = "imported"
                except SpecError as e:
                    r["status"] = f"import error: {e}"
            elif covered and len(covered) == len(found):
                r["status"] = f"covered by {', '.join(covered)}; no import rule"
            elif found:
                r["status"] = "not covered: " + ", ".join(f for f, c, _ in found if not c)
            else:
                r["status"] = "no positional encoding recognised (convolutional and recurrent models have none)"
        out.append(r)
    return out


def counts(results: dict) -> dict:
    """``{status: n}`` of :func:`agreement` results, and the RoPE model types' total."""
    c: dict[str, int] = {}
    for status, _ in results.values():
        c[status] = c.get(status, 0) + 1
    return {"rope_model_types": len(results), **dict(sorted(c.items()))}


def coverage_text(table: dict, results: Optional[dict] = None) -> str:
    rows = coverage_rows(table, results)
    rope = [r for r in rows if r.get("family") in ("RoPE", "M-RoPE", "axial RoPE")]
    agree = sum(r["status"] == "agrees" for r in rope)
    fam: dict[str, int] = {}
    for r in rows:
        for f in r["family"].split("; "):
            fam[f] = fam.get(f, 0) + 1
    lines = [
        f"# Model coverage (transformers {table['transformers']})", "",
        "Written by `posenc config survey` (do not edit): every model type transformers registers, its "
        "positional encoding and what the kit does with it. RoPE rows: the config import of the type's default "
        "config, computed by the reference, against the model's own rotary module (`inv_freq`, attention "
        "scaling, per layer type) and its apply function (`agrees`; tests/test_hf_model_types.py). Other rows: "
        "the family recognised in the modeling source (evidence: the matched name), `imported` where the config "
        "import has a rule. Exceptions and their reasons: `hf/hf_exceptions.yaml` and the survey's "
        "`not_covered` (`hf/hf_model_types.json`).", "",
        f"**{len(rows)} model types; {len(rope)} carry RoPE parameters, {agree} of them "
        f"({100 * agree / max(1, len(rope)):.1f} %) import and agree with transformers.**", "",
        "| family | model types |", "|---|---:|",
        *(f"| {f} | {n} |" for f, n in sorted(fam.items(), key=lambda kv: (-kv[1], kv[0]))), "",
        "| model type | config class | family | variant | status | evidence |", "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [f"`{r['model_type']}`", r["config_class"], r["family"], r["variant"], r["status"], r["evidence"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"
