"""NumPy float64 reference: the math of every family, one plain function per rule.

The operations' reference bindings (what the goldens and the diagnosis run) are registered by
the families (:mod:`posenc.families`) and looked up by name in the registry (:mod:`posenc.registry`);
``posenc.reference.ops`` and ``posenc.reference.mutants``, views of them by name, are deprecated.
"""

from . import alibi, attention, learned, mrope, nope, position_ids, rope, rope_scaling, sinusoidal, t5  # noqa: F401,E402
