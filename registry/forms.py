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
    ``outputs_to_primary(params, form_inputs, form_outputs)`` / ``outputs_to_form(params, primary_inputs,
    primary_outputs)``: the outputs (and, element for element, the error scales) between the two layouts."""

    op: str
    primary: str
    to_form: Callable[..., Union[Inputs, str]]
    to_primary: Callable[..., Inputs]
    outputs_to_primary: Callable[..., dict]
    outputs_to_form: Callable[..., dict]
    #: the primary's inputs ``to_form`` reads (the collection converts only these to decide whether a case
    #: can be put in the form: a q of 2 MB is not materialised for it)
    reads: tuple[str, ...] = ()


CALL_FORMS: dict[str, CallForm] = {}


def _same(params, inputs: dict, outputs: dict) -> dict:
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
        sc = REFERENCES[form.primary].scales(p, xp)
        terms = [form.outputs_to_form(p, xp, {n: v[i] for n, v in sc.items() if len(v) > i})
                 for i in range(max((len(v) for v in sc.values()), default=0))]
        return {n: tuple(t[n] for t in terms if n in t) for n in sc}
    def state(p):  # the primary's prepared state (dynamic NTK's grow policy), where it keeps one
        st = REFERENCES[form.primary].state
        return None if st is None else st(p)

    def fn_state(p, x, *st):
        xp = form.to_primary(p, x)
        return form.outputs_to_form(p, xp, REFERENCES[form.primary].fn(p, xp, *st))
    fn_state.__name__ = fn_state.__qualname__ = f"call_form[{form.op}]"
    REFERENCES[form.op] = Reference(form.op, fn_state, scales, state)


def form_of(op: str) -> Optional[CallForm]:
    """The call form ``op`` is, or None for a primary operation."""
    return CALL_FORMS.get(op)


def forms_of(primary: str) -> list[CallForm]:
    """The call forms registered for ``primary``, in registration order."""
    return [f for f in CALL_FORMS.values() if f.primary == primary]
