"""NumPy float64 reference: one plain function per operation (see ``ops.OPS``)."""

from . import learned, mutants, ops, position_ids, rope, sinusoidal  # noqa: F401
