"""Inputs checked unchanged and in-place outputs handed as views into guarded buffers (spec ``writes`` /
``views``): what a kernel wrote where it must not is named, element and view (SGLang issue 35096's kind).
Used by :mod:`posenc.harness.runner` where the adapter runs (its worker process too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from posenc import registry
from posenc.registry.forms import guarded_array
from posenc.spec.errors import AdapterError

if TYPE_CHECKING:  # the adapter contract, for the annotations only (the harness sits below the adapters)
    from posenc.adapters import Adapter


@dataclass
class Guarded:
    """A buffer of the adapter's own arrays around an input it writes in place: the input at the centre
    (``view``, a strided view), ``registry.forms.SENTINEL`` around it (:func:`~posenc.registry.forms.guarded_array`)."""

    buffer: Any
    view: Any
    inner: tuple
    snapshot: np.ndarray

    def check(self, adapter: Adapter, op: str, name: str, written: bool = True) -> None:
        """:class:`AdapterError` naming the elements written outside the view (what a kernel that writes
        into the next head does, SGLang issue 35096), or anywhere where the input is only read."""
        now = np.asarray(adapter.to_numpy(self.buffer))
        changed = 0 if written else changed_elements(now[self.inner], self.snapshot[self.inner])
        if changed:
            modified_input(adapter, op, name, changed, int(np.prod(now[self.inner].shape)))
        outside = np.ones(self.snapshot.shape, bool)
        outside[self.inner] = False
        wrote = outside & (changed_mask(now, self.snapshot))
        if wrote.any():
            first = [int(i) for i in np.argwhere(wrote)[0]]
            where = [i - (s.start or 0) for i, s in zip(first, self.inner)]
            raise AdapterError(f"{adapter.name}.{op}: wrote {int(wrote.sum())} element(s) outside its in-place output "
                               f"{name!r} (the kit hands it as a view into a larger buffer); the first at {where} "
                               f"relative to the view of shape {list(np.shape(now[self.inner]))}: a write into a "
                               "neighbouring head, token or slice")


def guarded(adapter: Adapter, a: np.ndarray, dtype: str, device: str) -> Guarded:
    """:class:`Guarded` around ``a`` (a float input the operation writes in place)."""
    buf, inner = guarded_array(a)
    nb = adapter.from_numpy(buf, dtype, device)
    return Guarded(nb, nb[inner], inner, np.array(adapter.to_numpy(nb), copy=True))


def changed_mask(now: np.ndarray, snap: np.ndarray) -> np.ndarray:
    """Element-wise: changed from the snapshot (NaN equals NaN)."""
    same = now == snap
    if np.issubdtype(snap.dtype, np.floating):
        same |= np.isnan(now) & np.isnan(snap)
    return ~same


def changed_elements(now: np.ndarray, snap: np.ndarray) -> int:
    """How many elements of an input differ from its snapshot (all of them when the shape did;
    NaN equals NaN): the unchanged-input check here and in the adapter's worker process."""
    if now.shape != snap.shape:
        return int(snap.size)
    return int(np.count_nonzero(changed_mask(now, snap)))


def modified_input(adapter, what: str, name: str, changed: int, size: int):
    """:class:`AdapterError`: the adapter changed ``changed`` of ``size`` elements of input ``name`` of call ``what``
    (an operation, and what call of it), with what the operation may write in place."""
    op_name = what.split(" ", 1)[0]
    writes = tuple(getattr(registry.spec().operations.get(op_name), "writes", None) or ()) if what else ()
    advice = (f"{op_name} writes only {', '.join(writes)} in place; every other input must be left as handed"
              if writes else "the kit hands every call private copies and checks them afterwards. A kernel that is "
              "in-place by design must be wrapped to work on a copy (e.g. `q = q.clone()` / `q.copy()` before the "
              "kernel) and return the result, or serve an in-place call form (spec `writes`)")
    raise AdapterError(f"{adapter.name}{'.' + what if what else ''}: the adapter modified its input {name!r} in place "
                       f"({changed} of {size} elements changed); {advice}")
