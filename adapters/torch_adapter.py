"""The ``torch`` adapter: the kit's own faithful PyTorch port of every operation.

Dtype policy (clauses ROPE-PRECISION / SIN-PRECISION, and M-RoPE alike): inverse frequencies are computed in
float64 and held in float32 (float64 for float64 activations); angles, cos/sin and the
rotation are computed in that precision and the result is rounded once to the activation
dtype (the Meta / torchtune policy).  Devices: ``cpu``, and ``cuda`` when present.  Rows and
positions are range-checked before any indexing, so an out-of-range index never reaches a GPU
kernel (clause LEARNED-ROW-RANGE).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from posenc.spec.errors import DegenerateWidth, PositionOutOfRange

from .base import Adapter, roberta_from_bert

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32: float64 activations keep float64, everything else uses float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def torch_device_available(device: str) -> bool:
    """``cpu``, ``cuda`` or ``cuda:N`` present on this machine (N < torch.cuda.device_count())."""
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return not index
    if kind != "cuda" or not torch.cuda.is_available():
        return False
    return not index or (index.isdigit() and int(index) < torch.cuda.device_count())


def check_rows(rows: torch.Tensor, num_rows: int) -> None:
    """Raise :class:`PositionOutOfRange` unless ``0 <= rows < num_rows`` (before indexing)."""
    if rows.numel():
        lo, hi = int(rows.min()), int(rows.max())
        if lo < 0 or hi >= num_rows:
            raise PositionOutOfRange(lo, hi, num_rows)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int, pairing: str) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` dims of ``x [B, H, T, D]``; cos/sin ``[B, T, r/2]``.

    Computed in ``cos.dtype``, rounded once to ``x.dtype``; the tail is returned as is.
    """
    xr = x[..., :rotary_dim].to(cos.dtype)
    c, s = cos[:, None], sin[:, None]
    if pairing == "half":
        h = rotary_dim // 2
        x1, x2 = xr[..., :h], xr[..., h:]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    elif pairing == "interleaved":
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    elif pairing == "deinterleave":  # pairs (2i, 2i + 1) in, written to (i, i + r/2)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    else:
        raise ValueError(f"unknown pairing {pairing!r}")
    return torch.cat((y.to(x.dtype), x[..., rotary_dim:]), dim=-1)


