"""The ``numpy`` adapter: the float64 reference itself, output cast to the requested dtype.

Running the suite on it proves only that goldens and reference agree (freshness); it is not a
conforming implementation in the conformance matrix.  bfloat16 comes from ``ml_dtypes``.  Every
operation comes from the operation table (:class:`~posenc.adapters.reference_adapter.ReferenceAdapter`),
so a registered family is covered with no edit here.
"""

from __future__ import annotations

from .reference_adapter import ReferenceAdapter


class NumpyAdapter(ReferenceAdapter):
    name = "numpy"


ADAPTER = NumpyAdapter
