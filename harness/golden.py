"""Golden vectors: generation, storage, loading and checking.

Layout (the kit's: package data of ``posenc.families``; a family outside the kit: its ``golden_dir``)::

    golden/manifest.json     format, spec_version, seed, generator rule, one entry per case (its file,
                             the file's size and sha256: validated and read as posenc.harness.golden_manifest says)
    golden/<case-id>.npz     outputs (float64 / int64), error scales, and the small inputs

A golden folder is new, empty, or holds a golden ``manifest.json``: :func:`regenerate` writes into no
other, removes only the files its previous manifest lists, never writes through a symlink and writes
each file atomically (:func:`posenc.harness.golden_manifest.golden_folder`, ``write_atomic``).

``.npz`` members are plain ``.npy`` arrays, read with ``allow_pickle=False``.  Inputs marked
``generated`` in the manifest are not stored: they are regenerated from the manifest seed by
the stream-stable rule below, and their sha256 is kept in the manifest.

Generation rule ``splitmix64-v1`` (reproducible without Python)::

    key    = FNV-1a 64 of the UTF-8 string "<case-id>/<input-name>"
    state  = seed XOR key
    z_k    = splitmix64 output for counter k (k = 0, 1, ... in C order):
             z = state + (k + 1) * 0x9E3779B97F4A7C15            (mod 2**64)
             z = (z XOR (z >> 30)) * 0xBF58476D1CE4E5B9           (mod 2**64)
             z = (z XOR (z >> 27)) * 0x94D049BB133111EB           (mod 2**64)
             z = z XOR (z >> 31)
    values: offset + scale * ((z >> 56) - 128) / 64   (multiples of 1/64 in [-2, 2) for scale 1)
    ids:    z mod high                                (int64)

sha256 of an array is taken over its little-endian C-order bytes (float64 or int64).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Optional

import numpy as np

from posenc import registry
from posenc.harness import golden_manifest as gm
from posenc.spec import SPEC_VERSION
from posenc.spec.errors import GoldenError, exception_text
from posenc.spec.models import PARAM_MODELS
from posenc.spec.shapes import ShapeError, output_shapes
from posenc.spec.tolerance import bound

from posenc.registry import all_cases
from posenc.registry.cases import Case, Gen

MANIFEST = "manifest.json"
FORMAT = 1
SEED = 20261129
GENERATOR = "splitmix64-v1"
#: The error-scale terms a golden stores, by array-name prefix: the tolerance's dtype term, float32
#: (angle) term and accumulation term (:mod:`posenc.spec.tolerance`).
SCALE_KINDS = ("scale", "angle", "acc")
STORE_LIMIT = 4096  # inputs with more elements than this are regenerated, not stored
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def splitmix64(state: int, n: int) -> np.ndarray:
    """The first ``n`` outputs of splitmix64 from ``state`` (uint64)."""
    with np.errstate(over="ignore"):
        k = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(state) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


#: dtypes whose generated cases draw full-precision float inputs (see :func:`case_inputs`)
FULL_PRECISION_DTYPES = {"float32": np.float32, "float64": np.float64}


def generate(case_id: str, name: str, gen: Gen, seed: int = SEED, full_precision: bool = False) -> np.ndarray:
    """Regenerate input ``name`` of ``case_id`` by rule ``splitmix64-v1`` (module docstring).

    ``full_precision``: values add the low 53 bits of each draw as a fraction of the 1/64 step,
    ``offset + scale * (byte - 128 + frac) / 64``, so they are no longer exact in bf16 or f16
    (the generated cases at float32 / float64: an adapter that rounds its inputs to bf16 fails)."""
    n = int(np.prod(gen.shape))
    z = splitmix64(seed ^ _fnv1a64(f"{case_id}/{name}"), n)
    if gen.kind == "values":
        step = (z >> np.uint64(56)).astype(np.float64) - 128.0
        if full_precision:
            step = step + (z & np.uint64((1 << 53) - 1)).astype(np.float64) / float(1 << 53)
        v = gen.offset + gen.scale * step / 64.0
        return v.reshape(gen.shape)
    if gen.kind == "ids":
        return (z % np.uint64(gen.high)).astype(np.int64).reshape(gen.shape)
    raise ValueError(f"unknown generator kind {gen.kind!r}")


def sha256_array(a: np.ndarray) -> str:
    a = np.asarray(a)
    canon = a.astype("<f8") if np.issubdtype(a.dtype, np.floating) else a.astype("<i8")
    return hashlib.sha256(np.ascontiguousarray(canon).tobytes()).hexdigest()


def case_inputs(case: Case, seed: int = SEED, dtype: Optional[str] = None) -> dict[str, np.ndarray]:
    """All inputs of a case as NumPy arrays (scalars become 0-d int64 arrays).

    ``dtype`` float32 or float64 (a generated case at that dtype): float values at full precision,
    rounded to the dtype (so the reference sees exactly what the adapter receives); otherwise,
    and for every golden, values on the 1/64 grid, exact in every dtype."""
    full = FULL_PRECISION_DTYPES.get(dtype or "")
    out = {}
    for name, v in case.inputs.items():
        if isinstance(v, Gen):
            a = generate(case.id, name, v, seed, full_precision=full is not None)
            out[name] = a.astype(full).astype(np.float64) if full is not None and v.kind == "values" else a
        elif isinstance(v, (int, np.integer)):
            out[name] = np.asarray(v, dtype=np.int64)
        else:
            out[name] = np.asarray(v)
    return out


@dataclass(frozen=True)
class Golden:
    """One loaded golden case: inputs, reference outputs and error scales (all NumPy)."""

    case: Case
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    dtype_scales: dict[str, np.ndarray]
    angle_scales: dict[str, np.ndarray]
    angle_based: bool  # the tolerance's float32 eps floor (angle-based or float32_floor ops)
    #: the accumulation term's scales (only the operations that state one: a LayerNorm's reduction)
    accumulation_scales: dict[str, np.ndarray] = field(default_factory=dict)
    #: the call form (spec ``form_of``) the outputs judged against it came through, None for the operation's own
    #: call: the diagnosis then also runs the form's own mutants (DIV-ROPE-LAYOUT-MISREAD), converted back
    form: Optional[str] = None

    def bound(self, name: str, dtype: str) -> np.ndarray:
        """The allowed |error| of output ``name``'s elements at ``dtype`` (all three terms)."""
        return bound(dtype, self.dtype_scales.get(name, 0.0), self.angle_scales.get(name, 0.0), self.angle_based,
                     self.accumulation_scales.get(name, 0.0))


