"""Per-layer-type RoPE (LAYERS-*): the shared implementation over this port's own rope."""

from ..layer_rope import Ops  # noqa: F401
