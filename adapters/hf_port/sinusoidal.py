"""Sinusoidal tables (SIN-*) from Marian, DistilBERT, M2M100, Whisper, MusicGen and VibeVoice code.

Options (spec 0.5.0): ``order`` cos_first is served by transformers' own [cos | sin] tables --
MusicGen's ``MusicgenSinusoidalPositionalEmbedding`` (variant t2t) and VibeVoice's diffusion-head
timestep embedding (variant vaswani, layout concat, even D); ``units`` turns and ``scale`` other
than 1 are in no transformers sinusoid table: Unsupported, never ignored.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
from transformers.models.m2m_100 import modeling_m2m_100 as hf_m2m
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.musicgen.modeling_musicgen import MusicgenSinusoidalPositionalEmbedding
from transformers.models.vibevoice.configuration_vibevoice import VibeVoiceDiffusionHeadConfig
from transformers.models.vibevoice.modeling_vibevoice import VibeVoiceDiffusionHeadSinusoidalEmbedding
from transformers.models.whisper import modeling_whisper as hf_whisper

from ..base import Unsupported
from ..torch_adapter import DTYPES
from ._common import HF_FIXED_BASE


class Ops:
    """The sinusoidal operations of :class:`~posenc.adapters.hf_transformers.HFTransformersAdapter`."""

    @torch.no_grad()
    def sinusoidal(self, position_ids, params, *, dtype, device):
        """SIN-VASWANI-CONCAT (Marian) / SIN-VASWANI-INTERLEAVED (DistilBERT), ``[B, T, D]``.

        The table has ``max(position_ids) + 1`` rows and is gathered with ``nn.Embedding``.
        Order cos_first (SIN-ORDER-COS-FIRST): :meth:`_cos_first`.
        """
        _plain_table_only(params)
        dt = DTYPES[dtype]
        n_pos = int(position_ids.max()) + 1 if position_ids.numel() else 1
        if params.order == "cos_first":
            return self._cos_first(position_ids, params, dt, n_pos)
        if params.base != HF_FIXED_BASE:
            raise Unsupported(f"HF's sinusoidal tables (Marian, DistilBERT, XLM) hard-code base 10000 "
                              f"(got {params.base:g})")
        if params.variant != "vaswani":
            return self._h_minus_1(position_ids, params, dt, n_pos)
        if params.layout == "concat":
            emb = MarianSinusoidalPositionalEmbedding(n_pos, params.dim).to(dtype=dt)
            emb.weight.copy_(emb.create_weight())  # what MarianPreTrainedModel._init_weights does
            emb = emb.to(position_ids.device)
            return emb(position_ids.shape, position_ids=position_ids)
        table = create_sinusoidal_embeddings(n_pos, params.dim, torch.empty(n_pos, params.dim, dtype=dt))
        emb = nn.Embedding.from_pretrained(table.to(position_ids.device), freeze=True)
        return emb(position_ids)

    def _h_minus_1(self, position_ids, params, dt, n_pos):
        """SIN-T2T (M2M100 ``get_embedding`` without a pad row), SIN-FAIRSEQ-POSITIONS (the
        ``M2M100SinusoidalPositionalEmbedding`` table), SIN-WHISPER (``sinusoids``).  The HF
        tables are float32 (the default dtype), cast to the requested dtype as ``model.to``
        would; rows are gathered as the HF modules gather them."""
        D, dev = params.dim, position_ids.device
        if params.variant == "t2t":
            if D // 2 == 1:
                raise Unsupported("SIN-T2T at D // 2 == 1: tensor2tensor clamps the divisor h - 1 to 1, and no "
                                  "transformers code does (M2M100/fairseq get_embedding divides by zero, Whisper's "
                                  "sinusoids too); transformers has no tensor2tensor port")
            table = hf_m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(n_pos, D, None)
        elif params.variant == "fairseq":
            emb = hf_m2m.M2M100SinusoidalPositionalEmbedding(n_pos, D, params.padding_idx).to(device=dev, dtype=dt)
            return emb.weights.index_select(0, position_ids.reshape(-1)).view(*position_ids.shape, -1)
        else:
            table = hf_whisper.sinusoids(n_pos, D)
        emb = nn.Embedding.from_pretrained(table.to(device=dev, dtype=dt), freeze=True)
        return emb(position_ids)

    @torch.no_grad()
    def _cos_first(self, position_ids, params, dt, n_pos):
        """SIN-ORDER-COS-FIRST from transformers' own [cos | sin] tables, float32 as built, cast to
        ``dt`` as ``model.to`` would cast a table: variant t2t -- MusicGen's
        ``MusicgenSinusoidalPositionalEmbedding(n_pos, D)``, its ``weights`` gathered with
        ``index_select`` as its forward does (base 10000; D // 2 == 1 divides by zero there);
        variant vaswani -- VibeVoice's ``VibeVoiceDiffusionHeadSinusoidalEmbedding`` (frequencies
        ``diffusion_max_period^(-i/(D/2))``, an int base, even D) called on the positions."""
        D, dev, v = params.dim, position_ids.device, params.variant
        if v == "t2t":
            if params.base != HF_FIXED_BASE:
                raise Unsupported(f"MusicGen's cos-first table hard-codes base 10000 (got {params.base:g})")
            if D // 2 == 1:
                raise Unsupported("SIN-T2T at D // 2 == 1: tensor2tensor clamps the divisor h - 1 to 1; MusicGen's "
                                  "get_embedding divides by half_dim - 1 = 0 (ZeroDivisionError)")
            emb = MusicgenSinusoidalPositionalEmbedding(n_pos, D).to(device=dev, dtype=dt)
            return emb.weights.index_select(0, position_ids.reshape(-1)).view(*position_ids.shape, -1)
        if v != "vaswani":
            raise Unsupported(f"no transformers code builds the {v} table cos first (its [cos | sin] tables are "
                              "MusicGen's t2t table and VibeVoice's Vaswani timestep embedding)")
        if D % 2:
            raise Unsupported(f"VibeVoice's cos-first timestep embedding has 2 * (D // 2) columns: odd D = {D} "
                              "is not expressible (transformers has no odd-width Vaswani [cos | sin] table)")
        if params.base != int(params.base):
            raise Unsupported(f"VibeVoiceDiffusionHeadConfig.diffusion_max_period is an int (got base {params.base:g})")
        cfg = VibeVoiceDiffusionHeadConfig(frequency_embedding_size=D, diffusion_max_period=int(params.base))
        emb = VibeVoiceDiffusionHeadSinusoidalEmbedding(cfg).to(dev)
        return emb(position_ids.reshape(-1)).view(*position_ids.shape, D).to(dt)

    @torch.no_grad()
    def fairseq_positions(self, input_ids, params, cache_length):
        """SIN-FAIRSEQ-POSITIONS: ``M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids``."""
        return hf_m2m.M2M100SinusoidalPositionalEmbedding.create_position_ids_from_input_ids(
            input_ids, params.padding_idx, cache_length)

    def fairseq_sinusoidal(self, params, *, dtype, device):
        """SIN-FAIRSEQ-POSITIONS end to end: ``M2M100SinusoidalPositionalEmbedding`` forward on
        ``input_ids`` (its own positions; its table regrows past ``num_positions``)."""
        _plain_table_only(params)
        if params.order != "sin_first":
            raise Unsupported("M2M100's fairseq table is [sin | cos]: order cos_first is not expressible")
        if params.base != HF_FIXED_BASE:
            raise Unsupported(f"M2M100's sinusoids hard-code base 10000 (got {params.base:g})")
        emb = hf_m2m.M2M100SinusoidalPositionalEmbedding(16, params.dim, params.padding_idx)
        emb = emb.to(device=device, dtype=DTYPES[dtype])

        @torch.no_grad()
        def call(input_ids, cache_length=0):
            return emb(input_ids, cache_length=cache_length)
        return call


def _plain_table_only(params) -> None:
    """Unsupported for the options no transformers sinusoid table has: angles in turns (SIN-UNITS-TURNS)
    and an output scale (SIN-OUTPUT-SCALE; x-transformers' and cramming's scaled sinusoids are not in
    transformers)."""
    if params.units != "radians":
        raise Unsupported("no transformers sinusoid table takes its angles in turns (2π · p · w): units "
                          f"{params.units!r} is not expressible")
    if params.scale != 1.0:
        raise Unsupported(f"no transformers sinusoid table multiplies its entries by a scale (got {params.scale:g}; "
                          "x-transformers' ScaledSinusoidalEmbedding and cramming's ScaledSinosoidal are not in "
                          "transformers)")
