"""Deliberately broken adapters: each is the kit's torch port with one known bug.

The suite must fail on every one of them, and its diagnosis should name the divergence.
They are loaded by path (``--adapter tests/broken_adapters.py:NAME``), like a user adapter.
"""

from __future__ import annotations

import torch

from posenc.adapters.base import Adapter
from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchMRope, TorchRope, rotate, t5_buckets


class _SwappedRope(TorchRope):
    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        s = s * self.p.sin_sign  # the declared rotation kept (ROPE-ROTATION-NEGATIVE): only the pairing is wrong
        other = "interleaved" if self.p.pairing == "half" else "half"
        return rotate(q, c, s, self.p.rdim, other), rotate(k, c, s, self.p.rdim, other)


class PairingSwapped(TorchAdapter):
    name = "broken-pairing-swapped"

    def rope(self, params, *, dtype, device):
        return _SwappedRope(params, DTYPES[dtype], device)

    def rope_apply_with_cos_sin(self, q, k, cos, sin, params):
        other = params.model_copy(update={"pairing": "interleaved" if params.pairing == "half" else "half"})
        return super().rope_apply_with_cos_sin(q, k, cos, sin, other)


class PairingSwappedUnderYarn(TorchAdapter):
    """The pairing swapped under YaRN only (every other rope_type right): the YaRN cases name
    DIV-ROPE-PAIRING-SWAPPED, and the default-RoPE goldens that pass do not refute it (a golden of
    another kind of case is not like with like)."""
    name = "broken-pairing-swapped-under-yarn"

    def rope(self, params, *, dtype, device):
        return (_SwappedRope if params.rope_type == "yarn" else TorchRope)(params, DTYPES[dtype], device)


class _Bf16Rope(TorchRope):
    def __init__(self, params, dtype, device):
        super().__init__(params, dtype, device)
        self._inv_freq = self._inv_freq.to(torch.bfloat16)  # the classic `.to(torch.bfloat16)` on the module

    def _cos_sin(self, position_ids):
        phi = (position_ids.to(torch.bfloat16)[..., None] * self._inv_freq).to(self.compute)  # angle in bf16
        return self._af * torch.cos(phi), self._af * torch.sin(phi)

    def inv_freq(self):
        return self._inv_freq.to(self.compute), float(self._af)


class _Bf16InvFreqRope(TorchRope):
    def __init__(self, params, dtype, device):
        super().__init__(params, dtype, device)
        self._inv_freq = self._inv_freq.to(torch.bfloat16).to(self.compute)  # buffer cast, product in f32


class Bf16InvFreq(TorchAdapter):
    name = "broken-bf16-inv-freq"

    def rope(self, params, *, dtype, device):
        return _Bf16InvFreqRope(params, DTYPES[dtype], device)


class Bf16Angles(TorchAdapter):
    name = "broken-bf16-angles"

    def rope(self, params, *, dtype, device):
        return _Bf16Rope(params, DTYPES[dtype], device)


class _ActivationDtypePositionsRope(TorchRope):
    def _cos_sin(self, position_ids):  # rotary-embedding-torch's get_seq_pos: arange(T, dtype=t.dtype)
        self._update(position_ids)
        phi = position_ids.to(self.dtype).to(self.compute)[..., None] * self._inv_freq
        return self._af * torch.cos(phi), self._af * torch.sin(phi)


class PositionsInActivationDtype(TorchAdapter):
    """Positions rounded to the activation dtype before the float32 angle product: at bfloat16
    DIV-ROPE-BF16-POSITIONS, at float16 DIV-ROPE-F16-POSITIONS (inf above 65504)."""
    name = "broken-positions-in-activation-dtype"

    def rope(self, params, *, dtype, device):
        return _ActivationDtypePositionsRope(params, DTYPES[dtype], device)


class _KSideRope(TorchRope):
    """k left unrotated (``backwards=False``) or rotated by -phi (``backwards=True``); q right."""
    backwards = False

    def apply(self, q, k, position_ids):
        c, s = self._cos_sin(position_ids)
        r, pr = self.p.pair_dim, self.p.pairing
        s = s * self.p.sin_sign  # q turns the declared way (ROPE-ROTATION-NEGATIVE)
        yk = rotate(k, c, -s, r, pr) if self.backwards else k
        return rotate(q, c, s, r, pr), yk


