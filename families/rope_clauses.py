"""The clauses a RoPE case's parameters exercise (the rule the rope and rope_scaling families give
``add_cases`` and their generators call): one place for the golden and the generated cases."""

from __future__ import annotations

from posenc.spec.models import RopeParams

from . import case_clauses

#: The clauses a rope_type brings to a case (filtered by what the operation serves).
SCALE_CLAUSES = {
    "linear": ("SCALE-LINEAR",),
    "dynamic": ("SCALE-DYNAMIC-NTK",),
    "yarn": ("SCALE-YARN-RAMP", "SCALE-YARN-FACTOR", "SCALE-YARN-ATTENTION-FACTOR"),
    "llama3": ("SCALE-LLAMA3",),
    "longrope": ("SCALE-LONGROPE-FACTORS", "SCALE-LONGROPE-ATTENTION-FACTOR"),
    "proportional": ("SCALE-PROPORTIONAL",),
}


def scale_clauses(p: RopeParams) -> tuple[str, ...]:
    cl = SCALE_CLAUSES.get(p.rope_type, ())
    if p.rope_type == "dynamic":
        cl += ("SCALE-DYNAMIC-GROW",) if p.dynamic_policy == "grow_until_reset" else ("SCALE-DYNAMIC-PER-CALL",)
    return cl


#: The operations whose outputs the angles (and so the inverse frequencies) shape, and those that
#: rotate q and k (the pairing's operations).
_TABLE_OPS = ("rope.inv_freq", "rope.cos_sin", "rope.cos_sin_calls", "rope.apply")
_QK_OPS = ("rope.apply", "rope.apply_with_cos_sin")


@case_clauses("rope")
def rope_clauses(p, op: str) -> list[str]:
    """The clauses a RoPE case of ``op`` with parameters ``p`` exercises (``add_cases``'s and the
    generated cases' rule; the registry keeps those ``op`` serves): the inverse frequencies and the
    angles of every operation that builds them, the pairing and the rotation's sign of those that
    rotate, the tables' dtype of the rotation with given tables (ROPE-TABLE-DTYPE: elsewhere a narrow
    table breaks ROPE-PRECISION, which every case lists), the partial slice, its width from a fraction, the condensing of the angles, the attention factor (explicit or the scaling's), the scaling's clauses
    and ROPE-PRECISION.  Proportional rope's zero-frequency pairs are not a partial slice (ROPE-PARTIAL)."""
    if not isinstance(p, RopeParams):
        return []
    cl = ["ROPE-INV-FREQ", "ROPE-ANGLE"] if op in _TABLE_OPS else []
    if op in _QK_OPS:
        cl.append(f"ROPE-PAIR-{p.pairing.upper()}")
        cl += ["ROPE-ROTATION-NEGATIVE"] if p.rotation == "negative" else []
    if p.pair_dim < p.head_dim:
        cl.append("ROPE-PARTIAL")
    if p.partial_rotary_factor is not None and op in _TABLE_OPS:
        cl.append("ROPE-ROTARY-FRACTION")  # the width (proportional's share too) sized from a fraction
    if p.condense_ratio is not None and op in _TABLE_OPS and op != "rope.inv_freq":
        cl.append("ROPE-CONDENSE")
    if p.attention_factor is not None or p.rope_type in ("yarn", "longrope"):
        cl.append("ROPE-ATTENTION-FACTOR")  # explicit, or YaRN's and LongRoPE's own
    tables = ["ROPE-TABLE-DTYPE"] if op == "rope.apply_with_cos_sin" else []  # given tables: their dtype's clause
    return cl + list(scale_clauses(p)) + ["ROPE-PRECISION"] + tables

