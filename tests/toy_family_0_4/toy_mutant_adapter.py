"""The reference with DIV-TOY-RAMP-OFF-BY-ONE's mutant: a run must fail and name it."""

from posenc.adapters.reference_adapter import MutantAdapter


def ADAPTER():
    return MutantAdapter("DIV-TOY-RAMP-OFF-BY-ONE")