class _KBackwardsRope(_KSideRope):
    backwards = True


class KNotRotated(TorchAdapter):
    """q rotated, k returned as is: scores depend on the query's absolute position."""
    name = "broken-k-not-rotated"

    def rope(self, params, *, dtype, device):
        return _KSideRope(params, DTYPES[dtype], device)


class KRotatedBackwards(TorchAdapter):
    """k rotated by -phi: scores depend on m + n, pair norms and each output's pairing intact."""
    name = "broken-k-rotated-backwards"

    def rope(self, params, *, dtype, device):
        return _KBackwardsRope(params, DTYPES[dtype], device)


class _LongOffsetRope(TorchRope):
    def _cos_sin(self, position_ids):  # +1 on every position of a call that reaches 60000
        return super()._cos_sin(position_ids + 1 if int(position_ids.max()) >= 60000 else position_ids)


class OffByOneWhenLong(TorchAdapter):
    """Every position +1, but only in calls reaching position 60000: on those calls exactly
    DIV-ROPE-POSITIONS-OFF-BY-ONE, which the short cases that pass contradict."""
    name = "broken-off-by-one-when-long"

    def rope(self, params, *, dtype, device):
        return _LongOffsetRope(params, DTYPES[dtype], device)


class _PlusOneLongRope(TorchRope):
    def _cos_sin(self, position_ids):  # +1 on each position from 8192 on
        return super()._cos_sin(position_ids + (position_ids >= 8192).to(position_ids.dtype))


class PlusOneOnLongPositions(TorchAdapter):
    """+1 on every position >= 8192 (a hostile review): on goldens whose long positions are 2^k - 1
    (131071, 65535) exactly what positions held in bfloat16 give (DIV-ROPE-BF16-POSITIONS); the
    off-grid goldens of the same kinds refute that name."""
    name = "broken-plus-one-on-long-positions"

    def rope(self, params, *, dtype, device):
        return _PlusOneLongRope(params, DTYPES[dtype], device)


class _LouderRope(TorchRope):
    def _cos_sin(self, position_ids):  # cos and sin 2.5 % too large (an attention factor off)
        c, s = super()._cos_sin(position_ids)
        return c * 1.025, s * 1.025


class AmplitudeTwoAndAHalfPercent(TorchAdapter):
    """Every rotated pair 2.5 % longer than it should be: within each element's bound at bfloat16
    (about 3 % of |x_pair|), not within the pair-norm check's bound on the mean (a hostile review)."""
    name = "broken-amplitude-2.5-percent"

    def rope(self, params, *, dtype, device):
        return _LouderRope(params, DTYPES[dtype], device)


class _ScaledNoRopeLayers:
    def __init__(self, op):
        self.op = op

    def apply(self, q, k, position_ids, layer_idx):
        if self.op.ops[self.op.params.layer_type(layer_idx)] is None:  # no RoPE: a float32 round trip x (1 + 2^-22)
            return (q.float() * (1 + 2.0 ** -22)).to(q.dtype), (k.float() * (1 + 2.0 ** -22)).to(k.dtype)
        return self.op.apply(q, k, position_ids, layer_idx)


class NoRopeLayersNotIdentical(TorchAdapter):
    """A layer without RoPE returns q and k x (1 + 2^-22): within the rotation's bound the golden test
    compares such a layer with at float32, not bit-identical (LAYERS-NO-ROPE's identity check)."""
    name = "broken-no-rope-layers-not-identical"

    def layer_rope(self, params, *, dtype, device):
        return _ScaledNoRopeLayers(super().layer_rope(params, dtype=dtype, device=device))


class _DoubledPositionsRope(TorchRope):
    def _cos_sin(self, position_ids):
        return super()._cos_sin(position_ids * 2)


class PositionsDoubled(TorchAdapter):
    """Positions x 2: at position 1 (the pairing probe's only one) the same as +1."""
    name = "broken-positions-doubled"

    def rope(self, params, *, dtype, device):
        return _DoubledPositionsRope(params, DTYPES[dtype], device)


class _CondensedRope(TorchRope):
    def _cos_sin(self, position_ids):
        return super()._cos_sin(position_ids / 40)