def scale_terms(scales: dict) -> tuple[dict, dict, dict]:
    """A reference's ``{output: (dtype_scale, angle_scale[, accumulation_scale])}`` split into the
    three terms' mappings (the third only for the outputs that state it)."""
    return ({n: v[0] for n, v in scales.items()}, {n: v[1] for n, v in scales.items()},
            {n: v[2] for n, v in scales.items() if len(v) > 2})


def _compute(case: Case, inputs) -> tuple[dict, dict]:
    """The reference's outputs and error scales; their shapes must be the operation table's."""
    ref = registry.reference_of(case.op)
    outs = ref.fn(case.params, inputs)
    try:
        shapes = output_shapes(registry.operation(case.op), case.params, inputs)
    except ShapeError as e:
        raise GoldenError(f"case {case.id}: the operation table of {case.op}: {e}") from None
    for name, shape in shapes.items():
        got = tuple(np.shape(outs.get(name)))
        if name not in outs or got != shape:
            raise GoldenError(f"case {case.id}: the reference {ref.qualname} gives {name!r} of shape {list(got)}, "
                              f"the operation table of {case.op} says {list(shape)} (spec file or reference wrong)")
    return outs, ref.scales(case.params, inputs)


def computed(case: Case, inputs: dict[str, np.ndarray]) -> Golden:
    """The golden of ``case`` on ``inputs`` (NumPy), the reference's outputs and error scales
    computed now: a generated example, or one call an oracle-free check made.  Raises
    :class:`GoldenError` where the reference's shapes are not the operation table's."""
    outs, scales = _compute(case, inputs)
    outs = {k: np.asarray(v) for k, v in outs.items()}
    ds, an, acc = ({k: np.broadcast_to(np.asarray(v, np.float64), outs[k].shape) for k, v in t.items()}
                   for t in scale_terms(scales))
    return Golden(case, dict(inputs), outs, ds, an, registry.operation(case.op).eps_floor_float32, acc)