def _mscale(scale: float, m: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def scaled_inv_freq(p, seq_len: Optional[int], device, theta: Optional[float] = None):
    """``(inv_freq float64 [pair_dim/2], attention_factor)`` for ``p.rope_type`` (SCALE-*).

    ``seq_len`` is ``max(position_ids) + 1`` of the call; ``theta`` overrides ``rope_theta``
    (the dynamic grow policy keeps its own theta').
    """
    r, t = p.rdim, p.rope_type

    def base(th, dim, n=None):
        i = torch.arange(dim // 2 if n is None else n, dtype=torch.float64, device=device)
        return th ** (-2 * i / dim)

    af = p.attention_factor
    th = p.rope_theta if theta is None else theta
    if t == "default":
        return base(th, r), 1.0 if af is None else af
    if t == "linear":
        return base(th, r) / p.factor, 1.0 if af is None else af
    if t == "dynamic":
        if theta is None:
            lmax = p.max_position_embeddings
            L = lmax if seq_len is None else max(seq_len, lmax)
            th = th * (p.factor * L / lmax - (p.factor - 1)) ** (r / (r - 2))
        return base(th, r), 1.0 if af is None else af
    if t == "yarn":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings

        def corr(beta):
            return r * math.log(p.original_max_position_embeddings / (beta * 2 * math.pi)) / (2 * math.log(th))
        low, high = corr(p.beta_fast or 32.0), corr(p.beta_slow or 1.0)
        if p.truncate is None or p.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, r - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(r // 2, dtype=torch.float64, device=device) - low) / (high - low)).clamp(0, 1)
        w = base(th, r)
        if af is None:
            af = _mscale(s, p.mscale) / _mscale(s, p.mscale_all_dim) if p.mscale and p.mscale_all_dim else _mscale(s)
        return w / s * ramp + w * (1 - ramp), af
    if t == "llama3":
        w = base(th, r)
        L, lo, hi = p.original_max_position_embeddings, p.low_freq_factor, p.high_freq_factor
        wavelen = 2 * math.pi / w
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * w / p.factor + smooth * w
        out = torch.where(wavelen < L / hi, w, torch.where(wavelen > L / lo, w / p.factor, blended))
        return out, 1.0 if af is None else af
    if t == "longrope":
        s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
        use_long = seq_len is not None and seq_len > p.original_max_position_embeddings
        ext = torch.tensor(p.long_factor if use_long else p.short_factor, dtype=torch.float64, device=device)
        if af is None:
            af = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(p.original_max_position_embeddings))
        return base(th, r) / ext, af
    if t == "proportional":
        D = p.head_dim
        w = torch.zeros(D // 2, dtype=torch.float64, device=device)
        w[: r // 2] = base(th, D, r // 2)
        return w / (p.factor or 1.0), 1.0 if af is None else af
    raise ValueError(f"unknown rope_type {t!r}")


class TorchRope:
    """Prepared RoPE for one parameter set, dtype and device (see module docstring).

    ``dynamic`` and ``longrope`` recompute their frequencies from each call's
    ``max(position_ids) + 1``; ``dynamic_policy='grow_until_reset'`` keeps transformers' state
    across calls (SCALE-DYNAMIC-GROW).
    """

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype, self.device = params, dtype, device
        self.compute = compute_dtype(dtype)
        self._grow = params.rope_type == "dynamic" and params.dynamic_policy == "grow_until_reset"
        self._cached, self._theta = params.max_position_embeddings, None
        w, self._af = scaled_inv_freq(params, None, device)
        self._inv_freq = w.to(self.compute)

    def _update(self, position_ids) -> None:
        p = self.p
        if p.rope_type not in ("dynamic", "longrope"):
            return
        seq_len = int(position_ids.max()) + 1 if position_ids.numel() else 0
        if self._grow:
            lmax = p.max_position_embeddings
            if seq_len > self._cached:
                self._theta = p.rope_theta * (p.factor * seq_len / lmax - (p.factor - 1)) ** (p.rdim / (p.rdim - 2))
                self._cached = seq_len
            if seq_len < lmax and self._cached > lmax:
                self._theta, self._cached = None, lmax
            w, self._af = scaled_inv_freq(p, seq_len, self.device, theta=self._theta)
        else:
            w, self._af = scaled_inv_freq(p, seq_len, self.device)
        self._inv_freq = w.to(self.compute)

    def inv_freq(self):
        return self._inv_freq, float(self._af)

    def _cos_sin(self, position_ids):
        self._update(position_ids)
        phi = position_ids.to(self.compute)[..., None] * self._inv_freq
        return self._af * torch.cos(phi), self._af * torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        r, pr = self.p.pair_dim, self.p.pairing
        return rotate(q, c, s, r, pr), rotate(k, c, s, r, pr)


def mrope_axes(params) -> list[int]:
    """Axis (0 t, 1 h, 2 w) of each frequency (MROPE-SECTIONS contiguous / MROPE-INTERLEAVED)."""
    half, sec = params.head_dim // 2, params.mrope_section
    if params.layout == "contiguous":
        return [a for a, n in enumerate(sec) for _ in range(n)]
    return [1 if k % 3 == 1 and k < 3 * sec[1] else 2 if k % 3 == 2 and k < 3 * sec[2] else 0
            for k in range(half)]


class TorchMRope:
    """Prepared M-RoPE (MROPE-*): float64 inv_freq held in the compute dtype, per-frequency axis
    positions gathered from ``position_ids [3, B, T]``, half pairing over the whole head."""

    def __init__(self, params, dtype: torch.dtype, device: str):
        self.p, self.dtype, self.device = params, dtype, device
        self.compute = compute_dtype(dtype)
        D = params.head_dim
        w = params.rope_theta ** -(torch.arange(0, D, 2, dtype=torch.float64, device=device) / D)
        self._inv_freq = w.to(self.compute)
        self._axes = torch.tensor(mrope_axes(params), dtype=torch.int64, device=device)

    def _cos_sin(self, position_ids):
        if position_ids.dim() != 3 or position_ids.shape[0] != 3:
            raise ValueError(f"position_ids must be [3, B, T], got {list(position_ids.shape)}")
        pos = position_ids[self._axes].permute(1, 2, 0)  # [B, T, D/2]: position of each frequency's axis
        phi = pos.to(self.compute) * self._inv_freq
        return torch.cos(phi), torch.sin(phi)

    def cos_sin(self, position_ids):
        c, s = self._cos_sin(position_ids)
        return c.to(self.dtype), s.to(self.dtype)

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        D = self.p.head_dim
        return rotate(q, c, s, D, "half"), rotate(k, c, s, D, "half")


def nope_layer_flags(params, device) -> torch.Tensor:
    """NOPE-LAYER-FLAGS: 1 where the layer uses RoPE, 0 where NoPE."""
    n = params.num_hidden_layers
    if params.no_rope_layers is not None:
        return torch.tensor(params.no_rope_layers[:n], dtype=torch.int64, device=device)
    i = torch.arange(n, dtype=torch.int64, device=device)
    return ((i + 1) % params.no_rope_layer_interval != 0).to(torch.int64)


class TorchAdapter(Adapter):
    name = "torch"
    framework = "torch"
    devices = ("cpu", "cuda")
    range_probe_devices = ("cpu", "cuda")  # rows are checked before indexing
    notes = "kit's own port: fp32 (fp64 for float64) angles and rotation, one rounding to the dtype"

    def versions(self):
        return {"torch": torch.__version__}

    def device_available(self, device):
        return torch_device_available(device)

    def from_numpy(self, array, dtype, device):
        t = torch.from_numpy(np.ascontiguousarray(array))
        return t.to(device=device, dtype=DTYPES[dtype])

    def to_numpy(self, x):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.to(torch.float32)
        return x.numpy()

    def dtype_of(self, x):
        return str(x.dtype).removeprefix("torch.")

    def device_of(self, x):
        return str(x.device)

    # ---- RoPE ----------------------------------------------------------------------------
    def rope(self, params, *, dtype, device):
        return TorchRope(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        cd = compute_dtype(q.dtype)
        c, s = cos.to(cd), sin.to(cd)
        r = params.pair_dim
        return rotate(q, c, s, r, params.pairing), rotate(k, c, s, r, params.pairing)

    # ---- sinusoidal --------------------------------------------------------------------
    def sinusoidal(self, position_ids, params, *, dtype, device):
        dt = DTYPES[dtype]
        cd = compute_dtype(dt)
        D = params.dim
        if params.variant != "vaswani":
            return self._h_minus_1(position_ids, params, dt, device)
        j = torch.arange(D, dtype=torch.float64, device=device)
        if params.layout == "interleaved":
            expo = 2 * torch.div(j, 2, rounding_mode="floor") / D
            is_sin = (torch.arange(D, device=device) % 2) == 0
        else:
            ns = (D + 1) // 2
            expo = torch.cat((2 * j[:ns] / D, 2 * j[: D - ns] / D))
            is_sin = torch.arange(D, device=device) < ns
        w = (params.base ** -expo).to(cd)
        phi = position_ids.to(cd)[..., None] * w
        return torch.where(is_sin, torch.sin(phi), torch.cos(phi)).to(dt)

    def _h_minus_1(self, position_ids, params, dt, device):
        """SIN-T2T / SIN-FAIRSEQ-POSITIONS / SIN-WHISPER: ``[sin | cos]`` of ``base^(-i/max(h-1, 1))``,
        a zero column for odd D, fairseq's pad rows zeroed; degenerate widths raise DegenerateWidth."""
        cd = compute_dtype(dt)
        D, v = params.dim, params.variant
        h = D // 2
        if v == "whisper" and D % 2:
            raise DegenerateWidth("SIN-WHISPER", D, "Whisper's sinusoids need an even number of channels")
        if v in ("fairseq", "whisper") and h == 1:
            raise DegenerateWidth("SIN-WHISPER" if v == "whisper" else "SIN-FAIRSEQ-POSITIONS", D,
                                  f"h = D // 2 = 1 makes the {v} divisor h - 1 zero")
        i = torch.arange(h, dtype=torch.float64, device=device)
        w = (params.base ** (-i / max(h - 1, 1))).to(cd)
        phi = position_ids.to(cd)[..., None] * w
        parts = [torch.sin(phi), torch.cos(phi)]
        if D % 2:
            parts.append(torch.zeros(phi.shape[:-1] + (1,), dtype=cd, device=phi.device))
        pe = torch.cat(parts, dim=-1)
        if v == "fairseq":
            pe = pe.masked_fill((position_ids == params.padding_idx)[..., None], 0.0)
        return pe.to(dt)

    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``(cumsum(mask) + cache_length) * mask + padding_idx``."""
        return padding_aware_positions(input_ids, params.padding_idx, cache_length)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        return lambda input_ids, cache_length=0: self.sinusoidal(
            self.fairseq_positions(input_ids, params, cache_length), params, dtype=dtype, device=device)

    # ---- learned -------------------------------------------------------------------------
    def roberta_positions(self, input_ids, params, cache_length):
        """LEARNED-ROBERTA-POSITIONS: rows from padding_idx + 1; pads read padding_idx."""
        return padding_aware_positions(input_ids, params.padding_idx, cache_length)

    def roberta_embeddings(self, params, weights, *, dtype, device):
        return roberta_from_bert(self, params, weights, dtype=dtype, device=device)

    def bart_embeddings(self, params, weights, *, dtype, device):
        """LEARNED-BART-POSITIONS: rows ``cache_length + arange(T) + 2``; the mask is not read."""
        table = weights["table"]

        def call(input_ids, attention_mask=None, cache_length=0):
            B, T = input_ids.shape
            rows = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T) + 2
            return self.lookup(table, rows)
        return call

    def lookup(self, table, rows):
        check_rows(rows, table.shape[0])
        return F.embedding(rows, table)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        wte, wpe = weights["wte"], weights["wpe"]

        def call(input_ids, position_ids=None, cache_length=0):
            if position_ids is None:
                B, T = input_ids.shape
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            return self.lookup(wte, input_ids) + self.lookup(wpe, position_ids)
        return call

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = weights

        def call(input_ids, token_type_ids=None, position_ids=None, cache_length=0):
            B, T = input_ids.shape
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            if position_ids is None:
                position_ids = (cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)
            x = self.lookup(w["word_embeddings"], input_ids) + self.lookup(w["token_type_embeddings"], token_type_ids)
            x = x + self.lookup(w["position_embeddings"], position_ids)
            return F.layer_norm(x, (x.shape[-1],), w["layer_norm_weight"], w["layer_norm_bias"], params.layer_norm_eps)
        return call

    def opt_positions(self, attention_mask, cache_length):
        m = attention_mask.to(torch.int64)
        return (torch.cumsum(m, dim=-1) * m - 1)[:, cache_length:]

    def opt_rows(self, positions):
        return positions + 2

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: self.lookup(
            table, self.opt_rows(self.opt_positions(attention_mask, cache_length)))

    # ---- position ids --------------------------------------------------------------------
    def position_ids(self, rule, *, device, **x):
        if rule in ("prefill", "decode"):
            start = x.get("cache_length", 0) if rule == "decode" else 0
            return (start + torch.arange(x["seq_len"], device=device)).expand(x["batch"], x["seq_len"])
        if rule == "left_pad":
            m = x["attention_mask"].to(torch.int64)
            pos = (torch.cumsum(m, dim=-1) - 1).masked_fill(m == 0, 0)
            return pos[:, x["cache_length"]:]
        if rule == "packed":
            cu = x["cu_seqlens"].to(torch.int64)
            lengths = cu[1:] - cu[:-1]
            starts = torch.repeat_interleave(cu[:-1], lengths)
            return (torch.arange(int(cu[-1]), device=cu.device) - starts)[None]
        raise ValueError(f"unknown position_ids rule {rule!r}")

    # ---- ALiBi ---------------------------------------------------------------------------
    def alibi_slopes(self, params, *, dtype, device):
        """ALIBI-SLOPES: exact ``2^(-e)`` from float64 exponents, held in float32 (float64 for
        float64 activations)."""
        return self._slopes(params, compute_dtype(DTYPES[dtype]), device)

    def _slopes(self, params, dtype: torch.dtype, device) -> torch.Tensor:
        return alibi_slopes(params, dtype, device)

    def alibi_bias(self, params, *, dtype, device, query_length, key_length=None, attention_mask=None):
        """ALIBI-CAUSAL / -SYMMETRIC / -BLOOM / -MPT: computed in the compute dtype from integer
        distances, rounded once to ``dtype``; ``[H, Tq, Tk]`` (bloom ``[B, H, Tq, Tk]``)."""
        dt = DTYPES[dtype]
        cd = compute_dtype(dt)
        m = self._slopes(params, cd, device)
        if params.form == "bloom":
            if attention_mask is None:
                raise ValueError("ALIBI-BLOOM: the bloom form needs an attention_mask [B, Tk]")
            mask = attention_mask.to(torch.int64)
            B, tk = mask.shape
            _check_lengths(query_length, tk)
            pos = (torch.cumsum(mask, dim=-1) - 1) * mask
            out = m[None, :, None, None] * pos[:, None, None, :].to(cd)
            return out.expand(B, params.num_heads, query_length, tk).to(dt).contiguous()
        _check_lengths(query_length, key_length)
        i = torch.arange(query_length, device=device) + (key_length - query_length)
        j = torch.arange(key_length, device=device)
        d = (i[:, None] - j[None, :]).to(cd)
        if params.form == "causal":
            out = -m[:, None, None] * d
        elif params.form == "symmetric":
            out = -m[:, None, None] * d.abs()
        elif params.form == "mpt":
            row = (j - (key_length - 1)).to(cd)
            out = (m[:, None, None] * row[None, None, :]).expand(params.num_heads, query_length, key_length)
        else:
            raise ValueError(f"unknown ALiBi form {params.form!r}")
        return out.to(dt).contiguous()

    # ---- T5 ------------------------------------------------------------------------------
    def t5_buckets(self, relative_position, params):
        """T5-BUCKET-BIDIRECTIONAL / T5-BUCKET-CAUSAL: float64 log, never of 0, truncated."""
        return self._buckets(relative_position, params)

    def _buckets(self, relative_position, params) -> torch.Tensor:
        return t5_buckets(relative_position, params)

    def t5_bias(self, params, weights, *, dtype, device):
        """T5-BIAS: ``table[bucket(j - i - cache_length)]`` ``[H, Tq, Tk]``; buckets range-checked."""
        table = weights["table"]
        if table.ndim != 2 or table.shape[0] != params.num_buckets:
            raise ValueError(f"T5-BIAS: table must be [num_buckets={params.num_buckets}, H], got {list(table.shape)}")

        def call(query_length, key_length, cache_length=0):
            ctx = torch.arange(query_length, device=table.device)[:, None] + cache_length
            mem = torch.arange(key_length, device=table.device)[None, :]
            b = self._buckets(mem - ctx, params)
            check_rows(b, table.shape[0])
            return table[b].permute(2, 0, 1).contiguous()
        return call

    # ---- M-RoPE and NoPE -----------------------------------------------------------------
    def mrope(self, params, *, dtype, device):
        return TorchMRope(params, DTYPES[dtype], device)

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        """NOPE-IDENTITY: the layer's flag must be 0; q and k are returned untouched."""
        flags = nope_layer_flags(params, "cpu")
        if not 0 <= layer_idx < len(flags) or int(flags[layer_idx]) != 0:
            raise ValueError(f"layer {layer_idx} is not a NoPE layer (flags {flags.tolist()})")
        return q, k

    def nope_layer_flags(self, params, *, device):
        return nope_layer_flags(params, device)

    # ---- YaRN softmax scale ----------------------------------------------------------------
    def attention_probs(self, q, k, params):
        """SCALE-YARN-SOFTMAX-SCALE: ``softmax(q k^T * scale)`` over all keys, ``[B, Hq, Tq, Tk]``.

        The scale ``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` is a Python float
        (float64); logits are computed in the compute dtype (float32, float64 for float64
        activations) and the probabilities rounded once to the activation dtype.
        """
        return attention_probs(q, k, softmax_scale(params))


def softmax_scale(params) -> float:
    """``qk_head_dim ** -0.5 * get_mscale(s, mscale_all_dim) ** 2`` (s: factor, or L_max / L_orig)."""
    p = params.rope
    s = p.factor if p.factor is not None else p.max_position_embeddings / p.original_max_position_embeddings
    return params.qk_head_dim ** -0.5 * _mscale(s, p.mscale_all_dim) ** 2


def attention_probs(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Row softmax of ``q k^T * scale`` with k heads repeated to q's (query head h reads k head
    ``h // (Hq / Hk)``); computed in the compute dtype, rounded once to ``q.dtype``."""
    hq, hk = q.shape[1], k.shape[1]
    if hq % hk:
        raise ValueError(f"q heads {hq} are not a multiple of k heads {hk}")
    cd = compute_dtype(q.dtype)
    kk = k.to(cd).repeat_interleave(hq // hk, dim=1)
    logits = torch.matmul(q.to(cd), kk.transpose(-1, -2)) * scale
    return torch.softmax(logits, dim=-1).to(q.dtype)


def padding_aware_positions(input_ids: torch.Tensor, padding_idx: int, cache_length: int) -> torch.Tensor:
    """fairseq ``make_positions`` with HF's cache offset: ``(cumsum(mask) + C) * mask + padding_idx``."""
    m = (input_ids != padding_idx).to(torch.int64)
    return (torch.cumsum(m, dim=-1) + cache_length) * m + padding_idx


def _check_lengths(query_length: int, key_length: int) -> None:
    if not 0 <= query_length <= key_length:
        raise ValueError(f"ALiBi: need 0 <= query_length <= key_length, got {query_length} and {key_length}")


def alibi_slopes(params, dtype: torch.dtype, device) -> torch.Tensor:
    """``[H]`` slopes ``2^(-e)``: c = 2^floor(log2 n) slopes, then every other slope of 2c."""
    n, B = params.num_heads, params.alibi_bias_max
    c = 1 << (n.bit_length() - 1)
    e = [B * k / c for k in range(1, c + 1)] + [B * (2 * j + 1) / (2 * c) for j in range(n - c)]
    return torch.exp2(-torch.tensor(e, dtype=torch.float64, device=device)).to(dtype)


def t5_buckets(relative_position: torch.Tensor, params) -> torch.Tensor:
    rel = relative_position.to(torch.int64)
    nb = params.num_buckets
    out = torch.zeros_like(rel)
    if params.bidirectional:
        nb //= 2
        out = out + (rel > 0).to(torch.int64) * nb
        n = rel.abs()
    else:
        n = (-rel).clamp(min=0)
    e = nb // 2
    safe = n.clamp(min=e).to(torch.float64)
    large = e + torch.trunc(torch.log(safe / e) / math.log(params.max_distance / e) * (nb - e)).to(torch.int64)
    large = large.clamp(max=nb - 1)
    return out + torch.where(n < e, n, large)


ADAPTER = TorchAdapter