class PositionsCondensed(TorchAdapter):
    """Positions divided by 40 (a condensing ratio applied where none is specified): at position 1
    pair 0 turns by 1/40 rad, which a bf16 probe output shows (0.025) under the probe's threshold."""
    name = "broken-positions-condensed"

    def rope(self, params, *, dtype, device):
        return _CondensedRope(params, DTYPES[dtype], device)


class _TailRope(TorchRope):
    def __init__(self, params, dtype, device):
        super().__init__(params.model_copy(update={"rotary_dim": None}), dtype, device)


class TailRotated(TorchAdapter):
    name = "broken-tail-rotated"

    def rope(self, params, *, dtype, device):
        return _TailRope(params, DTYPES[dtype], device)


class OptOffsetZero(TorchAdapter):
    name = "broken-opt-offset-0"

    def opt_rows(self, positions):
        return positions

    def opt_embeddings(self, params, weights, *, dtype, device):
        table = weights["table"]
        return lambda attention_mask, cache_length=0: table[self.opt_positions(attention_mask, cache_length)]


class CacheOffByOne(TorchAdapter):
    name = "broken-cache-off-by-one"

    def position_ids(self, rule, *, device, **x):
        if rule == "decode":
            x = {**x, "cache_length": x["cache_length"] + 1}
        return super().position_ids(rule, device=device, **x)

    def gpt2_embeddings(self, params, weights, *, dtype, device):
        f = super().gpt2_embeddings(params, weights, dtype=dtype, device=device)
        return lambda input_ids, position_ids=None, cache_length=0: f(
            input_ids, position_ids, cache_length + 1 if cache_length else 0)

    def opt_positions(self, attention_mask, cache_length):
        return super().opt_positions(attention_mask, cache_length) + (1 if cache_length else 0)


class ClampedLookup(TorchAdapter):
    name = "broken-clamped-lookup"

    def lookup(self, table, rows):
        return torch.nn.functional.embedding(rows.clamp(0, table.shape[0] - 1), table)


class TokenTypeIgnored(TorchAdapter):
    name = "broken-token-type-ignored"

    def bert_embeddings(self, params, weights, *, dtype, device):
        w = dict(weights)
        w["token_type_embeddings"] = torch.zeros_like(w["token_type_embeddings"])
        return super().bert_embeddings(params, w, dtype=dtype, device=device)


class NothingSupported(Adapter):
    """Array conversions only, every operation unsupported: a run that checks nothing must fail."""

    name = "nothing-supported"
    framework = "torch"
    from_numpy, to_numpy = TorchAdapter.from_numpy, TorchAdapter.to_numpy
    dtype_of, device_of = TorchAdapter.dtype_of, TorchAdapter.device_of
    versions = TorchAdapter.versions


class WrongDtype(TorchAdapter):
    """Upcasts: returns float32 whatever the requested dtype."""

    name = "broken-wrong-dtype"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        return super().sinusoidal(position_ids, params, dtype="float32", device=device)


class Transposed(TorchAdapter):
    """Returns q/k as [B, T, H, D]."""

    name = "broken-transposed"

    def rope(self, params, *, dtype, device):
        inner = super().rope(params, dtype=dtype, device=device)

        class R:
            inv_freq, cos_sin = inner.inv_freq, inner.cos_sin

            def apply(self, q, k, pid):
                a, b = inner.apply(q, k, pid)
                return a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous()
        return R()


class NaNOutput(TorchAdapter):
    name = "broken-nan"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        out = super().sinusoidal(position_ids, params, dtype=dtype, device=device).clone()
        out[..., -1] = float("nan")
        return out


class _NoRotationRope(TorchRope):
    def apply(self, q, k, position_ids):
        return q, k


class NoRotation(TorchAdapter):
    name = "broken-no-rotation"

    def rope(self, params, *, dtype, device):
        return _NoRotationRope(params, DTYPES[dtype], device)


class OptOffsetZeroChecked(TorchAdapter):
    """OPT rows without the +2 offset, through the range-checked lookup (padding -> row -1 raises)."""

    name = "broken-opt-offset-0-checked"

    def opt_rows(self, positions):
        return positions


class ImportOrSkip(TorchAdapter):
    """Skips when its kernel library is missing: that must fail, not pass."""

    name = "broken-importorskip"

    def rope(self, params, *, dtype, device):
        import pytest
        pytest.importorskip("no_such_flash_kernel_library")


