"""The clauses a card lists for a component's parameters (RoPE's pairing, angle, scaling; a table's
row rule; ALiBi's slopes; T5's buckets), with their sources and each wrapped implementation's status.
"""

from __future__ import annotations

from functools import lru_cache

from posenc.tools.card.model import ClauseInfo


@lru_cache(maxsize=1)
def _spec():
    from posenc import registry
    return registry.spec()


def _clause_sources(clause) -> tuple[str, ...]:
    order = {"paper": 0}
    out = []
    for s in sorted(clause.sources, key=lambda s: order.get(s.kind, 1)):
        where = f", {s.location}" if s.location else ""
        out.append(f"{s.citation}{where} [{s.provenance}]")
    return tuple(out)


def _param_clauses(name: str, clause_ids) -> tuple[str, ...]:
    spec = _spec()
    return tuple(cid for cid in clause_ids if cid in spec.clauses
                 and any(p.name == name for p in spec.clauses[cid].parameters))


def _clause_infos(pairs: list[tuple[str, str]]) -> list[ClauseInfo]:
    from posenc.tools.matrix_status import clause_status
    spec = _spec()
    out, seen = [], set()
    for cid, why in pairs:
        if cid in seen or cid not in spec.clauses:
            continue
        seen.add(cid)
        c = spec.clauses[cid]
        out.append(ClauseInfo(cid, c.title, why, _clause_sources(c), clause_status(cid)))
    return out


_SCALE_CLAUSES = {
    "linear": (("SCALE-LINEAR", "rope_type linear"),),
    "dynamic": (("SCALE-DYNAMIC-NTK", "rope_type dynamic"),),
    "yarn": (("SCALE-YARN-RAMP", "rope_type yarn"), ("SCALE-YARN-FACTOR", "rope_type yarn"),
             ("SCALE-YARN-ATTENTION-FACTOR", "rope_type yarn")),
    "llama3": (("SCALE-LLAMA3", "rope_type llama3"),),
    "longrope": (("SCALE-LONGROPE-FACTORS", "rope_type longrope"),
                 ("SCALE-LONGROPE-ATTENTION-FACTOR", "rope_type longrope")),
    "proportional": (("SCALE-PROPORTIONAL", "rope_type proportional"),),
}


def _rope_clauses(p) -> list[tuple[str, str]]:
    cl = [("ROPE-INV-FREQ", "every RoPE set"), ("ROPE-ANGLE", "every RoPE set"),
          ("ROPE-PRECISION", "every RoPE set"), (f"ROPE-PAIR-{p.pairing.upper()}", f"pairing {p.pairing}")]
    if p.rdim < p.head_dim:
        cl.append(("ROPE-PARTIAL", f"rotary_dim {p.rdim} < head_dim {p.head_dim}"))
    f = getattr(p, "partial_rotary_factor", None)
    if f is not None:  # the width is sized from the fraction (SCALE-PROPORTIONAL: rounded down to even)
        rule = "2 * int(f * head_dim // 2)" if p.rope_type == "proportional" else "int(head_dim * f)"
        cl.append(("ROPE-ROTARY-FRACTION", f"partial_rotary_factor {f:g} of head_dim {p.head_dim}: "
                                           f"rotary width {rule} = {p.rdim}"))
    if getattr(p, "condense_ratio", None) is not None:
        cl.append(("ROPE-CONDENSE", f"condense_ratio {p.condense_ratio:g}: positions divided before the angle"))
    if p.rotation == "negative":
        cl.append(("ROPE-ROTATION-NEGATIVE", "rotation negative"))
    if p.attention_factor is not None or p.rope_type in ("yarn", "longrope"):
        cl.append(("ROPE-ATTENTION-FACTOR", "an attention factor other than 1 may apply"))
    cl += list(_SCALE_CLAUSES.get(p.rope_type, ()))
    if p.rope_type == "dynamic":
        cl.append(("SCALE-DYNAMIC-GROW", "dynamic_policy grow_until_reset") if p.dynamic_policy == "grow_until_reset"
                  else ("SCALE-DYNAMIC-PER-CALL", "dynamic_policy per_call (default)"))
    return cl


#: The clauses of the parameter models whose clauses do not depend on their values.
_FIXED_CLAUSES = {
    "GPT2EmbeddingParams": (("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-GPT2-SUM", "GPT-2 embeddings"),
                            ("LEARNED-GPT2-POSITIONS", "GPT-2 default positions")),
    "BertEmbeddingParams": (("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BERT-SUM", "BERT embeddings"),
                            ("LEARNED-BERT-TOKEN-TYPE", "token type table"),
                            ("LEARNED-BERT-POSITIONS", "BERT default positions")),
    "RobertaEmbeddingParams": (("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BERT-SUM", "BERT's sum and LayerNorm"),
                               ("LEARNED-BERT-TOKEN-TYPE", "token type table"),
                               ("LEARNED-ROBERTA-POSITIONS", "padding-aware rows")),
    "OPTEmbeddingParams": (("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-OPT-POSITIONS", "positions from the mask"),
                           ("LEARNED-OPT-OFFSET", "row = position + 2")),
    "BartEmbeddingParams": (("LEARNED-ROW-RANGE", "learned table"), ("LEARNED-BART-POSITIONS", "row = position + 2")),
    "LookupParams": (("LEARNED-ROW-RANGE", "learned table"),),
    "NopeParams": (("NOPE-LAYER-FLAGS", "per-layer RoPE flags"), ("NOPE-IDENTITY", "the layers without RoPE")),
}