def regenerate_hint(case: Case) -> str:
    fam = registry.family_of(case.op)
    return "posenc golden regenerate" + ("" if fam.golden_dir is None else f" --family {fam.name}")


def golden_dir(case: Case) -> Path:
    """Where a case's golden lives: its family's golden directory (the kit's by default)."""
    return registry.family_of(case.op).golden_dir or registry.kit_golden_dir()


def family_cases(family: Optional[str] = None) -> tuple[Path, list[Case]]:
    """The golden folder of ``family`` (default: the kit's) and every case stored there: the
    cases of all the families that share the folder, so one manifest is always written whole."""
    registry.load_modules()
    if family is not None and family not in registry.FAMILIES:
        raise GoldenError(f"unknown family {family!r}; registered: {', '.join(registry.FAMILIES)}")
    directory = (registry.FAMILIES[family].golden_dir if family else None) or registry.kit_golden_dir()
    return directory, [c for c in all_cases() if golden_dir(c).resolve() == directory.resolve()]


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _golden_file(case: Case, seed: int) -> tuple[bytes, dict]:
    """The npz bytes of ``case`` (recomputed with the reference) and its manifest entry."""
    inputs = case_inputs(case, seed)
    outs, scl = _compute(case, inputs)
    arrays: dict[str, np.ndarray] = {}
    in_meta = {}
    for name, a in inputs.items():
        gen = case.inputs[name]
        meta = {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": sha256_array(a)}
        if isinstance(gen, Gen) and a.size > STORE_LIMIT:
            meta["generated"] = gen.describe()
        else:
            arrays[f"input/{name}"] = a
            if isinstance(gen, Gen):
                meta["generated"] = gen.describe()
        in_meta[name] = meta
    out_meta = {}
    for name, a in outs.items():
        arrays[f"output/{name}"] = np.asarray(a)
        out_meta[name] = {"shape": list(np.shape(a)), "dtype": str(np.asarray(a).dtype)}
    for name, terms in scl.items():  # per output: its dtype, angle (and accumulation) scales
        for kind, v in zip(SCALE_KINDS, terms):
            arrays[f"{kind}/{name}"] = np.broadcast_to(v, np.shape(outs[name])).astype(np.float64)
    data = _npz_bytes(arrays)
    return data, {
        "id": case.id, "op": case.op, "clauses": list(case.clauses), "note": case.note,
        "params": {"model": type(case.params).__name__, "values": case.params.model_dump(mode="json")},
        "inputs": in_meta, "outputs": out_meta, "file": f"{case.id}.npz", "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def regenerate(directory: Optional[Path] = None, seed: int = SEED, cases: Optional[list[Case]] = None) -> list[str]:
    """Recompute ``cases`` (default: the kit's families') with the reference; rewrite the npz
    files and the manifest of ``directory`` (default: the kit's golden folder).

    Only into a golden folder (:func:`posenc.harness.golden_manifest.golden_folder`, checked before anything
    is written): one that does not exist yet, is empty, or holds a golden ``manifest.json``; no symlink (or
    anything but a regular file) where a file is written or removed.  Each file is written atomically
    (a temporary file renamed over the old one); afterwards the files the previous manifest listed that no
    case writes now are removed -- and nothing else."""
    directory = Path(directory or registry.kit_golden_dir())
    cases = family_cases()[1] if cases is None else cases
    written = [f"{case.id}.npz" for case in cases]
    previous = gm.golden_folder(directory, written + [MANIFEST], MANIFEST)
    entries = []
    for case in cases:
        data, entry = _golden_file(case, seed)
        gm.write_atomic(directory, entry["file"], data)
        entries.append(entry)
    manifest = {"format": FORMAT, "spec_version": SPEC_VERSION, "seed": seed, "generator": GENERATOR,
                "store_limit": STORE_LIMIT, "cases": entries}
    gm.write_atomic(directory, MANIFEST, (json.dumps(manifest, indent=1, sort_keys=False) + "\n").encode("utf-8"))
    for stale in sorted(previous - set(written) - {MANIFEST}):
        gm.remove_listed(directory, stale)
    return written


def read_manifest(directory: Optional[Path] = None) -> dict:
    """The manifest of ``directory`` (default: the kit's golden folder), bounded in size and validated
    (:mod:`posenc.harness.golden_manifest`; its entries when their cases load); anything wrong with it,
    whatever the exception, is a :class:`GoldenError` naming the file."""
    directory = Path(directory or registry.kit_golden_dir())
    path = directory / MANIFEST
    if not os.path.lexists(path):
        raise GoldenError(f"{path}: golden manifest missing; run `posenc golden regenerate`")
    try:
        m = gm.manifest(path, gm.read_manifest_text(path))
    except GoldenError:
        raise
    except Exception as e:  # noqa: BLE001 - the kit's data, whatever went wrong reading it: a kit error
        raise GoldenError(f"{path}: cannot be read: {type(e).__name__}: {exception_text(e)}") from None
    if m["format"] != FORMAT or m["generator"] != GENERATOR:
        raise GoldenError(f"{path}: format {m['format']}/{m['generator']} is not {FORMAT}/{GENERATOR}")
    if m.get("store_limit") not in (None, STORE_LIMIT):
        raise GoldenError(f"{path}: store_limit {m['store_limit']!r} is not the kit's {STORE_LIMIT} (inputs with more "
                          "elements are regenerated, not stored)")
    if m["spec_version"] != SPEC_VERSION:
        raise GoldenError(f"{path}: spec_version {m['spec_version']} != {SPEC_VERSION}; regenerate the goldens")
    return m


def load(case: Case, directory: Optional[Path] = None, manifest: Optional[dict] = None) -> Golden:
    """Load one case, verifying it against the manifest *and* the case definition.

    Checks: the manifest entry's fields (:class:`posenc.harness.golden_manifest.Entry`); its file inside
    the folder, of the declared size (bounded) and sha256; op, clauses and parameters equal the case's;
    every input equals the case definition's (stored or regenerated; sha256 in the manifest); outputs match
    the manifest's shapes and dtypes; the stored error scales equal the reference's recomputation.  Raises
    :class:`GoldenError` naming the file and what differs -- for any failure at all (a kit error, never the
    adapter's), the case named.
    """
    directory = Path(directory) if directory is not None else golden_dir(case)
    try:
        return _load(case, directory, manifest)
    except GoldenError:
        raise
    except Exception as e:  # noqa: BLE001 - MemoryError, a kit bug ...: the golden's failure, never a clause's
        raise GoldenError(f"{directory / MANIFEST}: the golden of case {case.id!r} cannot be loaded: "
                          f"{type(e).__name__}: {exception_text(e)}") from None


def _load(case: Case, directory: Path, manifest: Optional[dict]) -> Golden:
    try:
        m = manifest if manifest is not None else read_manifest(directory)
    except GoldenError as e:
        raise GoldenError(f"{e} (for this family: `{regenerate_hint(case)}`)") from None
    path, entry, arrays = _read_entry(case, directory, m)
    inputs = _verified_inputs(case, path, entry, arrays, m["seed"])
    outputs = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("output/")}
    meta_out = entry.outputs
    if set(outputs) != set(meta_out):
        raise GoldenError(f"{path}: outputs {sorted(outputs)} != manifest {sorted(meta_out)}")
    for name, a in outputs.items():
        if list(a.shape) != meta_out[name].shape or str(a.dtype) != meta_out[name].dtype:
            raise GoldenError(f"{path}: output {name!r} is {a.dtype}{list(a.shape)}, the manifest says "
                              f"{meta_out[name].dtype}{meta_out[name].shape}")
    ds, an, acc = ({k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(kind + "/")}
                   for kind in SCALE_KINDS)
    g = Golden(case, inputs, outputs, ds, an, registry.operation(case.op).eps_floor_float32, acc)
    _verify_against_reference(case, path, g)
    return _frozen(g)


def _frozen(g: Golden) -> Golden:
    """The golden with read-only mappings of arrays over immutable ``bytes``: cached for the whole
    run, nothing may write into it (such an array cannot be made writeable again)."""
    def freeze(d):
        return MappingProxyType({k: np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype=a.dtype).reshape(a.shape)
                                 for k, a in d.items()})
    return Golden(g.case, freeze(g.inputs), freeze(g.outputs), freeze(g.dtype_scales), freeze(g.angle_scales),
                  g.angle_based, freeze(g.accumulation_scales))


