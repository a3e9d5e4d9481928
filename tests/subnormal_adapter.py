"""An adapter at the edge of the tolerance rule's subnormal allowance (issue 28, finding 3).

``SubnormalZeros`` is the reference, rounded once to the run's dtype, except that every float output
element whose exact value is 0 comes back as the dtype's smallest subnormal ``tiny(dt)`` (an
implementation that flushes nothing and adds one subnormal's worth of rounding where the result is 0).
The tolerance rule (spec/tolerance.py, README "Tolerance rule") allows ``tiny(dt)`` on every element, a
value below it "cannot be stored in dt": so the golden comparison passes it, and every invariant check --
which judges the same outputs -- must pass it too.  Loaded by path, like a user adapter
(``--adapter tests/subnormal_adapter.py:SubnormalZeros``).
"""

from __future__ import annotations

import numpy as np

from posenc.adapters import ReferenceAdapter
from posenc.families import operation
from posenc.spec.tolerance import TINY


class SubnormalZeros(ReferenceAdapter):
    name = "subnormal-zeros"
    notes = "the reference, but tiny(dt) (the smallest subnormal) wherever the exact output is 0"
    spacings = 1  # how many subnormal spacings the zeros become

    def compute(self, op, params, inputs, dtype, state=None):
        out = super().compute(op, params, inputs, dtype, state)
        declared = operation(op)
        kinds = {o.name: o.kind for o in declared.outputs}
        changed = {}
        for name, v in out.items():
            base = name.split(".", 1)[0]
            a = np.asarray(v)
            if kinds.get(base) not in ("float", "float32+") or name.endswith(".compared") or \
                    not np.issubdtype(a.dtype, np.floating):
                changed[name] = v
                continue
            # the dtype the output is held and compared in: float32+ outputs at float32 (float64 at float64)
            dt = dtype if kinds[base] == "float" or dtype == "float64" else "float32"
            if base in declared.float32_outputs:
                dt = "float32"
            changed[name] = np.where(a == 0, self.spacings * TINY[dt], a)
        return changed


class FourSubnormals(SubnormalZeros):
    """The control: 4 tiny(dt) where the exact output is 0, beyond what any element is allowed where its
    error scales are 0 (an identity, a pass-through, a zero pair): the checks must still see it."""
    name = "four-subnormals"
    spacings = 4
