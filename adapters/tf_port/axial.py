"""Axial RoPE of vision encoders (AXIAL-*): each rotated pair reads one axis of ``position_ids
[A, B, T]`` at one of that axis's frequencies (shared, or Pixtral's alternating), with the
layout's pairs; the dims beyond the axes' share pass through; centred coordinates
(AXIAL-COORDINATES-CENTRED): ``2 pi ((2 i + 1) / n - 1)`` in the compute dtype; the prepared
:class:`TFAxial`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ._common import DTYPES, F64, KernelRunner, LayoutForms, _rotate, compute_dtype, tf

if TYPE_CHECKING:
    from posenc.adapters.tf_adapter import TFAdapter


def pair_exponents(p) -> tuple[float, ...]:
    """Each rotated pair's exponent e (frequency ``theta ** -e``; AXIAL-FREQUENCIES / -ALTERNATING)."""
    A, ad = p.num_axes, p.adim
    if p.frequencies == "shared":
        return tuple(2.0 * j / ad for _, j in p.pairs)
    return tuple(2.0 * (A * j + a) / (A * ad) for a, j in p.pairs)


def k_axial(position_ids, *, p, dt):
    """AXIAL-*: per-pair (cos, sin) ``[B, T, R/2]`` in the compute dtype."""
    cd = compute_dtype(dt)
    w = tf.pow(tf.constant(p.rope_theta, F64), -tf.constant(pair_exponents(p), F64))
    pos = tf.transpose(tf.gather(position_ids, [a for a, _ in p.pairs]), [1, 2, 0])  # [B, T, R/2]
    if p.coordinates == "index":
        x = tf.cast(pos, cd)
    else:  # AXIAL-COORDINATES-CENTRED: 2 pi times the patch centre in (-1, 1)
        n = tf.constant([float(p.grid_size[a]) for a, _ in p.pairs], cd)
        x = (tf.cast(2 * pos + 1, cd) / n - 1) * tf.constant(2 * math.pi, cd)
    phi = x * tf.cast(w, cd)
    return tf.cos(phi), tf.sin(phi)


def k_axial_cos_sin(position_ids, *, p, dt):
    c, s = k_axial(position_ids, p=p, dt=dt)
    return tf.cast(c, dt), tf.cast(s, dt)


def _rotate_axial(x, c, s, p):
    R, ad = p.rdim, p.adim
    if p.layout in ("split", "alternate", "interleaved"):
        return _rotate(x, c, s, R, "interleaved" if p.layout == "interleaved" else "half")
    n = ad // 2
    parts = [_rotate(x[..., b * ad:(b + 1) * ad], c[..., b * n:(b + 1) * n], s[..., b * n:(b + 1) * n], ad, "half")
             for b in range(p.num_axes)]
    return tf.concat(parts + [x[..., R:]], axis=-1)


def k_axial_apply(q, k, position_ids, *, p, dt):
    c, s = k_axial(position_ids, p=p, dt=dt)
    return _rotate_axial(q, c, s, p), _rotate_axial(k, c, s, p)


class TFAxial(LayoutForms):
    """Prepared axial RoPE (AXIAL-*): position_ids ``[A, B, T]``."""

    def __init__(self, adapter: "TFAdapter", params, dtype: tf.DType):
        self.a, self.p, self.dtype = adapter, params, dtype

    def _check(self, position_ids):
        if position_ids.shape.rank != 3 or position_ids.shape[0] != self.p.num_axes:
            raise ValueError(f"position_ids must be [{self.p.num_axes}, B, T], got {position_ids.shape.as_list()}")
        if self.p.coordinates == "centred":
            n = tf.reshape(tf.constant(self.p.grid_size, position_ids.dtype), [-1, 1, 1])
            if bool(tf.reduce_any((position_ids < 0) | (position_ids >= n))):
                raise ValueError(f"AXIAL-COORDINATES-CENTRED: position_ids must be patch indices of the grid "
                                 f"{list(self.p.grid_size)}")

    def cos_sin(self, position_ids):
        self._check(position_ids)
        return self.a.run(k_axial_cos_sin, position_ids, p=self.p, dt=self.dtype)

    def apply(self, q, k, position_ids):
        self._check(position_ids)
        return self.a.run(k_axial_apply, q, k, position_ids, p=self.p, dt=self.dtype)


class Ops(KernelRunner):
    """Adapter methods of the axial family."""

    def axial(self, params, *, dtype, device):
        return TFAxial(self, params, DTYPES[dtype])
