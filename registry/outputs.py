"""Outputs of the reference run at other parameters or inputs (a mutant's usual form), with the error
scales of that run: the diagnosis judges such a mutant's outputs by its own rounding magnitudes as
well as the case's (a pairing swap rounds each element with the *other* pair's norm)."""

from __future__ import annotations

from typing import Callable


class ReferenceOutputs(dict):
    """``{output name: array}`` as the reference gives them, and ``scales()``: the reference's
    ``{output: (dtype_scale, angle_scale[, accumulation_scale])}`` of the same run (computed on
    demand: only a diagnosis that compares the outputs needs them)."""

    def __init__(self, outputs: dict, scales: Callable[[], dict]):
        super().__init__(outputs)
        self.scales = scales


def _dropping_scales(name: str):
    def method(self, *args, **kwargs):
        self.scales = None  # changed after the run (``out["q"] = x["q"]``): its scales describe another computation
        return getattr(dict, name)(self, *args, **kwargs)
    return method


for _name in ("__setitem__", "__delitem__", "__ior__", "update", "pop", "popitem", "setdefault", "clear"):
    setattr(ReferenceOutputs, _name, _dropping_scales(_name))


def own_scales(outputs) -> dict:
    """The scales a mutant's ``outputs`` carry (``{}`` for outputs the mutant computed otherwise, or
    changed after its reference run, or whose scales cannot be computed: then only the case's scales
    and the outputs' magnitudes count)."""
    scales = getattr(outputs, "scales", None)
    try:
        return dict(scales()) if callable(scales) else {}
    except Exception:  # noqa: BLE001 - a run at parameters the scale formulas do not take: no widening
        return {}
