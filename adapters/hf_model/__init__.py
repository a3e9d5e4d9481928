"""``hf:<model_type>``: a tiny transformers model of a real architecture, as a model adapter.

The model is built from transformers' own config class with the tiny sizes and the overlaid
positional parameters of :mod:`posenc.adapters.hf_model.architectures` and seeded random weights
(``torch.manual_seed``; nothing is downloaded), at the requested dtype, on the requested device,
with the requested attention implementation (``eager`` or ``sdpa``; transformers 5.24 picks the
masks and kernels for each).  It is called as users call it: ``model(input_ids=...,
attention_mask=..., position_ids=..., cache=..., use_cache=...)`` and ``model.generate(...)``
(greedy, ``output_logits``); the probes are :class:`posenc.adapters.hf_model.probes.Recorder`'s.
Its positional encoding, for the oracle, is the kit's own import of the same config
(:func:`posenc.hf.config.params_from_hf_config`), which the config survey checks against
transformers' rotary modules.
"""

from __future__ import annotations

import functools

import numpy as np

from posenc.adapters.model import ModelAdapter, Unsupported
from posenc.spec.models import DTYPES, RobertaEmbeddingParams

from .architectures import ARCHS, architectures, tiny_config, tiny_from_config

#: ``--attn`` names that force one of torch's SDPA kernels (CUDA): the backend's name in torch.
FORCED_SDPA = {"sdpa-flash": "FLASH_ATTENTION", "sdpa-efficient": "EFFICIENT_ATTENTION"}
_TORCH_DTYPES = {"float64": "float64", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class HFModelAdapter(ModelAdapter):
    """A tiny transformers model of ``model_type`` (one of :func:`architectures`)."""

    framework = "torch"
    attn_implementations = ("eager", "sdpa")
    #: --attn names it also runs: sdpa with one of torch's kernels forced (CUDA)
    attn_extra = tuple(FORCED_SDPA)
    devices = ("cpu", "cuda")
    dtypes = DTYPES

    def __init__(self, model_type: str, config: dict | None = None, name: str | None = None):
        a = ARCHS[model_type]
        self.arch = a
        self.name = name or f"hf:{model_type}"
        self.architecture = model_type
        self.kind = a.kind
        #: the config.json-style dict the model is built from (the tiny config of the model matrix, or
        #: a user's config shrunk by tiny_from_config)
        self.config = tiny_config(model_type) if config is None else dict(config)
        text = self.config.get("text_config") or {}  # a multimodal config's language model
        self.vocab_size = self.config.get("vocab_size", text.get("vocab_size"))
        self.pad_token_id = self.config.get("pad_token_id", text.get("pad_token_id"))
        # ids generate never chooses: an image placeholder (suppressed), and EOS (min_new_tokens forbids it)
        eos = self.config.get("eos_token_id", text.get("eos_token_id"))
        eos = [eos] if isinstance(eos, int) else list(eos or ())
        self.reserved_token_ids = tuple(dict.fromkeys([*a.extra.get("reserved", ()), *eos]))
        self.capabilities = a.capabilities
        self.probes = a.probes
        self.attn_implementations = a.attn
        self.attn_extra = tuple(FORCED_SDPA) if "sdpa" in a.attn else ()
        self.notes = a.notes

    def versions(self) -> dict[str, str]:
        import torch
        import transformers
        return {"transformers": transformers.__version__, "torch": torch.__version__}

    def device_available(self, device: str) -> bool:
        import torch
        kind, _, index = device.partition(":")
        if kind == "cpu":
            return True
        return kind == "cuda" and torch.cuda.is_available() and (not index or int(index) < torch.cuda.device_count())

    def encodings(self) -> dict:
        """The kit's import of the config (:func:`posenc.hf.config.params_from_hf_config`), and
        DeepSeek's softmax scale (``softmax_scale``: ``SoftmaxScaleParams`` of its YaRN set and its
        q/k head width, SCALE-YARN-SOFTMAX-SCALE)."""
        from posenc.hf import params_from_hf_config
        enc = params_from_hf_config(self.config)
        if any(k.startswith("rope.") for k in enc) and self.config.get("layer_types"):
            enc["layer_types"] = tuple(self.config["layer_types"])  # which set each layer rotates with
        if "softmax_scale" in self.arch.extra_encodings:
            from posenc.spec.models import SoftmaxScaleParams
            qk = int(self.config["qk_rope_head_dim"]) + int(self.config["qk_nope_head_dim"])
            enc["softmax_scale"] = SoftmaxScaleParams(rope=enc["rope"], qk_head_dim=qk)
        return enc

    @property
    def max_positions(self) -> int | None:
        """The positions the built model takes where it holds a table of them (a learned or sinusoid table,
        GPT-J's sin and cos table, MPT's ALiBi bias): its (text) config's ``max_target_positions`` (a decoder's,
        as Whisper's), ``max_position_embeddings`` (``n_positions``) or ``max_seq_len``, the config class's
        default where the config omits it.  None for a rotation computed at each call: there ``max_position_embeddings`` is a parameter of
        the scaling (dynamic NTK's growth starts there), not a limit transformers holds the positions to; None
        for a sinusoid table rebuilt longer for a longer sequence (M2M-100's). RoBERTa's count includes the
        rows below its first position (padding_idx + 1 + position): those are left out."""
        if (self.arch.table is None and not {"rotation_table", "bias_table"} & set(self.arch.extra)) or \
                "table_grows" in self.arch.extra:
            return None
        top = next(filter(None, (self._text_int(k) for k in ("max_target_positions", "max_position_embeddings",
                                                            "max_seq_len"))), None)
        emb = self.encodings().get("embeddings")
        if top is not None and isinstance(emb, RobertaEmbeddingParams):  # its count includes rows 0 .. padding_idx
            top -= emb.padding_idx + 1
        return top

    @property
    def num_layers(self) -> int | None:
        """The (text, decoder) config's ``num_hidden_layers``, the config class's default where it omits it."""
        return self._text_int("num_hidden_layers")

    @functools.cached_property
    def _text_config(self):
        """transformers' config object of the model (its text, decoder part), built once from ``config``."""
        from transformers import CONFIG_MAPPING
        cfg = CONFIG_MAPPING[self.architecture](**{k: v for k, v in self.config.items() if k != "model_type"})
        return cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg

    def _text_int(self, key: str) -> int | None:
        """A positive integer field of :attr:`_text_config`, or None."""
        v = getattr(self._text_config, key, None)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    def build(self, *, dtype: str, device: str, attn_implementation: str, seed: int = 0):
        """The tiny model at ``dtype`` on ``device``.  ``attn_implementation``: ``eager``, ``sdpa``, or
        (``--attn``, CUDA only) ``sdpa-flash`` / ``sdpa-efficient``: sdpa with torch's flash or
        memory-efficient kernel forced around every call (torch.nn.attention.sdpa_kernel)."""
        if dtype in self.arch.unsupported:
            raise Unsupported(self.arch.unsupported[dtype])
        import torch
        import transformers
        from transformers import CONFIG_MAPPING
        kernel = FORCED_SDPA.get(attn_implementation)
        if kernel is not None and not device.startswith("cuda"):
            raise Unsupported(f"{attn_implementation}: torch's {kernel} SDPA kernel runs on CUDA only (--device cuda)")
        if kernel is None and attn_implementation not in self.attn_implementations:
            raise Unsupported(f"attention implementation {attn_implementation!r}: {self.name} builds "
                              f"{', '.join((*self.attn_implementations, *self.attn_extra))}")
        kw = {k: v for k, v in self.config.items() if k != "model_type"}
        cfg = CONFIG_MAPPING[self.architecture](**kw)
        torch.manual_seed(seed)
        auto = getattr(transformers, self.arch.auto)
        model = auto.from_config(cfg, attn_implementation="sdpa" if kernel else attn_implementation,
                                 dtype=getattr(torch, _TORCH_DTYPES[dtype]))
        model = model.to(device).eval()
        return HFModel(model, self.arch, device, kernel)


def _document_index(p3: np.ndarray) -> np.ndarray:
    """The text row of Qwen-VL's ``[4, B, T]`` positions from M-RoPE's ``[3, B, T]``: each token's
    index in its document, a document starting where all three positions are 0 (MODEL-MROPE-PACKED:
    every document's positions start at (0, 0, 0), and no later token of a document is there: an
    image's first patch sits at (s, s, s), s > 0 unless the document starts with it)."""
    start = (p3 == 0).all(axis=0)  # [B, T]
    t = np.arange(p3.shape[-1])
    last = np.maximum.accumulate(np.where(start, t, 0), axis=-1)
    return (t - last).astype(np.int64)


class HFModel:
    """A built transformers model behind the model contract (posenc.adapters.model)."""

    def __init__(self, model, arch, device: str, kernel: str | None = None):
        from .probes import Recorder
        self.model, self.arch, self.device, self.kernel = model, arch, device, kernel
        self.recorder = Recorder(model, arch)
        self.dtype = next(model.parameters()).dtype
        self.seq2seq = arch.kind == "encoder-decoder"
        self._encoded: dict[int, object] = {}
        #: what transformers' ``position_ids`` add to the kit's positions: RoBERTa's are its table's rows,
        #: ``padding_idx + 1 + position`` (``RobertaEmbeddings.forward``); the others' are positions
        self.row_offset = model.config.pad_token_id + 1 if arch.extra.get("position_ids_are_rows") else 0

    def float64_twin(self) -> "HFModel":
        """This model's float64 twin: its weights (as rounded to its dtype) and its code, computing in
        float64 -- a deep copy cast with ``.to(float64)``, the config's dtype with it (the masks' fill value
        follows it), wrapped as this model is (a subclass's patches and the module's own hooks ride along;
        the probes' hooks are the twin recorder's).  The model tolerance rule also judges a run's logit
        pairs on its twin's (spec/model.yaml logits_bound)."""
        import copy

        import torch
        if "float64" in self.arch.unsupported:
            raise Unsupported(self.arch.unsupported["float64"])
        model = copy.deepcopy(self.model)
        mine = {h.id for h in self.recorder._hooks}  # the probes' hooks: the twin's recorder installs its own;
        for m in model.modules():  # every other hook (a user's, a patch's) rides along
            for name in ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                         "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"):
                hooks = getattr(m, name, {})
                for k in mine & set(hooks):
                    del hooks[k]
        model = model.to(torch.float64)
        model.config.dtype = torch.float64
        twin = copy.copy(self)
        HFModel.__init__(twin, model, self.arch, self.device, self.kernel)
        return twin

    # ---- an encoder-decoder's encoder side: one fixed source for every row ----------------------
    def _source(self, batch: int) -> dict:
        """The encoder's inputs for ``batch`` rows: the same seeded source on every row (so a row run
        alone sees what it saw in the batch): token ids, or Whisper's log-mel features."""
        import torch
        g = torch.Generator().manual_seed(1234)
        if self.arch.extra.get("features"):
            n_mels, frames = self.arch.extra["features"]
            x = torch.randn(1, n_mels, frames, generator=g).to(self.device, self.dtype)
            return {"input_features": x.expand(batch, -1, -1)}
        vocab = self.model.config.vocab_size
        ids = torch.randint(3, vocab, (1, 12), generator=g).to(self.device)
        ids[ids == self.model.config.pad_token_id] = 3
        return {"input_ids": ids.expand(batch, -1)}

    def _encoder_outputs(self, batch: int):
        """The encoder's output for ``batch`` rows, computed once (the decoder passes reuse it, so
        the probes see the decoder only)."""
        import torch
        if batch not in self._encoded:
            with torch.no_grad():
                self._encoded[batch] = self.model.get_encoder()(**self._source(batch))
        return self._encoded[batch]

    def _t(self, x, floating: bool = False):
        import torch
        if x is None:
            return None
        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.to(self.device, self.dtype if floating else torch.int64)

    def _extra(self, extra: dict) -> dict:
        """An image's inputs as tensors: ``pixel_values`` in the model's dtype, the rest int64."""
        return {k: self._t(v, floating=k == "pixel_values") for k, v in extra.items()}

    def image(self, grid_thw):
        """Seeded pixels of a ``(t, h, w)`` patch grid (Qwen2-VL's flattened patches,
        ``[t h w, channels x temporal x patch x patch]``) and what the language model sees of it."""
        import torch
        vc = self.model.config.vision_config
        t, h, w = (int(x) for x in grid_thw)
        g = torch.Generator().manual_seed(4321)
        patch = vc.in_channels * vc.temporal_patch_size * vc.patch_size ** 2
        m = vc.spatial_merge_size
        return {"pixel_values": torch.randn(t * h * w, patch, generator=g).numpy(), "image_grid_thw": [t, h, w],
                "image_token_id": int(self.model.config.image_token_id), "grid": (t, h // m, w // m)}

    def forward(self, input_ids=None, *, inputs_embeds=None, attention_mask=None, position_ids=None, cache=None,
                use_cache=False, **extra):
        import torch
        kw = {"input_ids": self._t(input_ids), "inputs_embeds": self._t(inputs_embeds, True),
              "attention_mask": self._t(attention_mask), "use_cache": bool(use_cache or cache is not None),
              **self._extra(extra)}
        if position_ids is not None:
            position_ids = np.asarray(position_ids) + self.row_offset
            if self.arch.extra.get("text_position_row"):
                # Qwen2-VL's own convention for positions a caller gives: [4, B, T], the text positions
                # (what its mask reads packing from) on top of the t, h, w rows; text tokens' rows are equal
                position_ids = np.asarray(position_ids)
                if position_ids.ndim == 3:  # M-RoPE's [3, B, T]: the text row counts tokens per document
                    position_ids = np.concatenate([_document_index(position_ids)[None], position_ids])
                else:
                    position_ids = np.broadcast_to(position_ids, (4, *position_ids.shape))
            kw["position_ids"] = self._t(position_ids)
        if cache is not None:
            kw["cache"] = cache
        if self.seq2seq:  # the scenario drives the decoder; the encoder's output is fixed
            b = (input_ids if input_ids is not None else inputs_embeds).shape[0]
            kw = {"decoder_" + k if k in ("input_ids", "inputs_embeds", "attention_mask", "position_ids") else k: v
                  for k, v in kw.items()}
            kw["encoder_outputs"] = self._encoder_outputs(b)
            if cache is None and kw["use_cache"]:
                from transformers import DynamicCache, EncoderDecoderCache
                kw["cache"] = EncoderDecoderCache(DynamicCache(config=self.model.config), DynamicCache(config=self.model.config))
        with torch.no_grad(), self._kernel(), self.recorder.capture():
            out = self.model(**kw)
        return out.logits, (out.cache if kw["use_cache"] else None)

    def _kernel(self):
        """The forced SDPA kernel's context (sdpa-flash, sdpa-efficient), or nothing."""
        import contextlib
        if self.kernel is None:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel([getattr(SDPBackend, self.kernel)])

    def embed(self, input_ids):
        """The token embeddings the (decoder's) forward computes from ``input_ids``."""
        import torch
        emb = self.model.get_decoder().embed_tokens if self.seq2seq else self.model.get_input_embeddings()
        with torch.no_grad():
            return emb(self._t(input_ids))

    def new_cache(self, kind: str, *, batch: int, max_length: int):
        from transformers import DynamicCache, EncoderDecoderCache, StaticCache
        cfg = self.model.config
        make = (lambda: StaticCache(config=cfg, max_cache_len=max_length)) if kind == "static" else \
            (lambda: DynamicCache(config=cfg))
        return EncoderDecoderCache(make(), DynamicCache(config=cfg)) if self.seq2seq else make()

    def generate(self, input_ids, *, attention_mask, max_new_tokens: int, use_cache: bool, **extra):
        import torch
        kw = {"input_ids": self._t(input_ids), "attention_mask": self._t(attention_mask), **self._extra(extra)}
        if self.seq2seq:  # the prompt is the decoder's; the source the fixed encoder input
            kw = {"decoder_input_ids": kw["input_ids"], "decoder_attention_mask": kw["attention_mask"],
                  "encoder_outputs": self._encoder_outputs(input_ids.shape[0]),
                  **{k: v for k, v in self._source(input_ids.shape[0]).items() if k == "input_features"}}
        kw = {k: v for k, v in kw.items() if v is not None}  # no mask given: generate makes its own
        with torch.no_grad(), self._kernel(), self.recorder.capture():
            reserved = list(self.arch.extra.get("reserved", ()))  # never generated (an image placeholder)
            out = self.model.generate(**kw, max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                                      do_sample=False, use_cache=use_cache, output_logits=True,
                                      return_dict_in_generate=True, pad_token_id=self.model.config.pad_token_id,
                                      **({"suppress_tokens": reserved} if reserved else {}))
        return out.sequences, torch.stack(out.logits, dim=1)

    def probes(self, all_passes: bool = False):
        passes = self.recorder.passes
        if all_passes:
            return passes
        return passes[-1] if passes else []


def from_config_file(path) -> HFModelAdapter:
    """A tiny model of a user's ``config.json`` (:func:`tiny_from_config`: its architecture and its
    positional parameters, sizes shrunk), named after the file.  Raises
    :class:`~posenc.spec.errors.SpecError` for a file that is not a JSON object, ``ValueError`` naming
    the field for a model type without a tiny model, a value transformers' config class rejects
    (:func:`.config_checks.check_fields`, on the config as written) or a model too large to build
    (:func:`.config_checks.check_memory`)."""
    from pathlib import Path

    from posenc.hf import params_from_hf_config, read_config
    from posenc.spec.errors import SpecError

    from .config_checks import check_fields, check_memory
    try:
        cfg = read_config(path)
    except ValueError as e:  # a SpecError: the file's name is the caller's to say
        raise ValueError(str(e).split(": ", 1)[-1]) from None
    mt = cfg.get("model_type")
    if isinstance(mt, str) and mt in ARCHS:
        check_fields(mt, cfg)
        try:  # the kit's own reading of its positional keys first: transformers' would raise its KeyError
            params_from_hf_config(cfg)
        except SpecError as e:
            raise ValueError(str(e).split(": ", 1)[-1]) from None
    tiny = tiny_from_config(cfg)
    check_memory(tiny["model_type"], ARCHS[tiny["model_type"]].auto, tiny)
    kind, s, ctx = tiny.pop("_posenc_context_shrink", (None, 1, 0))
    a = HFModelAdapter(tiny["model_type"], tiny, name=f"config:{Path(path).name}")
    a.notes = (f"{Path(path).name}: its positional keys as written, the sizes shrunk (2 heads of its head width, "
               f"{(tiny.get('text_config') or tiny).get('num_hidden_layers', tiny.get('n_layer', 2))} layers)"
               + ("; the kit's 1-layer vision tower and image tokens" if "text_config" in tiny else "")
               + (f"; dynamic NTK's context divided by {s} (growth beyond {ctx} tokens; theta' at a length L is the "
                  f"full model's at {s} x L)" if kind == "dynamic" else
                  f"; LongRoPE's contexts divided by {s} (the switch at {ctx + 1} tokens; its factors and "
                  "attention factor unchanged)" if kind else ""))
    return a


__all__ = ["HFModelAdapter", "HFModel", "architectures", "from_config_file"]
