"""The whole import of a ``config.json``: :func:`params_from_hf_config` (every positional component
of the model: learned tables, ALiBi, T5 buckets, sinusoids by their rule table :data:`FAMILY_RULES`;
RoPE, M-RoPE, axial through their importers) and :func:`component_imports` (a composite model's
sub-configs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from posenc.spec.errors import SpecError
from posenc.spec.models import (LookupParams, AlibiParams, BartEmbeddingParams, BertEmbeddingParams, GPT2EmbeddingParams,
                     OPTEmbeddingParams, RobertaEmbeddingParams, SinusoidalParams,
                     T5Params)
from posenc.hf.rope import RopeImport, rope_import
from posenc.hf.mrope import MROPE_RULES, mrope_params_from_hf_config
from posenc.hf.axial import axial_params_from_hf_config, is_axial, table_row
from posenc.hf.tables import _is_number, _msg, _named_errors, read_config


@dataclass(frozen=True)
class FieldRule:
    """One parameter: the config keys that may hold it (first present wins) and the default
    of the model's transformers 5.24 config class when none is present (None: required)."""

    keys: tuple[str, ...]
    default: Any = None


@dataclass(frozen=True)
class FamilyRule:
    """How one non-RoPE ``model_type`` maps onto a spec parameter model (transformers 5.24)."""

    source: str
    model: type
    fields: dict
    fixed: dict = field(default_factory=dict)  # values the model's code hard-codes


#: ``{model_type: {name: FamilyRule}}`` for the non-RoPE families (transformers 5.24).
FAMILY_RULES: dict[str, dict[str, FamilyRule]] = {
    "gpt2": {"embeddings": FamilyRule(
        "models/gpt2/configuration_gpt2.py::GPT2Config", GPT2EmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 50257), "n_positions": FieldRule(("n_positions", "max_position_embeddings"), 1024),
         "n_embd": FieldRule(("n_embd", "hidden_size"), 768)})},
    "bert": {"embeddings": FamilyRule(
        "models/bert/configuration_bert.py::BertConfig", BertEmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 30522), "max_position_embeddings": FieldRule(("max_position_embeddings",), 512),
         "type_vocab_size": FieldRule(("type_vocab_size",), 2), "hidden_size": FieldRule(("hidden_size",), 768),
         "layer_norm_eps": FieldRule(("layer_norm_eps",), 1e-12)})},
    # RobertaConfig's class defaults are BERT's (512, 2, 1e-12); RoBERTa checkpoints set 514, 1, 1e-5
    "roberta": {"embeddings": FamilyRule(
        "models/roberta/configuration_roberta.py::RobertaConfig", RobertaEmbeddingParams,
        {"vocab_size": FieldRule(("vocab_size",), 50265), "max_position_embeddings": FieldRule(("max_position_embeddings",), 512),
         "type_vocab_size": FieldRule(("type_vocab_size",), 2), "hidden_size": FieldRule(("hidden_size",), 768),
         "layer_norm_eps": FieldRule(("layer_norm_eps",), 1e-12), "padding_idx": FieldRule(("pad_token_id",), 1)})},
    # OPTLearnedPositionalEmbedding(max_position_embeddings, hidden_size): rows + 2
    "opt": {"embeddings": FamilyRule(
        "models/opt/modeling_opt.py::OPTLearnedPositionalEmbedding", OPTEmbeddingParams,
        {"max_position_embeddings": FieldRule(("max_position_embeddings",), 2048),
         "hidden_size": FieldRule(("hidden_size",), 768)})},
    "bart": {"embeddings": FamilyRule(
        "models/bart/modeling_bart.py::BartLearnedPositionalEmbedding", BartEmbeddingParams,
        {"max_position_embeddings": FieldRule(("max_position_embeddings",), 1024),
         "hidden_size": FieldRule(("d_model", "hidden_size"), 1024)})},
    "bloom": {"alibi": FamilyRule(
        "models/bloom/modeling_bloom.py::build_alibi_tensor", AlibiParams,
        {"num_heads": FieldRule(("n_head", "num_attention_heads"), 8)}, {"form": "bloom"})},
    "mpt": {"alibi": FamilyRule(
        "models/mpt/modeling_mpt.py::build_mpt_alibi_tensor", AlibiParams,
        {"num_heads": FieldRule(("n_heads", "num_attention_heads"), 16),
         "alibi_bias_max": FieldRule(("attn_config.alibi_bias_max",), 8)}, {"form": "mpt"})},
    "t5": {part: FamilyRule(
        "models/t5/modeling_t5.py::T5Attention._relative_position_bucket", T5Params,
        {"num_buckets": FieldRule(("relative_attention_num_buckets",), 32),
         "max_distance": FieldRule(("relative_attention_max_distance",), 128)}, {"bidirectional": bidi})
        for part, bidi in (("encoder", True), ("decoder", False))},
    "whisper": {"encoder_positions": FamilyRule(
        "models/whisper/modeling_whisper.py::sinusoids", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 384)}, {"layout": "concat", "variant": "whisper"}),
        # the decoder's learned table: WhisperPositionalEmbedding(max_target_positions, d_model), rows = positions
        "decoder_positions": FamilyRule(
        "models/whisper/modeling_whisper.py::WhisperPositionalEmbedding", LookupParams,
        {"num_rows": FieldRule(("max_target_positions",), 448), "dim": FieldRule(("d_model",), 384)})},
    # XGLM's table rows are position + 2 (XGLMSinusoidalPositionalEmbedding.offset), padding_idx + 1 with
    # its pad_token_id 1; since 5.x its positions are arange + the cache length (padding is not read)
    "xglm": {"positions": FamilyRule(
        "models/xglm/modeling_xglm.py::XGLMSinusoidalPositionalEmbedding", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 1024), "padding_idx": FieldRule(("pad_token_id",), 1)},
        {"layout": "concat", "variant": "fairseq"})},
    "m2m_100": {"positions": FamilyRule(
        "models/m2m_100/modeling_m2m_100.py::M2M100SinusoidalPositionalEmbedding", SinusoidalParams,
        {"dim": FieldRule(("d_model",), 1024), "padding_idx": FieldRule(("pad_token_id",), 1)},
        {"layout": "concat", "variant": "fairseq"})},
    # MusicGen's decoder: Musicgen(Melody)SinusoidalPositionalEmbedding(max_position_embeddings, hidden_size),
    # get_embedding's t2t table cos first (cat([cos, sin]), half_dim - 1, a zero column for odd D; base 10000),
    # rows arange(T) + the cache length; the composite configs hold the decoder under "decoder" (their T5 text
    # encoder's buckets are not imported: text_encoder is another model's config)
    **{mt: {part: FamilyRule(
        f"models/{mod}/modeling_{mod}.py::{cls}SinusoidalPositionalEmbedding.get_embedding", SinusoidalParams,
        {"dim": FieldRule((key,), 1024)}, {"layout": "concat", "variant": "t2t", "order": "cos_first"})}
        for mt, mod, cls, part, key in (
            ("musicgen", "musicgen", "Musicgen", "decoder_positions", "decoder.hidden_size"),
            ("musicgen_decoder", "musicgen", "Musicgen", "positions", "hidden_size"),
            ("musicgen_melody", "musicgen_melody", "MusicgenMelody", "decoder_positions", "decoder.hidden_size"),
            ("musicgen_melody_decoder", "musicgen_melody", "MusicgenMelody", "positions", "hidden_size"))},
}