class AlibiNaiveSlopes(TorchAdapter):
    """ALiBi slopes 2^(-8k/n) for every head count, also where n is not a power of two."""

    name = "broken-alibi-naive-slopes"

    def _slopes(self, params, dtype, device):
        n = params.num_heads
        k = torch.arange(1, n + 1, dtype=torch.float64, device=device)
        return torch.exp2(-params.alibi_bias_max * k / n).to(dtype)


class AlibiSignFlipped(TorchAdapter):
    """ALiBi bias with a positive slope on the distance."""

    name = "broken-alibi-sign-flipped"

    def alibi_bias(self, params, *, dtype, device, **inputs):
        return -super().alibi_bias(params, dtype=dtype, device=device, **inputs)


class T5RelSignFlipped(TorchAdapter):
    """T5 buckets of query - key instead of key - query (mesh-tf's n = -rel taken as rel)."""

    name = "broken-t5-rel-sign"

    def _buckets(self, relative_position, params):
        return t5_buckets(-relative_position, params)


class T5CacheIgnored(TorchAdapter):
    """T5 bias whose query positions ignore cache_length."""

    name = "broken-t5-cache-ignored"

    def t5_bias(self, params, weights, *, dtype, device):
        f = super().t5_bias(params, weights, dtype=dtype, device=device)
        return lambda query_length, key_length, cache_length=0: f(query_length, key_length, 0)


class FairseqPadRowKept(TorchAdapter):
    """fairseq / M2M100 sinusoids without ``emb[padding_idx] = 0``: the pad row is a sinusoid."""

    name = "broken-fairseq-pad-row-kept"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        if params.variant == "fairseq":
            params = params.model_copy(update={"variant": "t2t", "padding_idx": None})
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)


class RobertaArangePositions(TorchAdapter):
    """RoBERTa rows padding_idx + 1 + cache_length + arange(T): padding ignored."""

    name = "broken-roberta-arange"

    def roberta_positions(self, input_ids, params, cache_length):
        B, T = input_ids.shape
        return (params.padding_idx + 1 + cache_length + torch.arange(T, device=input_ids.device)).expand(B, T)


class _TemporalOnlyMRope(TorchMRope):
    def _cos_sin(self, position_ids):
        return super()._cos_sin(position_ids[:1].expand(3, -1, -1))  # 1-D RoPE on the t axis


class MRopeTemporalOnly(TorchAdapter):
    """A Qwen2-VL port that reuses a 1-D rotary module: height and width dropped."""
    name = "broken-mrope-temporal-only"

    def mrope(self, params, *, dtype, device):
        return _TemporalOnlyMRope(params, DTYPES[dtype], device)


class MRopeInterleavedAsContiguous(TorchAdapter):
    """Qwen3-VL's sections laid out contiguously."""
    name = "broken-mrope-interleaved-as-contiguous"

    def mrope(self, params, *, dtype, device):
        return TorchMRope(params.model_copy(update={"layout": "contiguous"}), DTYPES[dtype], device)


class NopeFlagsInverted(TorchAdapter):
    """no_rope_layers read literally (1 = NoPE)."""
    name = "broken-nope-flags-inverted"

    def nope_layer_flags(self, params, *, device):
        return 1 - super().nope_layer_flags(params, device=device)


class NopeStillRotates(TorchAdapter):
    """A NoPE layer that still applies RoPE (the per-layer flag is ignored in attention)."""
    name = "broken-nope-still-rotates"

    def nope_apply(self, q, k, position_ids, layer_idx, params):
        from posenc.spec.models import RopeParams
        r = TorchRope(RopeParams(head_dim=q.shape[-1]), q.dtype, str(q.device))
        return r.apply(q, k, position_ids)


class _InPlaceRope(TorchRope):
    def apply(self, q, k, position_ids):
        rq, rk = super().apply(q, k, position_ids)
        q.copy_(rq)  # a correct kernel that rotates in place (as fused kernels do) and returns its input
        k.copy_(rk)
        return q, k


class InPlaceRope(TorchAdapter):
    """Right values, written into the kit's q and k: the suite must name the in-place write, and
    the kit's cached goldens must stay intact (torch.from_numpy shares memory at float64)."""
    name = "broken-in-place-rope"

    def rope(self, params, *, dtype, device):
        return _InPlaceRope(params, DTYPES[dtype], device)


