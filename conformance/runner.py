"""Run one golden case on an adapter, enforcing the adapter contract, and diagnose failures.

``run_case`` converts the case's inputs to native arrays (floats in the requested dtype,
integers as int64), calls the adapter operation, and checks every output's dtype and
device before converting back to NumPy.  Contract violations raise ``AdapterError`` with a
message naming the operation and the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from posenc.adapters import Adapter, Unsupported
from posenc.reference import mutants, ops
from posenc.reference.ops import call_keys
from posenc.spec import Spec
from posenc.spec.errors import AdapterError
from posenc.spec.tolerance import Comparison, compare

from .golden import Golden



def native_inputs(adapter: Adapter, inputs: dict[str, np.ndarray], dtype: str, device: str) -> dict[str, Any]:
    """Floats become ``dtype`` arrays, integer arrays int64 arrays, 0-d integers Python ints."""
    out: dict[str, Any] = {}
    for name, a in inputs.items():
        a = np.asarray(a)
        if a.ndim == 0 and np.issubdtype(a.dtype, np.integer):
            out[name] = int(a)
        elif np.issubdtype(a.dtype, np.floating):
            out[name] = adapter.from_numpy(a, dtype, device)
        else:
            out[name] = adapter.from_numpy(a.astype(np.int64), "int64", device)
    return out


def _check(adapter: Adapter, op: str, name: str, x, kind: str, dtype: str, device: str) -> np.ndarray:
    try:
        got = adapter.dtype_of(x)
    except Exception as e:  # noqa: BLE001 - report what the adapter returned
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is not a native array ({type(x).__name__}): {e}")
    if kind == "float" and got != dtype:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, requested {dtype} "
                           "(the output dtype must equal the requested dtype)")
    if kind == "float32+" and got not in ("float32", "float64"):
        raise AdapterError(f"{adapter.name}.{op}: {name!r} has dtype {got}; it must be float32 or float64 "
                           "(ROPE-PRECISION for inv_freq, ALIBI-SLOPES for slopes)")
    if kind == "int" and not (got.startswith("int") or got.startswith("uint")):
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} has dtype {got}, expected an integer dtype")
    try:
        dev = str(adapter.device_of(x))
    except Exception as e:  # noqa: BLE001
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} ({type(x).__name__}) has no device: {e}")
    same = dev == device if ":" in device else dev.split(":")[0] == device
    if not same:
        raise AdapterError(f"{adapter.name}.{op}: output {name!r} is on {dev}, requested {device}")
    a = adapter.to_numpy(x)
    if not isinstance(a, np.ndarray):
        raise AdapterError(f"{adapter.name}.{op}: to_numpy returned {type(a).__name__}")
    return a


def call_op(adapter: Adapter, op: str, params, x: dict[str, Any], dtype: str, device: str) -> dict[str, tuple[Any, str]]:
    """Call the adapter operation; returns ``{output: (native, kind)}``."""
    fam = op.split(".")[0]
    if fam == "rope" and op != "rope.apply_with_cos_sin":
        r = adapter.rope(params, dtype=dtype, device=device)
        method = "cos_sin" if op == "rope.cos_sin_calls" else op.split(".")[1]
        if not callable(getattr(r, method, None)):
            raise Unsupported(f"adapter {adapter.name!r}: the prepared rope operation has no {method}()")
        if op == "rope.inv_freq":
            w, a = r.inv_freq()
            return {"inv_freq": (w, "float32+"), "attention_factor": (a, "scalar")}
        if op == "rope.cos_sin":
            c, s = r.cos_sin(x["position_ids"])
            return {"cos": (c, "float"), "sin": (s, "float")}
        if op == "rope.cos_sin_calls":  # a sequence of calls on one prepared operation
            out = {}
            for key in call_keys(x):
                k = key.rsplit(".", 1)[1]
                c, s = r.cos_sin(x[key])
                out[f"cos.{k}"], out[f"sin.{k}"] = (c, "float"), (s, "float")
            return out
        q, k = r.apply(x["q"], x["k"], x["position_ids"])
        return {"q": (q, "float"), "k": (k, "float")}
    if op == "rope.apply_with_cos_sin":
        q, k = adapter.rope_apply_with_cos_sin(x["q"], x["k"], x["cos"], x["sin"], params)
        return {"q": (q, "float"), "k": (k, "float")}
    if op == "sinusoidal.table":
        return {"pe": (adapter.sinusoidal(x["position_ids"], params, dtype=dtype, device=device), "float")}
    if op == "sinusoidal.fairseq_positions":
        return {"positions": (adapter.fairseq_positions(x["input_ids"], params, x["cache_length"]), "int")}
    if op == "sinusoidal.fairseq":
        f = adapter.fairseq_sinusoidal(params, dtype=dtype, device=device)
        return {"pe": (f(x["input_ids"], cache_length=x["cache_length"]), "float")}
    if op == "learned.lookup":
        return {"embeddings": (adapter.lookup(x["table"], x["rows"]), "float")}
    if op == "learned.gpt2":
        f = adapter.gpt2_embeddings(params, {"wte": x["wte"], "wpe": x["wpe"]}, dtype=dtype, device=device)
        return {"embeddings": (f(x["input_ids"], position_ids=x.get("position_ids"),
                                 cache_length=x["cache_length"]), "float")}
    if op in ("learned.bert", "learned.roberta"):  # BERT-style: word + token_type + position, LayerNorm
        names = ("word_embeddings", "position_embeddings", "token_type_embeddings",
                 "layer_norm_weight", "layer_norm_bias")
        make = adapter.bert_embeddings if op == "learned.bert" else adapter.roberta_embeddings
        f = make(params, {n: x[n] for n in names}, dtype=dtype, device=device)
        return {"embeddings": (f(x["input_ids"], token_type_ids=x.get("token_type_ids"),
                                 position_ids=x.get("position_ids"), cache_length=x["cache_length"]), "float")}
    if op == "learned.roberta_positions":
        return {"positions": (adapter.roberta_positions(x["input_ids"], params, x["cache_length"]), "int")}
    if op == "learned.bart_embeddings":
        f = adapter.bart_embeddings(params, {"table": x["table"]}, dtype=dtype, device=device)
        return {"embeddings": (f(x["input_ids"], attention_mask=x.get("attention_mask"),
                                 cache_length=x["cache_length"]), "float")}
    if op == "learned.opt_positions":
        return {"positions": (adapter.opt_positions(x["attention_mask"], x["cache_length"]), "int")}
    if op == "learned.opt_rows":
        return {"rows": (adapter.opt_rows(x["positions"]), "int")}
    if op == "learned.opt_embeddings":
        f = adapter.opt_embeddings(params, {"table": x["table"]}, dtype=dtype, device=device)
        return {"embeddings": (f(x["attention_mask"], cache_length=x["cache_length"]), "float")}
    if fam == "position_ids":
        rule = op.split(".", 1)[1]
        return {"position_ids": (adapter.position_ids(rule, device=device, **x), "int")}
    if op == "alibi.slopes":
        return {"slopes": (adapter.alibi_slopes(params, dtype=dtype, device=device), "float32+")}
    if op == "alibi.bias":
        return {"bias": (adapter.alibi_bias(params, dtype=dtype, device=device, **x), "float")}
    if op == "t5.buckets":
        return {"buckets": (adapter.t5_buckets(x["relative_position"], params), "int")}
    if op == "t5.bias":
        f = adapter.t5_bias(params, {"table": x["table"]}, dtype=dtype, device=device)
        return {"bias": (f(x["query_length"], x["key_length"], cache_length=x["cache_length"]), "float")}
    if fam == "mrope":
        r = adapter.mrope(params, dtype=dtype, device=device)
        if op == "mrope.cos_sin":
            c, s = r.cos_sin(x["position_ids"])
            return {"cos": (c, "float"), "sin": (s, "float")}
        q, k = r.apply(x["q"], x["k"], x["position_ids"])
        return {"q": (q, "float"), "k": (k, "float")}
    if op == "nope.apply":
        q, k = adapter.nope_apply(x["q"], x["k"], x["position_ids"], x["layer_idx"], params)
        return {"q": (q, "float"), "k": (k, "float")}
    if op == "nope.layer_flags":
        return {"use_rope": (adapter.nope_layer_flags(params, device=device), "int")}
    if op == "attention.probs":
        return {"probs": (adapter.attention_probs(x["q"], x["k"], params), "float")}
    raise KeyError(f"unknown operation {op!r}")


def run_case(adapter: Adapter, golden: Golden, dtype: str, device: str,
             inputs: Optional[dict[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
    """Run a case (optionally with other inputs) and return NumPy outputs, contract-checked."""
    case = golden.case
    x = native_inputs(adapter, golden.inputs if inputs is None else inputs, dtype, device)
    raw = call_op(adapter, case.op, case.params, x, dtype, device)
    out = {}
    for name, (val, kind) in raw.items():
        if kind == "scalar":
            if not isinstance(val, (int, float, np.floating, np.integer)):
                raise AdapterError(f"{adapter.name}.{case.op}: {name!r} must be a Python number, got {type(val).__name__}")
            out[name] = np.float64(val)
        else:
            out[name] = _check(adapter, case.op, name, val, kind, dtype, device)
    return out


def compare_outputs(golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Comparison]:
    """Compare every golden output (``*.compared`` masks applied) with ``outputs``."""
    res = []
    for name, ref in golden.outputs.items():
        if name.endswith(".compared"):
            continue
        if name not in outputs:
            res.append(Comparison(False, float("inf"), -1, ref.size, None, None, None, f"{name}: missing from the adapter's outputs"))
            continue
        # inv_freq and ALiBi slopes are float32+ whatever the activations
        dt = "float32" if name in ops.OPS[golden.case.op].float32_outputs else dtype
        res.append(compare(
            name, outputs[name], ref, dtype=dt, dtype_scale=golden.dtype_scales.get(name),
            angle_scale=golden.angle_scales.get(name), angle_based=golden.angle_based,
            compared=golden.outputs.get(f"{name}.compared")))
    return res


@dataclass(frozen=True)
class Match:
    divergence: str
    violates: tuple[str, ...]
    description: str
    ratio: float


def diagnose(spec: Spec, golden: Golden, outputs: dict[str, np.ndarray], dtype: str) -> list[Match]:
    """Known divergences whose mutant reproduces ``outputs`` within tolerance, best first.

    Considers every divergence that violates one of the case's clauses, or any clause of the
    same family, and has a mutant form for the case's operation.
    """
    fams = {c.split("-")[0] for c in golden.case.clauses}
    found = []
    for d in spec.divergences.values():
        if not (set(d.violates) & set(golden.case.clauses) or {v.split("-")[0] for v in d.violates} & fams):
            continue
        try:
            mut = mutants.run(d.mutant, golden.case.op, golden.case.params, golden.inputs)
        except Exception:  # noqa: BLE001 - a mutant that cannot run on this case does not match
            continue
        if mut is None:
            continue
        same = all(np.array_equal(np.asarray(mut[n]), golden.outputs[n]) for n in mut if n in golden.outputs)
        if same:
            continue  # indistinguishable from the reference on this case
        mut = {n: np.asarray(v) for n, v in mut.items()}
        # A mutant may compute where the reference copies (e.g. a rotated tail): widen the
        # scales to the mutant's own magnitudes and to the row's largest angle term.
        ds = {n: np.maximum(v, np.abs(mut[n])) for n, v in golden.dtype_scales.items() if n in mut}
        an = {n: np.maximum(v, v.max(axis=-1, keepdims=True)) if v.ndim else v
              for n, v in golden.angle_scales.items() if n in mut}
        fake = Golden(golden.case, golden.inputs, mut, ds, an, golden.angle_based)
        cmp = compare_outputs(fake, outputs, dtype)
        if all(c.ok for c in cmp):
            found.append(Match(d.id, tuple(d.violates), d.description, max(c.ratio for c in cmp)))
    return sorted(found, key=lambda m: m.ratio)
