"""Pydantic v2 models of the spec *documents*: what ``spec/<family>.yaml`` is validated against
(:class:`FamilyFile` and its clauses, divergences and operations), from which
``spec/schema.json`` is exported.  Re-exported by :mod:`posenc.spec.models`."""

from __future__ import annotations

import ast
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Clause and divergence IDs: an upper-case family prefix and upper-case words.  Which prefixes a
#: family may use is declared in its file (``id_prefixes``), so a new family needs no edit here.
CLAUSE_ID = r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$"
DIVERGENCE_ID = r"^DIV-[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$"
#: A family name (the spec's: rope, sinusoidal, learned, position_ids, rope_scaling, alibi, t5,
#: mrope, nope; a registered family brings its own).
FAMILY_NAME = r"^[a-z][a-z0-9_]*$"
Family = str

#: Oracle-free properties a clause may declare (checked by the families' registered checks).
INVARIANTS: tuple[str, ...] = (
    "pairing_probe",  # e_0 at position 1 lights index 1 (interleaved) or rotary_dim/2 (half)
    "passthrough_tail",  # dims >= rotary_dim come back bit-identical
    "cache_prefill",  # decoding one token at a time with cache_length == one prefill
    "left_pad",  # a left-padded row equals the unpadded row at its real tokens
    "relative",  # <R(m)q, R(n)k> depends only on m - n
    "pair_norm",  # |y_pair| == attention_factor * |x_pair|, and on average within 3u + 12u / sqrt(n)
    "permutation",  # rope_half(x[P]) == rope_interleaved(x)[P]
    "shift",  # a constant shift of all positions changes nothing that is compared
    "row_range",  # rows >= num_rows or < 0 raise; the last valid row works
    "row_constant",  # softmax over valid keys equals the causal form's (ALiBi forms differ by a row constant)
    "geometric",  # power-of-two head counts: the slopes form a geometric sequence with ratio = first slope
    "text_reduces",  # M-RoPE with t = h = w equals the same implementation's 1-D RoPE at that position
    "identity",  # a NoPE layer returns q and k bit-identical
)
#: An invariant name: one of INVARIANTS, or one a registered family declares for its checks.
Invariant = str
ToleranceClass = Literal["exact", "float"]
Dtype = Literal["float64", "float32", "bfloat16", "float16"]
DTYPES: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")


class _Strict(BaseModel):
    # YAML block scalars end in a newline; an infinite or NaN number is never a parameter (condense_ratio inf
    # condensed every position to 0; rope_theta inf gave inv_freq 0 past pair 0)
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


class Source(_Strict):
    """Where a clause's rule comes from."""

    kind: Literal["paper", "upstream", "config", "derivation"]
    citation: str = Field(description="Paper title or repository, e.g. 'huggingface/transformers'")
    location: str = Field(description="Section, or file::function")
    version: Optional[str] = Field(None, description="Library version or paper revision")
    provenance: Literal["paper", "library-default", "published-config", "derivation"]


VERSION = r"^\d+\.\d+\.\d+$"


class ParameterSpec(_Strict):
    name: str
    type: str
    default: Any = None
    constraints: Optional[str] = None


class ParameterRange(_Strict):
    """The declared domain of one field of a parameter model (``parameters:`` of a family file).

    Generated cases draw from it and the coverage rule counts against it.  ``range``: inclusive
    numeric bounds that real configurations use (not the mathematical domain); ``scale``: draw
    uniformly (``linear``) or log-uniformly (``log``); ``multiple_of``: integers only;
    ``values``: the allowed values of an enum or bool field (every one must be exercised);
    ``default``: the model field's default (``null`` for a required field or one whose default
    is a rule, described in ``description``); ``library_defaults``: values implementations hard-
    code or default to, by ``"library: context"`` — the coverage rule requires a value that is
    none of them; ``length``: for tuple fields, the rule of their length.
    """

    range: Optional[tuple[float, float]] = None
    scale: Literal["linear", "log"] = "linear"
    multiple_of: Optional[int] = Field(None, gt=0)
    values: Optional[list[Any]] = None
    default: Any = None
    library_defaults: dict[str, Any] = {}
    length: Optional[str] = None
    nested: Optional[str] = Field(None, description="a field holding another parameter model (its name)")
    description: str = ""

    @model_validator(mode="after")
    def _check(self) -> "ParameterRange":
        if self.range is not None:
            lo, hi = self.range
            if lo > hi:
                raise ValueError(f"range {list(self.range)}: the lower bound exceeds the upper")
            if self.scale == "log" and lo <= 0:
                raise ValueError(f"range {list(self.range)}: a log scale needs a positive lower bound")
        if self.range is None and self.values is None and self.nested is None:
            raise ValueError("declare a `range`, the allowed `values`, or the `nested` model")
        return self