def _lookup(config: dict, dotted: str):
    value: Any = config
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if i and not isinstance(value, dict):
            raise SpecError(f"config.json: {'.'.join(parts[:i])}: expected an object, got {type(value).__name__} {value!r}")
        if part not in value:
            return None
        value = value[part]
    return value


def _typed(value, model, name: str, key: str):
    """``value`` checked against the parameter model's field type (an int is not a bool or a
    string, a float is a finite number): :class:`SpecError` naming ``key``."""
    ann = str(model.model_fields[name].annotation)
    if "bool" in ann and "int" not in ann:
        ok = isinstance(value, bool)
    elif "int" in ann and "float" not in ann:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif "float" in ann:
        ok = _is_number(value)
    else:
        return value
    if not ok:
        raise SpecError(f"config.json: {key}: expected {ann.replace('<class ', '').replace('>', '')}, "
                        f"got {type(value).__name__} {value!r}")
    return value


@_named_errors
def component_imports(config: Union[dict, str, Path]) -> Optional[dict[str, RopeImport]]:
    """``{sub-config attribute: RopeImport}`` of a model whose RoPE lives in several sub-models,
    each its own registered model type reading its own sub-config (the table's ``components``:
    BLT's ``patcher_config``, ``encoder_config``, ``decoder_config``, ``global_config``), or None
    for any other model.  Each sub-config is imported as its own model type (a sub-config the
    file omits takes that class's defaults); the wrapper's own ``rope_parameters`` is read by
    none of them (``posenc config survey`` probes it: ``components_evidence``).  Raises
    :class:`SpecError` naming the sub-config and field."""
    config = read_config(config)
    row = table_row(config)
    if not row or not row.get("components"):
        return None
    # the wrapper's own RoPE keys are read by no module, but transformers' config class still
    # validates them (a malformed one refuses the whole config): validated by the first sub-model's rules
    top = {k: config[k] for k in ("rope_parameters", "rope_scaling", "rope_theta") if config.get(k) is not None}
    if top:
        first = next(iter(row["components"].values()))
        try:
            rope_import({**top, "model_type": first})
        except SpecError as e:
            raise SpecError(f"{e} (the top level of {row['config_class']}: read by none of its sub-models, "
                            f"validated by transformers all the same)") from None
    out = {}
    for attr, sub_type in row["components"].items():
        sub = config.get(attr)
        if sub is None:
            sub = {}
        if not isinstance(sub, dict):
            raise SpecError(f"config.json: {attr}: expected an object (the {sub_type} sub-config), "
                            f"got {type(sub).__name__} {sub!r}"[:240])
        try:
            out[attr] = rope_import({**sub, "model_type": sub_type})
        except SpecError as e:
            raise SpecError(f"config.json: {attr}.{str(e).removeprefix('config.json: ')}") from None
        stated = sub.get("model_type")
        if stated is not None and stated != sub_type:  # transformers builds the slot's own class regardless
            out[attr].provenance["model_type"] = (f"{stated!r} in the config is ignored: {row['config_class']} builds "
                                                  f"{attr} as {sub_type} whatever it says")
    return out


