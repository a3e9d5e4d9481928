"""Inference models of the M-RoPE family (``mrope.*``): the rotation models of RoPE
(:func:`posenc.families.rope_inference.rotation_models`), whose M-RoPE forms shift every axis alike."""

from __future__ import annotations

from posenc import families
from posenc.families.rope_inference import rotation_models

#: The M-RoPE family's operations (spec/mrope.yaml).
MROPE_OPS = ("mrope.cos_sin", "mrope.apply")

families.inference(*MROPE_OPS)(rotation_models)
