"""The call forms of rope.apply (spec rope.yaml ``form_of: rope.apply``): per-row position offsets and the
token-major layout.  Each converts a rope.apply case into its form and back; the registry derives the
form's reference from rope.apply's, so rope.apply's goldens judge every form."""

from __future__ import annotations

import numpy as np

from . import call_form


def _row_offsets_primary(p, x):
    t = np.shape(x["q"])[2]
    off = np.asarray(x["offsets"], np.int64).reshape(-1)
    return {"q": x["q"], "k": x["k"], "position_ids": off[:, None] + np.arange(t, dtype=np.int64)}


@call_form("rope.apply_row_offsets", "rope.apply", to_primary=_row_offsets_primary, reads=("position_ids",))
def rope_apply_row_offsets(p, x):
    """rope.apply's positions as ``offsets[b] + t``: only rows of consecutive positions (a kernel given an
    offset never sees a gap, a repeat or a padded row's own numbering)."""
    pid = np.asarray(x["position_ids"], np.int64)
    off = pid[:, 0]
    bad = np.flatnonzero((pid != off[:, None] + np.arange(pid.shape[1])).any(axis=1))
    if bad.size:
        return f"row {int(bad[0])}'s positions are not offset + t ({pid[bad[0]][:6].tolist()}...): no offset form"
    return {"q": x["q"], "k": x["k"], "offsets": off}


def _swap(p, out: dict) -> dict:
    """q and k between [B, H, T, D] and [B, T, H, D] (the same swap both ways); scalars as they are."""
    return {n: (np.swapaxes(v, 1, 2) if n in ("q", "k") and np.ndim(v) == 4 else v) for n, v in out.items()}


@call_form("rope.apply_token_major", "rope.apply", to_primary=lambda p, x: _swap(p, x), outputs_to_primary=_swap,
           outputs_to_form=_swap)
def rope_apply_token_major(p, x):
    """rope.apply's q and k as ``[B, T, H, D]``, the layout flash-attn's and vLLM's kernels take."""
    return _swap(p, x)


@call_form("rope.apply_int32", "rope.apply", to_primary=lambda p, x: dict(x), reads=("position_ids",))
def rope_apply_int32(p, x):
    """rope.apply's position_ids as int32 (the kit hands them so: the operation's input kind); positions past
    int32's range have no such form."""
    pid = np.asarray(x["position_ids"], np.int64)
    if pid.size and (pid.max() > np.iinfo(np.int32).max or pid.min() < np.iinfo(np.int32).min):
        return f"positions up to {int(pid.max())} do not fit int32"
    return dict(x)
