"""Call forms: an operation reached through another calling convention (spec ``form_of`` / ``form``).

A family registers, per form operation, how a case of its primary operation is put in the form and
back (:func:`call_form`); the registry then derives the form's reference and error scales from the
primary's, so the primary's goldens judge every form and a failure is diagnosed on the primary
(its mutants, its inference) after the outputs are converted back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import numpy as np

Inputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class CallForm:
    """Form operation ``op`` of ``primary``.  ``to_form(params, primary_inputs)``: the form's inputs, or a
    string saying why the case cannot be put in this form (positions that are not ``offset + t`` in some
    row: never by looping); ``to_primary(params, form_inputs)``: the primary's inputs (always possible);
    ``outputs_to_primary(params, form_inputs, form_outputs, primary_inputs)`` / ``outputs_to_form(params,
    primary_inputs, primary_outputs)``: the outputs (and, element for element, the error scales) between the two
    layouts (the primary's inputs give the rows a form of tokens does not keep)."""

    op: str
    primary: str
    to_form: Callable[..., Union[Inputs, str]]
    to_primary: Callable[..., Inputs]
    outputs_to_primary: Callable[..., dict]
    outputs_to_form: Callable[..., dict]
    #: the primary's inputs ``to_form`` reads (the collection converts only these to decide whether a case
    #: can be put in the form: a q of 2 MB is not materialised for it)
    reads: tuple[str, ...] = ()

    def why_not(self, params, inputs: dict) -> Optional[str]:
        """Why a case of the primary with ``inputs`` has no such form, or None where it has one: ``to_form`` on
        the inputs it ``reads`` only (the others None: deciding materialises no packed copy of q and k)."""
        got = self.to_form(params, {n: (v if n in self.reads else None) for n, v in inputs.items()})
        return got if isinstance(got, str) else None


CALL_FORMS: dict[str, CallForm] = {}

#: What the margins of a guarded buffer hold (exact in every dtype): a write there is never a rotation's value
#: by chance, and a read of it shows (a kernel that reads a neighbouring head gets 1.5e3-sized values).
SENTINEL = 1536.0


def guarded_array(a: np.ndarray) -> tuple[np.ndarray, tuple]:
    """``(buffer, inner)``: ``a`` at ``buffer[inner]``, :data:`SENTINEL` around it -- every axis but the first
    has a neighbour before and after, the last two on each side (a neighbouring head, token and slice of a
    wider head).  The layout the kit hands strided and in-place inputs in (``harness.buffers.guarded``)."""
    a = np.asarray(a)
    pads = [(0, 0)] + [(1, 1)] * max(a.ndim - 2, 0) + ([(2, 2)] if a.ndim > 1 else [])
    buf = np.full([n + lo + hi for n, (lo, hi) in zip(a.shape, pads)], SENTINEL)
    inner = tuple(slice(lo, lo + n) for n, (lo, _) in zip(a.shape, pads))
    buf[inner] = a
    return buf, inner


def storage_read_as_contiguous(a: np.ndarray) -> np.ndarray:
    """What a kernel that ignores strides reads for ``a`` handed as :func:`guarded_array`'s view: ``a.size``
    consecutive elements of the buffer from the view's first element, in ``a``'s shape."""
    buf, inner = guarded_array(a)
    start = int(np.ravel_multi_index(tuple(s.start for s in inner), buf.shape)) if buf.size else 0
    return buf.reshape(-1)[start:start + np.size(a)].reshape(np.shape(a))


def _same(params, inputs: dict, outputs: dict, primary: Optional[dict] = None) -> dict:
    return dict(outputs)


def call_form(op: str, primary: str, *, to_primary: Callable, outputs_to_primary: Callable = _same,
              outputs_to_form: Callable = _same, reads: tuple[str, ...] = ()) -> Callable:
    """Register ``to_form(params, primary_inputs) -> form inputs | reason`` as form operation ``op`` of
    ``primary``, with the inverse conversions (see :class:`CallForm`)."""
    def deco(fn):
        form = CallForm(op, primary, fn, to_primary, outputs_to_primary, outputs_to_form, tuple(reads))
        CALL_FORMS[op] = form
        _register_reference(form)
        return fn
    return deco


def _register_reference(form: CallForm) -> None:
    """The form's reference and error scales: the primary's on the converted inputs, converted back."""
    from posenc.registry import REFERENCES, Reference

    def scales(p, x):
        xp = form.to_primary(p, x)
        return convert_scales(REFERENCES[form.primary].scales(p, xp), lambda o: form.outputs_to_form(p, xp, o))
    def state(p):  # the primary's prepared state (dynamic NTK's grow policy), where it keeps one
        st = REFERENCES[form.primary].state
        return None if st is None else st(p)

    def fn_state(p, x, *st):
        xp = form.to_primary(p, x)
        return form.outputs_to_form(p, xp, REFERENCES[form.primary].fn(p, xp, *st))
    fn_state.__name__ = fn_state.__qualname__ = f"call_form[{form.op}]"
    REFERENCES[form.op] = Reference(form.op, fn_state, scales, state)


def convert_scales(sc: dict, convert: Callable[[dict], dict]) -> dict:
    """A reference's ``{output: (dtype_scale, angle_scale[, accumulation_scale])}`` with each term's
    ``{output: scale}`` put through ``convert`` (an output conversion between a form and its primary)."""
    terms = [convert({n: v[i] for n, v in sc.items() if len(v) > i}) for i in range(max((len(v) for v in sc.values()), default=0))]
    return {n: tuple(t[n] for t in terms if n in t) for n in sc}


def form_of(op: str) -> Optional[CallForm]:
    """The call form ``op`` is, or None for a primary operation."""
    return CALL_FORMS.get(op)


def form_clauses(op: str) -> tuple[str, ...]:
    """The clauses of call form ``op`` that its primary does not serve (ROPE-CALL-FORM): what a test of the form
    checks beyond the primary's own tests, and what its undiagnosed failures are counted under."""
    from posenc.registry import operation
    f = form_of(op)
    if f is None:
        return ()
    primary = set(operation(f.primary).clauses)
    return tuple(c for c in operation(op).clauses if c not in primary)


def forms_of(primary: str) -> list[CallForm]:
    """The call forms registered for ``primary``, in registration order."""
    return [f for f in CALL_FORMS.values() if f.primary == primary]