def _verify_against_reference(case: Case, path: Path, g: Golden) -> None:
    """The stored outputs and error scales equal the reference's recomputation from the case
    definition (outputs within a few float64 ulp of the error scale, integers exactly): a golden
    edited together with its manifest is refused, never checked against."""
    outs, scl = _compute(case, g.inputs)
    extra = sorted(set(g.outputs) - set(outs))
    if extra:  # an added output or .compared mask would be checked against, or would mask elements
        raise GoldenError(f"{path}: stored output(s) {', '.join(extra)} that the reference does not give "
                          f"(tampered, or stale: `{regenerate_hint(case)}`)")
    terms = scale_terms(scl)
    for kind, stored, ref_terms in zip(SCALE_KINDS, (g.dtype_scales, g.angle_scales, g.accumulation_scales), terms):
        if set(stored) - set(ref_terms):
            raise GoldenError(f"{path}: stored {kind} of output(s) {', '.join(sorted(set(stored) - set(ref_terms)))} "
                              f"that the reference's error scales do not state (tampered, or stale: "
                              f"`{regenerate_hint(case)}`)")
        for name, ref in ref_terms.items():
            got = stored.get(name)
            ref = np.broadcast_to(ref, np.shape(outs[name]))
            if got is None or got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-12, atol=0):
                raise GoldenError(f"{path}: stored {kind} of output {name!r} differs from the reference's "
                                  f"error scales (tampered, or stale: `{regenerate_hint(case)}`)")
    for name, ref in outs.items():
        got, ref = g.outputs.get(name), np.asarray(ref)
        if got is None or got.shape != ref.shape or got.dtype != ref.dtype:
            raise GoldenError(f"{path}: output {name!r} is {None if got is None else f'{got.dtype}{list(got.shape)}'}, "
                              f"the reference gives {ref.dtype}{list(ref.shape)} (tampered, or stale: "
                              f"`{regenerate_hint(case)}`)")
        if np.issubdtype(ref.dtype, np.floating):
            tol = 4 * np.finfo(np.float64).eps * np.maximum(np.abs(ref), np.broadcast_to(scl[name][0], ref.shape))
            bad = ~((np.abs(got - ref) <= tol) | (np.isnan(got) & np.isnan(ref)) | (got == ref))
        else:
            bad = got != ref
        if bad.any():
            i = tuple(int(v) for v in np.argwhere(bad)[0])
            raise GoldenError(f"{path}: output {name!r} differs from the reference's recomputation at {list(i)} "
                              f"(stored {got[i]!r}, reference {ref[i]!r}; {int(bad.sum())} elements): tampered, or "
                              f"stale: `{regenerate_hint(case)}`")