class NumpyOutput(TorchAdapter):
    """Returns a NumPy array where a torch tensor is due: a contract violation, named as such."""

    name = "broken-numpy-output"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        return self.to_numpy(super().sinusoidal(position_ids, params, dtype=dtype, device=device))


class ExitsInOneCase(TorchAdapter):
    """Kills its process (``os._exit``) on the concat sinusoid table of width 7 (on every table when
    ``POSENC_TEST_CRASH_ALL`` is set; with a signal instead when ``POSENC_TEST_SIGNAL`` names one:
    SIGSEGV, SIGKILL as an out-of-memory kill sends; after forking a child that holds its pipes open
when ``POSENC_TEST_FORK`` names a file for the child's pid), hangs on width 10 when ``POSENC_TEST_HANG`` is
    set (``swallow``: in a loop that swallows every exception, the alarm's too); prints on stdout
    and stderr, from Python and from C level, on every table: a crashed case fails by ID and the
    run goes on."""

    name = "broken-exits"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        import os
        import signal
        import sys
        import time
        print("a print on stdout")
        print("a print on stderr", file=sys.stderr)
        os.write(1, b"bytes written to fd 1\n")
        if os.environ.get("POSENC_TEST_CRASH_ALL") or (
                params.dim == 7 and params.layout == "concat" and params.variant == "vaswani"):
            if os.environ.get("POSENC_TEST_FORK"):  # a child that keeps the process's pipes open
                if os.fork() == 0:
                    with open(os.environ["POSENC_TEST_FORK"], "w") as f:
                        f.write(str(os.getpid()))
                    time.sleep(600)
                    os._exit(0)
                time.sleep(0.2)
            sig = os.environ.get("POSENC_TEST_SIGNAL")
            if sig:
                os.kill(os.getpid(), getattr(signal, sig))
            os._exit(3)
        if params.dim == 10 and os.environ.get("POSENC_TEST_HANG") == "swallow":
            while True:
                try:
                    time.sleep(3600)
                except BaseException:  # noqa: BLE001 - the hostile part: nothing stops it from inside
                    pass
        if params.dim == 10 and os.environ.get("POSENC_TEST_HANG"):
            time.sleep(3600)
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)


class HangsWithAChild(TorchAdapter):
    """Starts a child process (a sleep) and hangs on the concat sinusoid table of width 10: a run
    ended from outside (SIGTERM, SIGHUP, SIGKILL to pytest) must leave neither of them running."""

    name = "broken-hangs-with-a-child"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        if params.dim == 10 and params.layout == "concat":
            import subprocess
            import sys
            import time
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            time.sleep(3600)
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)


class _UpcastOnDecodeRope(TorchRope):
    calls = 0

    def apply(self, q, k, position_ids):
        self.calls += 1
        yq, yk = super().apply(q, k, position_ids)
        return (yq.float(), yk.float()) if self.calls > 1 else (yq, yk)


class UpcastOnDecode(TorchAdapter):
    """Right values in the wrong dtype, from the second call of a prepared RoPE on (decode steps)."""
    name = "broken-upcast-on-decode"

    def rope(self, params, *, dtype, device):
        return _UpcastOnDecodeRope(params, DTYPES[dtype], device)


class RaisesPytestOutcomes(TorchAdapter):
    """The sinusoid table raises pytest.xfail, the interleaved ALiBi bias SystemExit, T5 buckets
    GeneratorExit: each a clause-named failure, never an expected divergence or a lost run."""
    name = "broken-raises-outcomes"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        import pytest
        pytest.xfail("not today")

    def alibi_slopes(self, params, *, dtype, device):
        raise SystemExit(3)

    def t5_buckets(self, relative_position, params):
        raise GeneratorExit()


class RoundsInputsToBf16(TorchAdapter):
    """Every float input rounded to bfloat16 on the way in, whatever the run's dtype (a kernel that
    casts its activations to bf16 internally and back): exact on inputs that are bf16-exact."""
    name = "broken-rounds-inputs-to-bf16"

    def from_numpy(self, x, dtype, device):
        t = super().from_numpy(x, dtype, device)
        return t.to(torch.bfloat16).to(t.dtype) if t.is_floating_point() else t


class _UnprintableError(RuntimeError):
    """An exception whose ``str()`` raises SystemExit and whose ``reason`` property raises."""

    def __str__(self):
        raise SystemExit("from __str__")

    @property
    def reason(self):
        raise RuntimeError("from reason")


