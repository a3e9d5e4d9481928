"""NumPy float64 reference: the math of every family, one plain function per rule.

The operations' reference bindings (what the goldens and the diagnosis run) are registered by
the families (:mod:`posenc.families`); :mod:`posenc.reference.ops` and
:mod:`posenc.reference.mutants` are views of them by name.
"""

from . import alibi, attention, learned, mrope, nope, position_ids, rope, rope_scaling, sinusoidal, t5  # noqa: F401,E402
