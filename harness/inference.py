"""Inference beyond the divergence catalogue: say what a wrong output *is*.

When no known divergence reproduces a failing output (:func:`posenc.harness.diagnosis.diagnose`),
:func:`infer` tries the models of bugs the case's family registered for its operation
(``@posenc.families.inference(*ops)``: the positions a RoPE implementation used, its frequencies,
pairing, an unrotated tensor, attention factor, a flipped sin; the row shift of a learned or
sinusoidal table; ALiBi slope ratios or head counts; T5 bucket offsets or direction; a toy's slope).
Each model is a list of candidates ``(sentence, implied)``: ``implied()`` recomputes the output the
sentence describes (with the reference wherever a parameter or an input expresses it), compared with
the adapter's under the tolerance rule (:func:`posenc.harness.runner.compare_outputs`) -- a fact only
when it reproduces the output, else a "closest fit" with its residual.  With no fit, a fallback says
where the output is wrong (outputs, batch rows, positions with the error's growth), with the facts
the family adds (``@posenc.families.inference_notes(*ops)``).

The helpers a family's models share are public here: :class:`InferenceContext`, :func:`int_models`,
:func:`shift_sentence`, :func:`sig` and :data:`SHIFTS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import numpy as np

from posenc import registry

from posenc.harness.diagnosis import same_non_finite, widened_comparison
from posenc.harness.golden import Golden
from posenc.harness.runner import compare_outputs
from posenc.reference.rounding import round_to_dtype
from posenc.spec.tolerance import EPS, TINY, compare

Outputs = dict[str, np.ndarray]
Candidate = tuple[str, Callable[[], Optional[Outputs]]]  # sentence, lazy implied outputs
#: Row / position shifts a model tries, nearest first.
SHIFTS = (1, -1, 2, -2, 3, -3, 4, -4)


def infer(golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[str]:
    """Short sentences saying what ``outputs`` are, compared with ``golden`` (empty: nothing inferred).

    ``golden``: the case (op, params, clauses), its NumPy inputs, reference outputs and error
    scales; ``outputs``: the adapter's NumPy outputs by name (any shape, possibly NaN/inf);
    ``dtype``: the activation dtype of the run.  Explains the clauses its family's registered
    models explain (for the kit's: ROPE-ANGLE, ROPE-INV-FREQ, ROPE-PAIR-*, ROPE-ATTENTION-FACTOR,
    SCALE-*, LEARNED-* and SIN-* row shifts, ALIBI-SLOPES, T5-BUCKET-* / T5-BIAS).  Never raises.
    """
    try:
        with np.errstate(all="ignore"):
            return _infer(golden, {n: np.asarray(v) for n, v in outputs.items()}, dtype)
    except Exception:  # noqa: BLE001 - a kit-internal traceback would be worse than no inference
        return []


@dataclass
class InferenceContext:
    """One inference: the golden ``g``, the adapter's outputs ``out``, the ``dtype``, the outputs
    out of tolerance (``bad``), ``found``: what a model learnt that the later models of the same
    inference use (RoPE's attention factor), and ``facts``: candidates that state one part of the
    output on its own (RoPE's magnitude when its angles are wrong too), their implied outputs the
    adapter's with only that part replaced by the specified one's form; the first that reproduces
    the output is said when nothing reproduces all of it.  ``op``, ``p`` (parameters) and ``x``
    (inputs) are the case's."""

    g: Golden
    out: Outputs
    dtype: str
    bad: list[str] = field(default_factory=list)
    found: dict = field(default_factory=dict)
    facts: list = field(default_factory=list)

    def __post_init__(self):
        self.op, self.p, self.x = self.g.case.op, self.g.case.params, self.g.inputs

    def ref(self, params=None, inputs=None) -> Outputs:
        """The reference's outputs of the case's op with other parameters or inputs."""
        return registry.reference_of(self.op).fn(self.p if params is None else params,
                                                 self.x if inputs is None else inputs)

    def fit(self, implied: Outputs) -> tuple[bool, float]:
        """Whether ``implied`` (missing names: the golden's) reproduces the output; max |err|/bound.
        The scales widen as the diagnosis's do (to the implied magnitudes, the row's largest angle), and
        only where the implied output is not the reference's: a candidate that changes nothing (a
        parameter the case does not read, a default spelt out) never fits a failing output."""
        g, mut = self.g, {**self.g.outputs, **{n: np.asarray(v) for n, v in implied.items()}}
        if any(np.shape(mut[n]) != np.shape(g.outputs[n]) for n in mut if n in g.outputs):
            return False, float("inf")
        # a NaN or inf the output does not have exactly there: the bound would be NaN and pass anything (an
        # emulation at float16 of positions past 65504 implied NaN everywhere, and "fitted" a litgpt trial);
        # the diagnosis's rule for a mutant's non-finite elements
        if same_non_finite({n: np.asarray(v, np.float64) for n, v in implied.items()
                             if np.asarray(v).dtype.kind == "f"}, self.out) is None:
            return False, float("inf")
        # a whole tensor the model leaves as it was given (unrotated, every token at position 0, a factor of 1)
        # is computed exactly in every dtype (cos 0 = 1, sin 0 = 0): within the bound is not enough there (at
        # bfloat16 a turn by 1/64 rad is, and a litgpt trial's YaRN output, rotated with wrong frequencies,
        # was called "returned unrotated", then "positions -1")
        if any(n in self.x and np.shape(self.x[n]) == np.shape(v) and np.array_equal(v, self.x[n])
               and not np.array_equal(np.asarray(self.out[n], np.float64), round_to_dtype(self.x[n], self.dtype))
               for n, v in implied.items() if n in self.out):
            return False, float("inf")
        moved = {n: ~np.isclose(np.asarray(mut[n], np.float64), np.asarray(g.outputs[n], np.float64),
                                rtol=1e-12, atol=0)
                 for n in mut if n in g.outputs and np.asarray(g.outputs[n]).dtype.kind == "f"}
        if moved and not any(m.any() for m in moved.values()):
            return False, float("inf")
        ds = {n: np.where(moved.get(n, True), np.maximum(v, np.abs(mut[n])), v)
              for n, v in g.dtype_scales.items() if n in mut}
        # long positions: where the row's largest angle term leaves no element it explains checkable, judged
        # again with each element's own angle term (the diagnosis's rule); a vacuous fit is no fit at all
        cmps, verdict = widened_comparison(g, mut, self.out, ds, lambda n: moved.get(n, True), self.dtype)
        if verdict == "vacuous":
            return False, float("inf")
        return verdict == "match", max((c.ratio for c in cmps), default=0.0)


def _infer(g: Golden, out: Outputs, dtype: str) -> list[str]:
    cmps = compare_outputs(g, out, dtype)
    names = [n for n in g.outputs if not n.endswith(".compared")]
    bad = [n for n, c in zip(names, cmps) if not c.ok]
    if not bad:
        return []
    ctx = InferenceContext(g, out, dtype, bad)
    ref_ratio = max(c.ratio for c in cmps)
    shaped = [n for n in bad if n in out and out[n].shape == g.outputs[n].shape]
    if len(shaped) < len(bad):
        return [f"{n}: missing from the outputs" if n not in out else f"{n}: shape {list(out[n].shape)}, "
                f"the reference's is {list(g.outputs[n].shape)}" for n in bad if n not in shaped]
    try:
        models, notes = registry.inferences(ctx.op)
    except Exception:  # noqa: BLE001 - a registry that cannot say (named at load time): the fallback alone
        models, notes = [], []
    if any(out[n].dtype.kind == "f" and not np.isfinite(out[n]).all() for n in bad):
        return _fallback(ctx, notes)  # NaN/inf: no model of a bug gives them
    found = _judge(ctx, _candidates(ctx, models) + _uniform_scale(ctx), ref_ratio)
    if found and not found[0].startswith("closest fit"):
        return found  # a model that reproduces the output says more than "right to a lower precision"
    # (a shift of the lowest frequencies' positions is small enough for that too); then one parameter of
    # the case at another value that reproduces it (a θ off by 1e-5 is within half's bound at long
    # positions too), then the precision, then where it is wrong
    said = _field_fit(ctx) or _lower_precision(g, out, dtype)
    # nothing says all of it: a fact about one part of it (an attention factor with wrong angles too)
    return [said] if said else _judge(ctx, ctx.facts, 0.0) + found + _fallback(ctx, notes)  # 0: no closest fit


#: A fallback line (where the output is wrong, not what it is): ``<output>: N of M elements wrong...``.
_FALLBACK = re.compile(r"^[^:]+: \d+ of \d+ elements wrong")


def is_finding(line: str) -> bool:
    """Whether an inferred line says what the output *is* (a model that reproduced it), not where it is
    wrong (the fallback's element counts) nor a closest fit that did not reproduce it: what an
    expectation line's ``finding`` may match."""
    return not (str(line).startswith("closest fit") or _FALLBACK.match(str(line)))


def says_nonfinite(lines) -> bool:
    """Whether inferred lines say an output holds NaN or inf (the fallback's count of them)."""
    return any(_NONFINITE.search(str(x)) for x in lines)


_NONFINITE = re.compile(r"\b\d+ NaN/inf\b")


def _uniform_scale(ctx: InferenceContext) -> list[Candidate]:
    """Every wrong output the reference times one constant (a table or bias scaled by 1/√dim, a
    factor applied twice), said by the parameter it is a power of where it is one."""
    floats = [n for n in ctx.bad if ctx.out[n].dtype.kind == "f" and np.issubdtype(ctx.g.outputs[n].dtype, np.floating)]
    if not floats or len(floats) < len(ctx.bad):
        return []
    ref = np.concatenate([ctx.g.outputs[n].ravel() for n in floats])
    got = np.concatenate([ctx.out[n].astype(np.float64).ravel() for n in floats])
    den = float(ref @ ref)
    c = float(got @ ref) / den if den > 0 else 0.0
    if not np.isfinite(c) or abs(c) < 1e-12 or abs(c - 1) < 1e-6:
        return []
    measured = (f"every output is the specified one × {sig(c, 4 if abs(c - 1) > 1e-3 else 7)}",  # never "× 1"
                lambda: {n: ctx.g.outputs[n] * c for n in floats})
    # a power of a parameter within the run's own rounding of the measured constant (bf16's is ~1e-3):
    # said and tried at its exact value, so the sentence is the same on every example
    near = max(1e-4, 4 * EPS[ctx.dtype])
    for name, v in _numeric_params(ctx.p):
        for expr, val in ((f"1/√{name}", v ** -0.5), (f"√{name}", v ** 0.5), (f"1/{name}", 1 / v), (name, float(v))):
            if abs(c / val - 1) < near:
                return [(f"every output is the specified one scaled by {expr} ({name} {sig(v)}: × {sig(val)})",
                         lambda val=val: {n: ctx.g.outputs[n] * val for n in floats}), measured]
    return [measured]


#: How many reference evaluations the parameter fit may spend on one failure (a failing generated
#: example is inferred at every step of its shrinking).
FIT_BUDGET = 200


def _field_fit(ctx: InferenceContext) -> Optional[str]:
    """One numeric parameter of the case at another value that reproduces the output: ``<field> <used>
    where <specified> is specified`` (θ, a base, a scaling factor or field, a head or bucket count, a
    maximum distance, an offset ...), for any family's parameter model, an entry point's too.  Integer
    fields try their neighbours, doubles, halves and small powers of two; real ones the value times
    2^-8 .. 2^8, then the two closest fields are refined by golden section in log-space."""
    p = ctx.p
    if not hasattr(p, "model_copy"):
        return None
    seen: dict[tuple, tuple[bool, float]] = {}

    def fits(name: str, x) -> tuple[bool, float]:
        if (name, x) not in seen:
            if len(seen) >= FIT_BUDGET:
                return False, float("inf")
            try:
                seen[(name, x)] = ctx.fit(ctx.ref(params=p.model_copy(update={name: x})))
            except Exception:  # noqa: BLE001 - a value the reference refuses does not fit
                seen[(name, x)] = (False, float("inf"))
        return seen[(name, x)]

    def said(name: str, x, v) -> str:
        where = "it is unset (the rule's default applies)" if v is None else \
            f"{v if isinstance(v, int) else sig(v, 6)} is specified"
        span = None if isinstance(x, int) else _extent(lambda y: fits(name, y)[0], float(x))
        return f"{name} {x if isinstance(x, int) else sig(x, 6)} where {where}" + (
            f" (any value from {sig(span[0], 3)} to {sig(span[1], 3)} gives this output)" if span else "")

    closest: list[tuple[float, str, float, float]] = []  # (score, field, value, best grid value)
    for name, v in _top_numeric(p):
        if isinstance(v, int):
            for x in sorted({v - 1, v + 1, 2 * v, v // 2, v - 2, v + 2, 1, 2, 4, 8, 16, 32} - {v}, key=lambda x: abs(x - v)):
                if x > 0 and fits(name, x)[0]:
                    return said(name, x, v)
            continue
        if v < 0:
            continue
        grid = [v * 2.0 ** k for k in range(-8, 9) if k]
        for x in grid:
            if fits(name, x)[0]:
                return said(name, x, v)
        score, best = min((fits(name, x)[1], x) for x in grid)
        if np.isfinite(score):
            closest.append((score, name, v, best))
    for name, grid in _unset_candidates(p):  # a field the case leaves to its rule, given a value
        for x in grid:
            if fits(name, x)[0]:
                return said(name, x, None)
    for _, name, v, best in sorted(closest)[:2]:
        x = float(np.exp(golden_section(lambda t, name=name: fits(name, float(np.exp(t)))[1],
                                        np.log(best / 2), np.log(best * 2), 14)))
        for y in dict.fromkeys((float(sig(x, 2)), float(sig(x, 3)), x)):
            if abs(y / v - 1) > 1e-6 and fits(name, y)[0]:
                return said(name, y, v)
    return None


def _extent(fits: Callable[[float], bool], x: float, steps: int = 6) -> Optional[tuple[float, float]]:
    """The values around ``x`` (which fits) that fit as well, when they span more than 2 %: a
    parameter the output pins only to an interval (a YaRN beta moves integer ramp bounds) is said
    with it, never as one value.  Bisection in log-space towards x / 2 and 2 x, which must not fit."""
    if x <= 0 or fits(x / 2) or fits(x * 2):
        return None
    ends = []
    for far in (x / 2, x * 2):
        a, b = np.log(far), np.log(x)  # a: does not fit, b: fits
        for _ in range(steps):
            m = (a + b) / 2
            a, b = (a, m) if fits(float(np.exp(m))) else (m, b)
        ends.append(float(np.exp(b)))
    return (ends[0], ends[1]) if ends[1] / ends[0] > 1.02 else None


def _unset_candidates(p) -> list[tuple[str, list]]:
    """The unset (None) numeric fields of a parameter model whose domain the spec declares
    (``parameters:``), each with values to try: its library defaults, then 9 points of its
    range on the range's scale (integers rounded)."""
    try:
        declared = registry.spec().parameters.get(type(p).__name__, {})
    except Exception:  # noqa: BLE001 - a model the spec does not declare: nothing to try
        return []
    out = []
    for name, rng in declared.items():
        if name not in type(p).model_fields or getattr(p, name, 0) is not None or rng.range is None \
                or rng.length is not None:  # a tuple field (per-frequency factors): not one value
            continue
        lo, hi = rng.range
        grid = np.geomspace(lo, hi, 9) if rng.scale == "log" and lo > 0 else np.linspace(lo, hi, 9)
        known = [v for v in rng.library_defaults.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        kind = str(type(p).model_fields[name].annotation)
        whole = "int" in kind and "float" not in kind
        cands = [int(round(v)) if whole else float(v) for v in (*known, *grid)]
        out.append((name, list(dict.fromkeys(cands))))
    return out


def _top_numeric(p) -> list[tuple[str, object]]:
    """The set numeric fields of a parameter model (not booleans, not 0): ``(name, value)``."""
    out = []
    for name in type(p).model_fields:
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v == 0:
            continue
        out.append((name, v))
    return out


def golden_section(f: Callable[[float], float], lo: float, hi: float, steps: int) -> float:
    """The ``x`` in ``[lo, hi]`` where ``f`` is least, by ``steps`` golden-section steps (one new
    evaluation each; ``f`` taken as unimodal there): the middle of the last bracket."""
    g = (5 ** 0.5 - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(steps):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = f(b)
    return (lo + hi) / 2


def flat_params(params) -> dict[str, object]:
    """A parameter model (or dict) as ``{dotted path: leaf value}`` (nested models' fields dotted)."""
    raw = params.model_dump() if hasattr(params, "model_dump") else dict(params or {})
    out: dict[str, object] = {}

    def walk(prefix: str, v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else str(k), x)
        else:
            out[prefix] = v
    walk("", raw)
    return out


def _numeric_params(p) -> list[tuple[str, float]]:
    """The positive numeric fields of a parameter model (nested ones dotted), other than 1."""
    return [(k, float(v)) for k, v in flat_params(p).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v != 1]


#: The lower precisions a run's outputs are tried at, by the run's dtype (most precise first); a
#: half run at its own dtype for the outputs the spec compares at float32 whatever the dtype.
_LOWER = {"float64": ("float32",), "float32": ("bfloat16",), "bfloat16": ("bfloat16",), "float16": ("float16",)}
_SAID = {"float32": "float32", "bfloat16": "half (bfloat16 or float16)", "float16": "float16"}


#: The least max |err|/bound under a lower dtype's tolerance for "computed at that precision": a
#: computation at that precision is wrong by a few of its roundings (a ratio of about 1/K or more).
LOWER_PRECISION_FLOOR = 1 / 32


def _lower_precision(g: Golden, out: Outputs, dtype: str) -> Optional[str]:
    """Where every output is right under a lower dtype's tolerance but not under ``dtype``'s: the
    computation ran at that precision (or cast through it) and was returned as ``dtype``."""
    if not all(np.isfinite(np.asarray(v, np.float64)).all() for n, v in out.items()
               if n in g.outputs and np.asarray(v).dtype.kind == "f"):
        return None
    for low in _LOWER.get(dtype, ()):
        # (angles at a half dtype are the families' own models: a generic bound cannot tell a rounded
        # angle from a wrong θ, whose error is as large at the lowest frequencies)
        if low != dtype and _right_at(g, out, low, LOWER_PRECISION_FLOOR):
            return (f"precision: every output is right to {_SAID[low]} precision but not to {dtype}'s (computed in "
                    f"{_SAID[low].split(' ')[0]}, or cast through it, and returned as {dtype}?)")
        # the values rounded to the lower dtype (a gather of a table held there); at the run's own dtype,
        # the outputs compared at float32 whatever the dtype (inv_freq: a buffer cast with the model)
        f32 = registry.operation(g.case.op).float32_outputs
        if low == dtype and f32 and _float32_outputs_at(g, out, dtype, f32):
            return (f"precision: {', '.join(sorted(n for n in f32 if n in out))} is right to {dtype} precision, not to "
                    f"float32's (held or computed in {dtype}: a buffer cast with the model? the spec requires "
                    f"float32 for them at every dtype)")
        rounded = {n: round_to_dtype(v, low) for n, v in g.outputs.items()
                   if np.asarray(v).dtype.kind == "f" and (low != dtype or n in f32)}
        if rounded and all(c.ok for c in compare_outputs(replace(g, outputs={**g.outputs, **rounded}), out, dtype)):
            return (f"precision: every output is the specified value rounded to {low} (a table or weight held in "
                    f"{low} and returned as {dtype}?)")
    return None


def _right_at(g: Golden, out: Outputs, low: str, floor: float) -> bool:
    """Every output within ``low``'s tolerance, and wrong by about that precision's rounding somewhere:
    an error far below it (a θ off by 1e-4) is within every lower bound too, and says nothing of the
    precision (measured without the accumulation term: its worst case, (n - 1) roundings, is far
    above a typical sum's)."""
    cmps = compare_outputs(g, out, low)
    typical = compare_outputs(replace(g, accumulation_scales={}), out, low) if g.accumulation_scales else cmps
    return all(c.ok for c in cmps) and max((c.ratio for c in typical), default=0.0) >= floor


def _float32_outputs_at(g: Golden, out: Outputs, dtype: str, f32) -> bool:
    """The outputs the spec compares at float32 whatever the dtype (``f32``: inv_freq) each within two
    roundings at ``dtype`` of the reference (``|y - y_ref| <= 2 eps(dt) |y_ref| + tiny(dt)``: held in ``dtype``, and
    divided or multiplied there once more), one of them beyond float32's, and every other output right."""
    beyond = False
    for n, ref in g.outputs.items():
        if n.endswith(".compared") or n not in out:
            continue
        if n not in f32:
            c = compare(n, out[n], ref, dtype=dtype, dtype_scale=g.dtype_scales.get(n), angle_scale=g.angle_scales.get(n),
                        angle_based=g.angle_based, accumulation_scale=g.accumulation_scales.get(n),
                        compared=g.outputs.get(f"{n}.compared"))
            if not c.ok:
                return False
            continue
        err = np.abs(np.asarray(out[n], np.float64) - np.asarray(ref, np.float64))
        if not (err <= 2 * EPS[dtype] * np.abs(ref) + TINY[dtype]).all():  # a subnormal's spacing too
            return False
        beyond |= bool((err > 4 * EPS["float32"] * np.abs(ref)).any())
    return beyond


def _candidates(ctx: InferenceContext, models) -> list[Candidate]:
    """Every candidate of every model registered for the operation, in order; a model that raises or
    returns something else than ``(sentence, implied)`` pairs is skipped, never the others."""
    out: list[Candidate] = []
    for model in models:
        try:
            cands = list(model(ctx))
        except Exception:  # noqa: BLE001 - a model that cannot be built here says nothing
            continue
        out += [c for c in cands if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str) and callable(c[1])]
    return out


def _judge(ctx: InferenceContext, candidates: list[Candidate], ref_ratio: float) -> list[str]:
    """The first candidate that reproduces the output, else the best closest fit (if much better than
    ``ref_ratio``: none where it is 0)."""
    best: Optional[tuple[float, str]] = None
    for sentence, implied in candidates:
        try:
            mut = implied()
            ok, ratio = (False, float("inf")) if mut is None else ctx.fit(mut)
        except Exception:  # noqa: BLE001 - a model that cannot be computed here does not fit
            continue
        if ok:
            return [sentence]
        if np.isfinite(ratio) and (best is None or ratio < best[0]):
            best = (ratio, sentence)
    if best is not None and best[0] < min(ref_ratio / 10, 1e3):
        return [f"closest fit: {best[1]} (residual: max |err|/bound {best[0]:.3g})"]
    return []


def sig(v: float, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits, as the sentences print numbers."""
    return f"{v:.{digits}g}"


def sig_at(v: float, dtype: str, digits: int = 4) -> str:
    """``v``, a value measured from an output at ``dtype``, with no more digits than ``dtype`` resolves:
    the shortest of ``v`` to 1 .. ``digits`` significant digits within one unit roundoff of it
    (``eps(dtype) / 2``, relative).  An attention factor of 1.25 read off bfloat16 outputs is 1.249
    to four digits, and a finding recorded at float32 ("1.25") would not match it."""
    u = EPS[dtype] / 2 * abs(v)
    for d in range(1, digits):
        if abs(float(f"{v:.{d}g}") - v) <= u:
            return f"{v:.{d}g}"
    return sig(v, digits)


# ---- shared models -------------------------------------------------------------------------------


def int_models(ctx: InferenceContext, hint: Optional[Callable[[int], str]] = None) -> list[Candidate]:
    """Integer outputs off by a constant (rows, positions, buckets); ``hint(d)``: what an offset ``d``
    suggests, appended to the sentence (a family's known habit)."""
    cands: list[Candidate] = []
    for n in ctx.bad:
        ref, got = ctx.g.outputs[n], ctx.out[n]
        if ref.dtype.kind not in "iu" or got.dtype.kind not in "iu":
            continue
        m = np.broadcast_to(np.asarray(ctx.g.outputs.get(f"{n}.compared", True), bool), ref.shape)
        # exact differences (Python ints: an output near the int64 range must not wrap around)
        d = np.array([int(a) - int(b) for a, b in zip(got[m].ravel().tolist(), ref[m].ravel().tolist())], object)
        if d.size and (d == d[0]).all() and abs(int(d[0])) < 2 ** 53:
            note = hint(int(d[0])) if hint else ""
            cands.append((f"{n} are the specified ones {int(d[0]):+d} everywhere{note}",
                          lambda n=n, c=int(d[0]): {n: ctx.g.outputs[n] + c}))
    return cands


def shift_sentence(k: int, what: str, hint: str = "") -> str:
    """``what`` read ``|k|`` rows later (earlier): row r + k where row r is specified, then ``hint``."""
    way = "later" if k > 0 else "earlier"
    return (f"{what} read {abs(k)} row{'s' if abs(k) > 1 else ''} {way}: row r {'+' if k > 0 else '-'} {abs(k)} "
            f"where row r is specified{hint}")


# ---- fallback ------------------------------------------------------------------------------------
def _ratios(ctx: InferenceContext, n: str) -> np.ndarray:
    """Element-wise |err|/bound of output ``n`` (inf for NaN/inf or exact mismatches)."""
    ref, got = ctx.g.outputs[n], ctx.out[n]
    m = np.broadcast_to(np.asarray(ctx.g.outputs.get(f"{n}.compared", True), bool), ref.shape)
    if np.issubdtype(ref.dtype, np.integer):
        return np.where((got.astype(np.int64) != ref) & m, np.inf, 0.0)
    dt = "float32" if n in registry.operation(ctx.op).float32_outputs else ctx.dtype
    b = np.broadcast_to(ctx.g.bound(n, dt), ref.shape)
    err = np.abs(got.astype(float) - ref)
    r = np.where(err == 0, 0.0, np.where(b == 0, np.inf, err / np.where(b == 0, 1.0, b)))
    r = np.where(np.isfinite(got.astype(float)), r, np.inf)
    return np.where(m, r, 0.0)


def _token_axis(ctx: InferenceContext, n: str) -> Optional[int]:
    nd = ctx.g.outputs[n].ndim
    return 2 if n in ("q", "k") and nd == 4 else 1 if nd == 3 and "position_ids" in ctx.x else None


def _fallback(ctx: InferenceContext, notes=()) -> list[str]:
    """Where the output is wrong: outputs, batch rows, positions (with the error's growth), dims."""
    lines = []
    for n in ctx.bad:
        r = _ratios(ctx, n)
        bad = r > 1
        parts = [f"{n}: {int(bad.sum())} of {bad.size} elements wrong"]
        nonfinite = int((~np.isfinite(ctx.out[n].astype(float))).sum()) if ctx.out[n].dtype.kind == "f" else 0
        parts += [f"{nonfinite} NaN/inf"] if nonfinite else []
        if bad.ndim >= 2 and bad.shape[0] > 1:
            rows = np.nonzero(bad.reshape(bad.shape[0], -1).any(1))[0]
            if len(rows) < bad.shape[0]:
                parts.append(f"only batch row(s) {', '.join(map(str, rows))}")
        ax = _token_axis(ctx, n)
        pid = np.asarray(ctx.x.get("position_ids")) if "position_ids" in ctx.x else None
        if ax is not None and pid is not None and pid.ndim == 2 and pid.shape == (bad.shape[0], bad.shape[ax]):
            parts += _by_position(bad, r, ax, pid)
        for note in notes:  # the family's facts about where it is wrong
            try:
                parts += note(ctx, n, bad)
            except Exception:  # noqa: BLE001 - a note that cannot be computed here says nothing
                pass
        finite = r[np.isfinite(r)]
        if finite.size and finite.max() > 1:
            parts.append(f"worst |err|/bound {finite.max():.3g}")
        lines.append("; ".join(parts))
    return lines


def _by_position(bad: np.ndarray, r: np.ndarray, ax: int, pid: np.ndarray) -> list[str]:
    """Which positions are wrong, and whether the error grows with position."""
    other = tuple(i for i in range(bad.ndim) if i not in (0, ax))
    tok_bad = bad.any(axis=other) if other else bad  # [B, T]
    rr = np.where(np.isfinite(r), r, 0.0)
    tok_err = rr.max(axis=other) if other else rr
    if not tok_bad.any():
        return []
    out = []
    lo = int(pid[tok_bad].min())
    if (~tok_bad).any() and int(pid[~tok_bad].max()) < lo:
        out.append(f"only positions >= {lo} are wrong")
    elif tok_bad.all():
        out.append("at every position")
    else:
        out.append(f"at positions {sorted(set(int(v) for v in pid[tok_bad]))[:6]}")
    pv, ev = pid.ravel().astype(float), tok_err.ravel()
    if pv.size >= 3 and np.ptp(pv) > 0 and np.ptp(ev) > 0 and np.corrcoef(pv, ev)[0, 1] > 0.8:
        out[-1] += " (error grows with position: a precision bug?)"
    # a short error-by-position table: the batch row of the first wrong token, from that token on
    b, t = (int(v) for v in np.argwhere(tok_bad)[0])
    fin = np.isfinite(r)
    tok_inf = ~(fin.all(axis=other) if other else fin)  # a NaN/inf or an exact mismatch in the token
    span = range(t, min(tok_bad.shape[1], t + _TABLE_TOKENS))
    cells = ", ".join(f"{int(pid[b, j])}: " + ("inf" if tok_inf[b, j] else "0" if tok_err[b, j] == 0 else
                                              f"{float(tok_err[b, j]):.2g}") for j in span)
    out.append(f"row {b} |err|/bound by position from its first wrong token (token {t}; max over the other "
               f"axes): {cells}"
               + (" ..." if span.stop < tok_bad.shape[1] else ""))
    return out


#: Tokens the error-by-position table of a failure shows.
_TABLE_TOKENS = 8