def is_rope_import(config: dict) -> bool:
    """Whether :func:`params_from_hf_config` reads ``config`` through :func:`rope_import` (every
    model type but the M-RoPE and the other families' rules, and those whose RoPE lives in
    several sub-models, :func:`component_imports`)."""
    mt = config.get("model_type")
    if not isinstance(mt, str):  # the import itself names it (model_type: expected a string)
        return True
    return (mt not in MROPE_RULES and mt not in FAMILY_RULES
            and not is_axial(config) and not (table_row(config) or {}).get("components"))


def _rope_import_params(imported: RopeImport) -> dict[str, Any]:
    extra = {} if imported.query_scale is None else {"query_scale": imported.query_scale}
    if imported.nope is not None:
        extra["nope"] = imported.nope
    if set(imported.sets) == {"all_layers"}:
        return {"rope": imported.sets["all_layers"], **extra}
    return {**{f"rope.{lt}": p for lt, p in imported.sets.items()}, **extra}


@_named_errors
def params_from_hf_config(config: Union[dict, str, Path]) -> dict[str, Any]:
    """The spec parameter models a model's ``config.json`` implies, by name.

    RoPE model types (:data:`MODEL_RULES` and every model type of :data:`HF_TABLE_PATH`, through
    :func:`rope_import`) give ``{"rope": RopeParams}`` (``{"rope": None}`` where a config switch
    turns RoPE off on every layer, LAYERS-NO-ROPE), or ``{"rope.<layer_type>": RopeParams or
    None}`` where ``rope_parameters`` holds one set per layer type; GPT-2, BERT, RoBERTa,
    OPT, BART give ``{"embeddings": ...EmbeddingParams}``; BLOOM and MPT ``{"alibi": AlibiParams}``;
    T5 ``{"encoder": T5Params, "decoder": T5Params}`` (bidirectional and causal buckets); Whisper
    ``{"encoder_positions": SinusoidalParams}``; M2M100 (``m2m_100``) ``{"positions": SinusoidalParams}`` (the
    fairseq rule); MusicGen and MusicGen Melody ``{"decoder_positions": SinusoidalParams}`` (their decoders'
    types ``{"positions": ...}``: the t2t table, order cos_first, SIN-ORDER-COS-FIRST); Qwen2-VL, Qwen2.5-VL, Qwen3-VL (:data:`MROPE_RULES`) ``{"mrope": MRopeParams}``;
    the vision encoders with axial RoPE (the table's ``axial`` rows) ``{"axial": AxialRopeParams}``;
    Ministral 3 and Mistral 4 add ``{"query_scale": QueryScaleParams}`` (QSCALE-MISTRAL), Llama 4
    its temperature tuning (QSCALE-LLAMA4, on the NoPE layers); a model whose RoPE lives in
    several sub-models (BLT, :func:`component_imports`) gives each sub-model's keys prefixed with
    its sub-config (``{"patcher_config.rope": RopeParams, ...}``).
    A key the config lacks takes the transformers 5.24 config class default (see
    the rule's source).  Raises :class:`SpecError` naming the model_type or field.
    """
    config = read_config(config)
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise SpecError(f"config.json: model_type: expected a string, got {type(model_type).__name__} {model_type!r}"
                        if model_type is not None else "config.json: model_type: missing (every config.json names its "
                                                       "model type)")
    if model_type in MROPE_RULES:
        return {"mrope": mrope_params_from_hf_config(config)}
    if is_axial(config):
        return {"axial": axial_params_from_hf_config(config)}
    rules = FAMILY_RULES.get(model_type)
    components = component_imports(config)
    if components is not None:
        out: dict[str, Any] = {}
        for attr, imported in components.items():
            for k, v in _rope_import_params(imported).items():
                out[f"{attr}.{k}"] = v
        return out
    if is_rope_import(config):
        return _rope_import_params(rope_import(config))
    out = {}
    for name, rule in rules.items():
        values = dict(rule.fixed)
        for fname, fr in rule.fields.items():
            found, key = next(((v, k) for v, k in ((_lookup(config, k), k) for k in fr.keys) if v is not None),
                              (None, fr.keys[0]))
            if found is not None:
                _typed(found, rule.model, fname, key)
            if found is None and fr.default is None:
                raise SpecError(f"config.json: {fr.keys[0]}: missing, and {model_type} defines no default")
            values[fname] = fr.default if found is None else found
        try:
            out[name] = rule.model(**values)
        except ValidationError as e:
            msgs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {_msg(err)}" for err in e.errors())
            raise SpecError(f"config.json ({model_type}, {name}): {msgs}") from None
    return out