class TensorSpec(_Strict):
    name: str
    shape: str = Field(description="Symbolic shape, e.g. '[B, H, T, D]'")
    dtype: str = Field(description="'activation' (the requested dtype), 'int64', 'float32+', ...")


class Branch(_Strict):
    """A branch point of a clause's formula (a clamp active or not, a threshold crossed or not,
    a policy): the coverage rule requires cases on both sides.  Its predicate is registered by
    the family (``@posenc.families.branch(clause, name)``)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str


class Clause(_Strict):
    """One normative rule, cited by its stable ``id`` (e.g. ``ROPE-PAIR-HALF``)."""

    id: str = Field(pattern=CLAUSE_ID)
    title: str
    statement: str
    formula: str
    parameters: list[ParameterSpec] = []
    inputs: list[TensorSpec] = []
    outputs: list[TensorSpec] = []
    tolerance: ToleranceClass
    invariants: list[Invariant] = Field([], description="oracle-free checks that apply (registered by the families)")
    sources: list[Source] = Field(min_length=1)
    since: str = Field(pattern=VERSION, description="the spec version in which this ID got its meaning")
    superseded_by: list[str] = Field([], description="IDs that replace this one (with their own since); "
                                     "a superseded ID keeps its old meaning and is no longer checked")
    required: bool = Field(True, description="False for opt-in clauses (e.g. a required pad fill)")
    branches: list[Branch] = Field([], description="branch points of the formula the cases must exercise on both sides")


class Divergence(_Strict):
    """A known wrong behaviour, with a reference mutant that reproduces it."""

    id: str = Field(pattern=DIVERGENCE_ID)
    violates: list[str] = Field(min_length=1)
    description: str
    symptom: str
    evidence: list[str] = Field(min_length=1)
    level: Literal["operation", "model"] = Field(
        "operation", description="operation: an implementation's output is wrong, the mutant is an operation-level "
        "NumPy function (posenc.families.mutant); model: a model's plumbing is wrong (family model, MODEL-*), the "
        "mutant is a rule over a scenario's forward passes (posenc.families.model_mutant)")
    mutant: str = Field(description="Name of the mutant registered by the family (posenc.families.mutant, or "
                        "posenc.families.model_mutant for a model-level divergence)")
    dtypes: list[Dtype] = Field(list(DTYPES), description="the activation dtypes at which the bug is observable "
                                "(a compute-dtype rounding is invisible at float32 and float64)")
    since: str = Field(pattern=VERSION, description="the spec version in which this ID got its meaning")
    superseded_by: list[str] = Field([], description="divergence IDs that replace this one; a superseded "
                                     "divergence keeps its old meaning, is not diagnosed and cannot be expected")


ARG_TOKEN = r"^(params|weights|dtype|device|\*\*inputs|'[a-z_]+'|[a-z_][a-z0-9_]*)$"


class OperationInput(_Strict):
    """One input of an operation as the kit hands it to the adapter.

    ``kind``: ``float`` (a native array in the requested dtype), ``table`` (a cos/sin table: the requested
    dtype, or float32 at bfloat16 / float16 where the adapter's ``table_dtype`` is ``float32``;
    ROPE-TABLE-DTYPE, since 0.5.0), ``int`` (a native int64 array), ``int32`` (a native int32 array:
    the kernels' positions; since 0.5.0), ``scalar`` (a Python int).  ``shape`` is symbolic (``[B, Hq, T, D]``; ``[*R]`` binds
    the whole shape): the symbols it binds may be used by the outputs' shape expressions.
    ``weight``: gathered into the ``weights`` dict argument.  ``repeated``: the golden holds
    ``<name>.0``, ``<name>.1``, ... and the operation is called once per entry, in order, on
    one prepared object (``rope.cos_sin_calls``).
    """

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    kind: Literal["float", "table", "int", "int32", "scalar"]
    shape: Optional[str] = Field(None, description="symbolic shape, e.g. '[B, T]'; None for scalars")
    optional: bool = False
    default: Optional[int] = Field(None, description="the default of the keyword argument (cache_length: 0)")
    weight: bool = False
    repeated: bool = False


class OperationOutput(_Strict):
    """One output: ``kind`` ``float`` (exactly the requested dtype), ``table`` (a cos/sin table: the
    dtype the adapter's ``table_dtype`` gives for the requested one, ROPE-TABLE-DTYPE; compared at the
    requested dtype), ``float32+`` (float32 or float64 whatever the activations; compared at float32), ``int`` (any integer dtype),
    ``scalar`` (a Python number); ``shape`` a Python expression over the inputs' shape symbols,
    the scalar inputs, the inputs' values (``cu_seqlens[-1]``) and the parameters' fields and
    properties (``pair_dim // 2``); ``masked``: the reference also gives ``<name>.compared``,
    the slots the clause specifies."""

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    kind: Literal["float", "table", "float32+", "int", "scalar"]
    shape: str
    masked: bool = False
    repeated: bool = False


class Operation(_Strict):
    """One operation of the adapter contract, as data.

    Calling convention: ``adapter.<method>(*args, **kwargs)``; then, when ``call`` is ``"()"``,
    the returned callable is called with ``call_args`` / ``call_kwargs``, and when ``call`` is a
    name, that method of the returned (prepared) object is.  Argument tokens: an input's name,
    ``params``, ``weights`` (the ``weight`` inputs as a dict), ``dtype``, ``device``, a quoted
    literal (``'decode'``) and, in keyword lists, ``**inputs`` (every input not named
    elsewhere).  An optional input that is absent is passed as ``None``.  ``returns`` names the
    outputs in the order the last call returns them (one name: the value itself).
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
    title: str
    method: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    args: list[str] = Field([], description="positional argument tokens of the adapter method")
    kwargs: list[str] = Field([], description="keyword argument tokens of the adapter method")
    call: Optional[str] = Field(None, pattern=r"^(\(\)|[a-z][a-z0-9_]*)$")
    call_args: list[str] = []
    call_kwargs: list[str] = []
    returns: list[str] = Field([], description="the outputs the last call returns, in order")
    writes: list[str] = Field([], description="inputs the last call writes in place (since 0.5.0): after the call "
                              "each is the output of its name; the kit hands them as views into guarded buffers")
    views: list[str] = Field([], description="float inputs the kit hands as strided views into larger buffers "
                             "(a slice of a wider head, a neighbouring head and token around it; since 0.5.0): read "
                             "as the view's own elements, never written")
    inputs: list[OperationInput] = []
    outputs: list[OperationOutput] = Field(min_length=1)
    clauses: list[str] = Field(min_length=1, description="the clauses this operation serves")
    angle_based: bool = Field(False, description="angles may be float32 at every dtype: eps never below float32's")
    float32_floor: bool = Field(False, description="not angle-based, but float32 arithmetic is allowed at every dtype")
    builds_on: list[str] = Field([], description="the operations whose outputs this one is made from (since 0.5.0): "
                                 "a bug there shows here, so a divergence's mutant with a form there has one here "
                                 "or a registered reason why not")
    error_scales: Optional[str] = Field(
        None, description="the tolerance of its float outputs as formulas (since 0.5.0): the dtype term's scale, "
        "the float32 term's scale and what each allows (the README's tolerance rule); 'exact' for integer outputs")
    form_of: Optional[str] = Field(
        None, description="the operation this one is a call form of (since 0.5.0): the same rule reached through "
        "another calling convention (positions as per-row offsets, a token-major layout, ...); its cases are the "
        "primary's, converted by the family's registered form (posenc.families.call_form), and judged by the "
        "primary's goldens")
    form: Optional[str] = Field(None, pattern=r"^[a-z][a-z0-9_]*$",
                                description="the form's name (row_offsets, token_major, ...); with form_of")

    @model_validator(mode="after")
    def _check(self) -> "Operation":
        import re
        names = {i.name for i in self.inputs}
        outs = {o.name for o in self.outputs}
        for where, toks in (("args", self.args), ("kwargs", self.kwargs), ("call_args", self.call_args),
                            ("call_kwargs", self.call_kwargs)):
            for t in toks:
                if not re.fullmatch(ARG_TOKEN, t):
                    raise ValueError(f"{where}: {t!r} is not an argument token")
                special = t in ("params", "weights", "dtype", "device", "**inputs") or t.startswith("'")
                if not special and t not in names:
                    raise ValueError(f"{where}: {t!r} is neither an input of the operation nor a special token")
                if t == "**inputs" and where not in ("kwargs", "call_kwargs"):
                    raise ValueError(f"{where}: '**inputs' belongs in a keyword list")
        if self.call is None and (self.call_args or self.call_kwargs):
            raise ValueError("call_args / call_kwargs need `call`")
        if (self.form_of is None) != (self.form is None):
            raise ValueError("form_of and form go together: a call form names the operation it is a form of and itself")
        from .shapes import ShapeError, parse
        for where, items in (("inputs", self.inputs), ("outputs", self.outputs)):
            for item in items:
                if item.shape is not None:
                    try:
                        tree = parse(item.shape)
                    except ShapeError as e:
                        raise ValueError(f"{where}.{item.name}.shape: {e}") from None
                    if where == "inputs" and not isinstance(tree, ast.List):
                        raise ValueError(f"inputs.{item.name}.shape: {item.shape!r} is not a list of symbols ([B, T])")
        if len(names) != len(self.inputs) or len(outs) != len(self.outputs):
            raise ValueError("input and output names must be unique")
        if set(self.views) - names or set(self.views) & set(self.writes):
            raise ValueError(f"views {self.views}: each is an input the operation does not write")
        if set(self.writes) - names or set(self.writes) - outs:
            raise ValueError(f"writes {self.writes}: each is an input and an output of the operation")
        if set(self.returns) | set(self.writes) != outs or set(self.returns) & set(self.writes):
            raise ValueError(f"returns {self.returns} and writes {self.writes} must name every output {sorted(outs)} once")
        if len(set(self.returns)) != len(self.returns):
            raise ValueError(f"returns {self.returns} names an output twice")
        return self

    @property
    def family_prefix(self) -> str:
        return self.name.split(".")[0]

    @property
    def float32_outputs(self) -> tuple[str, ...]:
        """Outputs held in float32 or float64 whatever the activation dtype (compared at float32)."""
        return tuple(o.name for o in self.outputs if o.kind == "float32+")

    @property
    def eps_floor_float32(self) -> bool:
        """Whether the tolerance's dtype term uses at least float32's eps."""
        return self.angle_based or self.float32_floor


class FamilyFile(_Strict):
    """The top level of one family's spec file (``spec/<family>.yaml``, or a registered family's)."""

    family: str = Field(pattern=FAMILY_NAME)
    spec_version: str
    description: str
    id_prefixes: list[str] = Field(min_length=1, description="the ID prefixes this family's clauses and divergences use")
    clauses: list[Clause] = Field(min_length=1)
    divergences: list[Divergence] = []
    operations: list[Operation] = Field([], description="the operations of the adapter contract this family defines")
    parameters: dict[str, dict[str, ParameterRange]] = Field(
        {}, description="per parameter model (by class name), the declared domain of each of its fields")
