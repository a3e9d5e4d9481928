"""Family ``model`` (spec/model.yaml): what its scenario modules share -- the sizes the drivers use and the
registration of a driver as a scenario (:mod:`posenc.families.model`, :mod:`posenc.families.model_far`)."""

from __future__ import annotations

from posenc import families
from posenc.harness.checks import Scenario

#: Sizes the scenarios use (rows, lengths): small enough for 2 CPU cores, long enough that every
#: row of a mixed batch has real tokens after its padding.
PROMPT = 20
DECODE_STEPS = 6
LENGTHS = (13, 20, 7)  # a mixed batch: row 1 unpadded, rows 0 and 2 padded (row 0 padded: its positions
#                          differ from a count over the padded width, so "every row uses row 0's" and "the
#                          pads are counted" are told apart)
DOCS = (9, 12, 7)  # packed document lengths


def scenario(clause: str, name: str, **kw):
    def deco(fn):
        families.scenario(Scenario(clause, name, fn, **kw))
        return fn
    return deco


#: MODEL-FAR-DECODE's start when positions are handed in (``[low, high)``, drawn from the run's seed)
FAR = (3000, 6000)