def _read_entry(case: Case, directory: Path, m: dict) -> tuple[Path, gm.Entry, dict]:
    """The case's manifest entry (validated) and npz arrays: the file confined to the folder, its size
    (before reading) and sha256, op, clauses and params checked."""
    entry = gm.entry(directory / MANIFEST, m, case.id)
    if entry is None:
        raise GoldenError(f"{directory / MANIFEST}: no entry for case {case.id!r}; `{regenerate_hint(case)}`")
    path = gm.confined(directory, entry.file)
    data = gm.read_bounded(path, entry.size, gm.FILE_LIMIT)
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise GoldenError(f"{path}: sha256 does not match the manifest (file tampered with or corrupt)")
    model = PARAM_MODELS.get(entry.params.model)
    if model is None:
        raise GoldenError(f"{path}: params.model {entry.params.model!r} is not a parameter model of the spec (a family "
                          "registers its models with register_family(params_models=...) or "
                          "spec.models.register_params_model)")
    try:
        same = model.model_validate(entry.params.values) == case.params
    except ValueError as e:
        raise GoldenError(f"{path}: params do not validate: {e}") from None
    if not same or entry.op != case.op or tuple(entry.clauses) != case.clauses:
        raise GoldenError(f"{path}: op, clauses or params differ from the case definition; regenerate")
    gm.check_arrays_size(path, data)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 - any unreadable npz is reported with its file
        raise GoldenError(f"{path}: not a readable npz of plain arrays: {e}") from None
    return path, entry, arrays