def _clauses_of(p) -> list[tuple[str, str]]:
    """``(clause, why)`` of the clauses that apply to a parameter model."""
    name = type(p).__name__
    if name in _FIXED_CLAUSES:
        return list(_FIXED_CLAUSES[name])
    fn = {"RopeParams": _rope_clauses, "MRopeParams": _mrope_clauses, "AlibiParams": _alibi_clauses,
          "T5Params": _t5_clauses, "SinusoidalParams": _sin_clauses, "QueryScaleParams": _qscale_clauses,
          "AxialRopeParams": _axial_clauses}.get(name)
    return fn(p) if fn else []


def _mrope_clauses(p) -> list[tuple[str, str]]:
    cl = [({"contiguous": "MROPE-SECTIONS", "interleaved": "MROPE-INTERLEAVED",
            "hw_alternating": "MROPE-HW-ALTERNATING"}[p.layout], f"layout {p.layout}"),
          ("MROPE-TEXT-REDUCES", "text tokens (equal positions on the three axes)")]
    if p.pairing == "interleaved":
        cl.append(("MROPE-PAIR-INTERLEAVED", "pairing interleaved"))
    if p.rdim < p.head_dim:
        cl.append(("MROPE-PARTIAL", f"rotary_dim {p.rdim} < head_dim {p.head_dim}"))
    if p.rope_type != "default":
        cl += [("MROPE-ROPE-TYPE", f"rope_type {p.rope_type}"), ("MROPE-ATTENTION-SCALING", "scaled rope_type")]
        cl += list(_SCALE_CLAUSES.get(p.rope_type, ()))
    return cl + [("ROPE-INV-FREQ", "the frequencies of MRopeParams.rope")]


def _alibi_clauses(p) -> list[tuple[str, str]]:
    cl = [("ALIBI-SLOPES", f"{p.num_heads} heads"), (f"ALIBI-{p.form.upper()}", f"form {p.form}")]
    if p.form in ("causal", "mpt", "bloom"):
        cl.append(("ALIBI-ROW-CONSTANT", "a causal form"))
    return cl


def _t5_clauses(p) -> list[tuple[str, str]]:
    return [("T5-BUCKET-BIDIRECTIONAL" if p.bidirectional else "T5-BUCKET-CAUSAL",
             "bidirectional (encoder)" if p.bidirectional else "causal (decoder)"), ("T5-BIAS", "the bias table")]


def _sin_clauses(p) -> list[tuple[str, str]]:
    main = {"vaswani": f"SIN-VASWANI-{p.layout.upper()}", "t2t": "SIN-T2T", "fairseq": "SIN-FAIRSEQ-POSITIONS",
            "whisper": "SIN-WHISPER"}[p.variant]
    cl = [(main, f"variant {p.variant}")]
    if p.variant == "fairseq":
        cl.append(("SIN-T2T", "the fairseq table is the t2t table"))
    if getattr(p, "order", "sin_first") == "cos_first":
        cl.append(("SIN-ORDER-COS-FIRST", "order cos_first: [cos | sin]"))
    if getattr(p, "units", "radians") == "turns":
        cl.append(("SIN-UNITS-TURNS", "units turns: angle 2π p w"))
    if getattr(p, "scale", 1.0) != 1.0:
        cl.append(("SIN-OUTPUT-SCALE", f"scale {p.scale:g}"))
    return cl + [("SIN-PRECISION", "every sinusoid table")]


def _qscale_clauses(p) -> list[tuple[str, str]]:
    return [("QSCALE-MISTRAL" if p.form == "mistral" else "QSCALE-LLAMA4", f"form {p.form}"),
            ("QSCALE-POSITIONS", "the scale's positions")]


def _axial_clauses(p) -> list[tuple[str, str]]:
    cl = [("AXIAL-FREQUENCIES-ALTERNATING" if p.frequencies == "alternating" else "AXIAL-FREQUENCIES",
           f"frequencies {p.frequencies}"),
          ({"split": "AXIAL-SPLIT", "blocks": "AXIAL-BLOCKS", "interleaved": "AXIAL-INTERLEAVED",
            "alternate": "AXIAL-ALTERNATE"}[p.layout], f"layout {p.layout}"), ("AXIAL-RELATIVE", "2-D RoPE")]
    if p.order != tuple(range(p.num_axes)):
        cl.append(("AXIAL-AXIS-ORDER", f"axis order {p.order}"))
    if p.rdim < p.head_dim:
        cl.append(("AXIAL-PARTIAL", "partial rotary"))
    if p.coordinates == "centred":
        cl.append(("AXIAL-COORDINATES-CENTRED", "centred coordinates"))
    return cl