class HostileObjects(TorchAdapter):
    """Right values through objects that are not plain data, wrong ones through exceptions that
    cannot be printed: ``dtypes`` a frozenset, the prepared RoPE a named tuple (its ``apply`` a
    field), the sinusoid table raising an exception whose ``str()`` raises SystemExit (and whose
    ``reason`` raises).  Each mode must give the same verdicts; nothing may crash the worker."""

    name = "broken-hostile-objects"
    dtypes = frozenset(TorchAdapter.dtypes)
    call_forms = ()  # its prepared RoPE has apply and cos_sin only

    def rope(self, params, *, dtype, device):
        import collections
        prepared = super().rope(params, dtype=dtype, device=device)
        return collections.namedtuple("Prepared", ["apply", "cos_sin"])(prepared.apply, prepared.cos_sin)

    def sinusoidal(self, position_ids, params, *, dtype, device):
        raise _UnprintableError()


class InterruptsInOneCase(TorchAdapter):
    """Raises KeyboardInterrupt itself on the concat sinusoid table of width 8: the run stops
    there (an incomplete report), in the adapter's process or in the plugin's alike."""

    name = "broken-interrupts"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        if params.dim == 8 and params.layout == "concat":
            raise KeyboardInterrupt("the adapter's own")
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)


def _sin_is(params, dim: int) -> bool:
    return params.dim == dim and params.layout == "concat" and params.variant == "vaswani"


class ForksAndReturns(TorchAdapter):
    """Forks on the float32 concat table of width 8 and both processes return (a library's fork
    whose exec failed); the float64 table is wrong: a second process must never answer for the
    worker and pass that wrong table."""

    name = "broken-forks-and-returns"

    def sinusoidal(self, position_ids, params, *, dtype, device):
        import os
        out = super().sinusoidal(position_ids, params, dtype=dtype, device=device)
        if _sin_is(params, 8) and dtype == "float32" and not getattr(self, "forked", False):
            self.forked = True
            os.fork()
        return out * 0 + 0.123 if dtype == "float64" else out


class _NoName:
    def __str__(self):
        raise RuntimeError("no name")


class _UndescribableError(RuntimeError):
    __module__ = _NoName()  # type: ignore[assignment]


class MaskedOrUndescribable(TorchAdapter):
    """``to_numpy`` returns a masked array (its data right) of a float table of width 8; the
    table of width 7 raises an exception whose class's module cannot be printed; the worker
    removes its spill folder on width 10: contract failures and clause-named failures in either
    mode, the worker alive, later large arrays still crossing."""

    name = "broken-masked-or-undescribable"

    def to_numpy(self, x):
        a = super().to_numpy(x)
        if a.dtype.kind == "f" and a.ndim == 3 and a.shape[-1] == 8:  # a table of width 8
            import numpy as np
            return np.ma.masked_array(a, mask=True)
        return a

    def sinusoidal(self, position_ids, params, *, dtype, device):
        if _sin_is(params, 7):
            raise _UndescribableError("undescribable")
        if _sin_is(params, 10):
            import shutil
            from posenc.conformance import wire
            if wire.SPILL_DIR:
                shutil.rmtree(wire.SPILL_DIR, ignore_errors=True)
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)


class JunkOrLoadFails(TorchAdapter):
    """Writes bytes into every file descriptor from 3 to 9 on the concat table of width 8 (the
    connection: a crash, never a hang); exits on width 7, after which its constructor fails
    while ``POSENC_TEST_LOCK`` names an existing file (a lock the dead process left): each
    failed start counts as a crash."""

    name = "broken-junk-or-load-fails"

    def __init__(self):
        import os
        lock = os.environ.get("POSENC_TEST_LOCK")
        if lock and os.path.exists(lock):
            raise RuntimeError("a lock held by an earlier process")
        super().__init__()

    def sinusoidal(self, position_ids, params, *, dtype, device):
        import os
        if _sin_is(params, 8):
            for fd in range(3, 10):
                try:
                    os.write(fd, b"hello from C\n")
                except OSError:
                    pass
        if _sin_is(params, 7):
            lock = os.environ.get("POSENC_TEST_LOCK")
            if lock:
                open(lock, "w").close()
            os._exit(3)
        return super().sinusoidal(position_ids, params, dtype=dtype, device=device)