def _verified_inputs(case: Case, path: Path, entry: gm.Entry, arrays: dict, seed: int) -> dict[str, np.ndarray]:
    """The stored or regenerated inputs, each equal to the case definition's and the manifest's sha256."""
    expected_inputs = case_inputs(case, seed)
    meta_inputs = entry.inputs
    if set(meta_inputs) != set(expected_inputs):
        raise GoldenError(f"{path}: inputs {sorted(meta_inputs)} != the case's {sorted(expected_inputs)}")
    inputs = {}
    for name, meta in meta_inputs.items():
        want = expected_inputs[name]
        gen = case.inputs[name]
        described = json.loads(json.dumps(gen.describe())) if isinstance(gen, Gen) else None
        if meta.generated is not None and meta.generated != described:
            raise GoldenError(f"{path}: input {name!r}: the manifest's 'generated' {meta.generated!r} is not the "
                              f"case's generator {described!r}")
        a = arrays.get(f"input/{name}", want if meta.generated is not None else None)
        if a is None:
            raise GoldenError(f"{path}: input {name!r} neither stored nor generated")
        if meta.shape != list(a.shape) or meta.dtype != str(a.dtype):
            raise GoldenError(f"{path}: input {name!r} is {a.dtype}{list(a.shape)}, the manifest says "
                              f"{meta.dtype}{meta.shape}")
        if not (sha256_array(a) == meta.sha256 == sha256_array(want)):
            raise GoldenError(f"{path}: input {name!r} differs from the case definition or its manifest sha256")
        inputs[name] = a
    return inputs


def check(directory: Optional[Path] = None, cases: Optional[list[Case]] = None) -> list[str]:
    """Tampering (sha256) and staleness (recompute within a few float64 ulp) for every case of
    ``directory`` (default: the kit's golden folder): :func:`load` of each.

    Returns a list of problems, empty when all goldens are fresh.
    """
    directory = Path(directory or registry.kit_golden_dir())
    try:
        m = read_manifest(directory)
    except GoldenError as e:
        return [str(e)]
    ids, problems = gm.entry_problems(directory / MANIFEST, m)  # a malformed entry: one line, never a traceback
    bad = {e["id"] for e in m["cases"] if isinstance(e, dict) and isinstance(e.get("id"), str)} - ids  # named above
    cases = family_cases()[1] if cases is None else cases
    for case in cases:
        if case.id not in ids and case.id not in bad:
            problems.append(f"case {case.id!r} has no golden; regenerate")
    for extra in sorted(ids - {c.id for c in cases}):
        problems.append(f"manifest lists {extra!r}, which no case defines; regenerate")
    for case in cases:
        if case.id not in ids:
            continue
        try:
            load(case, directory, m)  # verifies the outputs against the reference too
        except GoldenError as e:
            problems.append(str(e))
    return problems


def __getattr__(name: str):
    if name == "GOLDEN_DIR":  # the kit's golden folder, found by package (registry.kit_golden_dir)
        return registry.kit_golden_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
