"""The kit's torch port with one RoPE-scaling bug each (loaded by path, like a user adapter)."""

from __future__ import annotations

from posenc.adapters.torch_adapter import DTYPES, TorchAdapter, TorchRope


class _Rewrite(TorchAdapter):
    """Runs the correct port on rewritten parameters: ``wrong(params)`` is the bug."""

    rope_type = ""

    def wrong(self, p):
        raise NotImplementedError

    def rope(self, params, *, dtype, device):
        p = self.wrong(params) if params.rope_type == self.rope_type else params
        return TorchRope(p, DTYPES[dtype], device)


class LinearExponent(_Rewrite):
    """theta^(-2i/(d * factor)): the factor scales the exponent."""
    name, rope_type = "broken-linear-exponent", "linear"

    def wrong(self, p):
        return p.model_copy(update={"rope_type": "default", "factor": None, "rope_theta": p.rope_theta ** (1 / p.factor)})


class YarnMscaleIgnored(_Rewrite):
    name, rope_type = "broken-yarn-mscale-ignored", "yarn"

    def wrong(self, p):
        return p.model_copy(update={"mscale": None, "mscale_all_dim": None})


class YarnTruncateFlipped(_Rewrite):
    name, rope_type = "broken-yarn-truncate-flipped", "yarn"

    def wrong(self, p):
        return p.model_copy(update={"truncate": not (p.truncate is None or p.truncate)})


class DynamicStale(_Rewrite):
    """Keeps a grown theta' after a shorter call although per_call is asked for."""
    name, rope_type = "broken-dynamic-stale", "dynamic"

    def wrong(self, p):
        if p.dynamic_policy == "grow_until_reset":
            return p
        return p.model_copy(update={"dynamic_policy": "grow_until_reset"})


class Llama3Ignored(_Rewrite):
    name, rope_type = "broken-llama3-ignored", "llama3"

    def wrong(self, p):
        return p.model_copy(update={"rope_type": "default"})


class LongropeAlwaysShort(_Rewrite):
    name, rope_type = "broken-longrope-always-short", "longrope"

    def wrong(self, p):
        return p.model_copy(update={"long_factor": p.short_factor})


class ProportionalAsPartial(_Rewrite):
    name, rope_type = "broken-proportional-as-partial", "proportional"

    def wrong(self, p):
        return p.model_copy(update={"rope_type": "default", "factor": None})


class SoftmaxMscaleNotSquared(TorchAdapter):
    """The DeepSeek softmax scale with the mscale correction applied once, not squared."""
    name = "broken-softmax-mscale-not-squared"

    def attention_probs(self, q, k, params):
        import math

        from posenc.adapters.torch_adapter import attention_probs

        p = params.rope
        m = 0.1 * p.mscale_all_dim * math.log(p.factor) + 1.0 if p.factor > 1 else 1.0
        return attention_probs(q, k, params.qk_head_dim ** -0.5 * m)
