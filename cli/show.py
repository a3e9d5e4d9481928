"""``posenc spec show ID`` and ``posenc spec list``: a clause, divergence, operation, case or scenario and
what it links to (the one-ID thread: its operations, reference functions, golden cases, test IDs,
divergences and mutants, the site's anchor), and the IDs of every registered family.
"""

from __future__ import annotations

import difflib
import sys


def list_ids(spec, family) -> int:
    from posenc import registry
    if family and family not in spec.families:
        print(f"error: unknown family {family!r}; families: {', '.join(spec.families)}", file=sys.stderr)
        return 2
    order = {name: i for i, name in enumerate(registry.FAMILIES)}
    for fam in sorted(spec.families.values(), key=lambda f: order.get(f.family, len(order))):
        if family and fam.family != family:
            continue
        w = max(len(x) for x in [c.id for c in fam.clauses] + [d.id for d in fam.divergences]
                + [o.name for o in fam.operations]) + 2
        print(f"{fam.family} ({', '.join(fam.id_prefixes)}):")
        for head, rows in (("clauses", [(c.id, c.title + ("" if c.required else " (opt-in)")) for c in fam.clauses]),
                           ("divergences", [(d.id, d.description) for d in fam.divergences]),
                           ("operations", [(o.name, o.title) for o in fam.operations])):
            if rows:
                print(f"  {head}:")
                for ident, text in rows:
                    text = " ".join(text.split())  # a folded YAML block ends in a newline
                    print(f"    {ident:{w}s}{text}" + (" [superseded]" if ident in spec.divergences
                                                       and spec.divergences[ident].superseded_by else ""))
    return 0


def _print_model(data: dict) -> None:
    for key, value in data.items():
        if value in ([], None, ""):
            continue
        if isinstance(value, list):
            print(f"{key}:")
            for v in value:
                print("  - " + (", ".join(f"{k}: {x}" for k, x in v.items() if x is not None and x is not False and x != [])
                                if isinstance(v, dict) else str(v)))
        else:
            print(f"{key}: {str(value).strip()}")


def show(spec, ident: str, url: bool = False, base=None) -> int:
    if "@" in ident:
        return _show_version(*ident.split("@", 1), url=url, base=base)
    items = {**spec.clauses, **spec.divergences}
    key = ident.lower() if "." in ident else ident.upper()  # operations are lower-case, IDs upper-case
    item = items.get(key) or spec.operations.get(key)
    if item is None and _show_case(ident.lower()):
        return 0
    if item is None:
        near = difflib.get_close_matches(key, list(spec.operations) if "." in ident else list(items), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else "; `posenc spec list` shows them all"
        print(f"error: unknown clause, divergence or operation {ident!r}{hint}", file=sys.stderr)
        return 2
    from posenc.spec.versions import snapshot
    from posenc.tools.docs_site import page_url
    # a registered family's IDs are not in the kit's released snapshots: no page on the kit's site
    on_site = key in items and snapshot(spec.version).entry(key) is not None
    link = page_url(key, base=base) if on_site else None
    if url:
        if link is None:
            why = ("is an operation: the site links clauses and divergences" if key not in items else
                   "belongs to a family registered outside the kit: the kit's site has no page for it")
            print(f"error: {ident!r} {why}", file=sys.stderr)
            return 2
        print(link)
        return 0
    data = item.model_dump(mode="json")
    print(f"{data.pop('id', None) or data.pop('name')}  (posenc spec {spec.version})" + (f"  {link}" if link else ""))
    if getattr(item, "superseded_by", None):
        print(f"SUPERSEDED by {', '.join(item.superseded_by)}: kept with its meaning since {item.since}; "
              "no longer checked or diagnosed")
    _print_model(data)
    _show_domains(spec, key)
    _show_links(spec, key)
    return 0


def _show_version(ident: str, version: str, url: bool = False, base=None) -> int:
    """``posenc spec show ID@VERSION``: the entry as that released version has it (its snapshot)."""
    import yaml

    from posenc.spec.versions import resolve, snapshot
    from posenc.tools.docs_site import page_url
    ident = ident.upper()
    entry = snapshot(version).entry(ident)  # SpecError for a version that does not exist
    if entry is None:
        near = difflib.get_close_matches(ident, list(snapshot(version).entries), n=3)
        print(f"error: {ident} does not exist in spec {version}" + (f"; did you mean {', '.join(near)}?" if near else ""),
              file=sys.stderr)
        return 2
    link = page_url(ident, version, base=base)
    if url:
        print(link)
        return 0
    print(f"{ident}  (posenc spec {version})  {link}")
    data = {k: v for k, v in entry.items() if k not in ("id", "kind")}
    print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100).rstrip())
    for code, message, hint in resolve(ident, version).problems:
        print(f"now: {message} ({hint})")
    return 0


def _show_domains(spec, key: str) -> None:
    """The declared domains (range or values, default, library defaults) of the parameters a
    clause names, or of every field of the parameter models an operation's cases use."""
    from posenc import registry as fams
    if key in spec.operations:
        models = {type(c.params).__name__ for c in fams.all_cases() if c.op == key}
        wanted = [(m, f) for m in sorted(models) for f in spec.parameters.get(m, {})]
    elif key in spec.clauses:
        names = {p.name for p in spec.clauses[key].parameters}
        wanted = [(m, f) for m, fields in spec.parameters.items() for f in fields if f in names]
    else:
        return
    if not wanted:
        return
    print("parameter domains:")
    for m, f in wanted:
        r = spec.parameters[m][f]
        dom = (f"values {r.values}" if r.values is not None else
               f"nested {r.nested}" if r.nested else
               f"range [{r.range[0]:g}, {r.range[1]:g}]" + (" (log)" if r.scale == "log" else "")
               + (f", multiple of {r.multiple_of}" if r.multiple_of else ""))
        extra = "".join([f"; default {r.default}" if r.default is not None else "",
                         f"; library defaults {r.library_defaults}" if r.library_defaults else "",
                         f"; length {r.length}" if r.length else "", f"; {r.description}" if r.description else ""])
        print(f"  - {m}.{f}: {dom}{extra}")


def _show_case(case_id: str) -> bool:
    """A golden case by its ID (as failure messages name it): operation, clauses, params, test ID."""
    from posenc import registry
    case = next((c for c in registry.all_cases() if c.id == case_id), None)
    if case is None:
        return False
    print(f"{case.id}  (golden case of operation {case.op}; test_golden[<dtype>-{case.test_id}])")
    print(f"clauses: {', '.join(case.clauses)}")
    print(f"params: {type(case.params).__name__}({case.params.model_dump(exclude_none=True)})")
    print(f"inputs: {', '.join(case.inputs)}")
    if case.note:
        print(f"note: {case.note}")
    return True


def _show_scenario(spec, sc) -> None:
    """A MODEL-* clause's scenario: its test, what it applies to, and the divergences its run is
    diagnosed with (the model-level ones that violate it, and the operation-level position bugs
    with a model-level form that violate the clauses its rule uses)."""
    from posenc import registry as fams
    print(f"scenario: {sc.name} -- test_model[<dtype>-<attention>-{sc.name}@{'+'.join((sc.clause, *sc.implies))}]; "
          f"pytest conformance --model NAME --clause {sc.clause}")
    print(f"applies to: {', '.join(sc.kinds)} models" + (f"; needs {', '.join(sc.needs)}" if sc.needs else ""))
    print(f"position rule uses: {', '.join(sc.implies) or 'none'}")
    clauses = {sc.clause, *sc.implies}
    divs = [d for d in spec.current_divergences.values()
            if clauses & set(d.violates) and (d.level == "model" or d.mutant in fams.model_mutants())]
    print("divergences diagnosed here:" + ("" if divs else " none"))
    for d in divs:
        print(f"  - {d.id}: {d.description}")


def _show_links(spec, key: str) -> None:
    """What the one-ID thread reaches from a clause, divergence or operation: operations and their
    reference functions, golden cases, invariant checks, divergences and mutants."""
    from posenc import registry as fams
    if key in spec.divergences and spec.divergences[key].level == "model":
        d = spec.divergences[key]
        fn = fams.model_mutants().get(d.mutant)
        print("model-level mutant (a rule over a scenario run's facts): "
              + (f"{fn.__module__}.{fn.__qualname__}" if fn else f"{d.mutant} (not registered)"))
        sc = [s for c, s in fams.scenarios().items() if c in d.violates]
        print("scenarios it is diagnosed in: " + (", ".join(f"{s.name} ({s.clause})" for s in sc) or "none")
              + "; planted in transformers models by tests/model_bugs.py")
        return
    if key in fams.scenarios():
        _show_scenario(spec, fams.scenarios()[key])
        return
    if key in spec.divergences:
        d = spec.divergences[key]
        forms = fams.mutants().get(d.mutant, {})
        fn = fams.MUTANT_NAMES.get(d.mutant)
        print(f"mutant function: {fn.__module__}.{fn.__qualname__}" if fn else f"mutant function: {d.mutant} (not registered)")
        print(f"mutant operations: {', '.join(sorted(forms)) or 'none'}")
        cases = [c for c in fams.all_cases() if c.op in forms and set(c.clauses) & set(d.violates)]
        print(f"golden cases of the clauses it violates ({len(cases)}): {', '.join(c.id for c in cases) or 'none'}")
        return
    if key in spec.operations and spec.operations[key].form_of is not None:
        _show_form(spec, fams, spec.operations[key])
        return
    if key in spec.operations:
        ops, clauses = [spec.operations[key]], set(spec.operations[key].clauses)
        cases = [c for c in fams.all_cases() if c.op == key]
        print(f"reference: {fams.reference_of(key).qualname}")
    else:
        ops, clauses = [o for o in spec.operations.values() if key in o.clauses], {key}
        cases = [c for c in fams.all_cases() if key in c.clauses]
        print("operations:")
        for o in ops:
            print(f"  - {o.name}: adapter method {o.method}{'' if o.call is None else f' -> {o.call}'}; "
                  f"reference {fams.reference_of(o.name).qualname}")
    print(f"golden cases ({len(cases)}):")
    for c in cases:
        print(f"  - {c.id} ({c.op}): test_golden[<dtype>-{c.test_id}]")
    gens = [o.name for o in ops if o.name in fams.generators()]
    print("generated cases: " + (", ".join(f"test_generated[<dtype>-{o}]" for o in gens) or "none"))
    invs = {inv for cid in clauses for inv in spec.clauses[cid].invariants}
    checks = [c for c in fams.checks().values()
              if (c.invariant in invs and set(c.handlers) & {o.name for o in ops})
              or (c.select and any(c.select(x) and set(c.clauses(x)) & clauses for x in cases))]
    print("invariant checks:" + ("" if checks else " none"))
    for c in checks:
        print(f"  - test_{c.name} ({c.invariant or 'own selection'}): {', '.join(sorted(set(c.handlers)))}")
    divs = [d for d in spec.divergences.values() if clauses & set(d.violates)]
    print("divergences:" + ("" if divs else " none"))
    for d in divs:
        print(f"  - {d.id} (mutant {d.mutant}): {d.description}")


def _show_form(spec, fams, op) -> None:
    """A call form: what runs through it (the primary's goldens it can express, the primary's generated
    examples and oracle-free checks, shared), and its own divergences."""
    from posenc.conformance.collect import form_params
    print(f"call form {op.form!r} of {op.form_of} (clause ROPE-CALL-FORM): an adapter serves it by listing {op.name} "
          "in call_forms")
    tests = [p.id for p in form_params() if p.values[1] == op.name]
    print(f"golden cases of {op.form_of} put in this form ({len(tests)}):")
    for t in tests:
        print(f"  - test_call_form[<dtype>-{t}]")
    if op.form_of in fams.generators():
        print(f"generated cases: test_generated[<dtype>-{op.form_of}] runs each drawn example through one of the forms "
              "the adapter serves that it can be put in (shared, never multiplied)")
    else:
        print(f"generated cases: none ({op.form_of} has no generator)")
    checks = sorted(c.name for c in fams.checks().values() if op.form_of in c.handlers)
    print("invariant checks: " + (f"{', '.join(f'test_{c}' for c in checks)} of {op.form_of}, the served forms spread "
                                   "over each check's cases" if checks else f"none ({op.form_of} has none)"))
    own = [d for d in spec.divergences.values() if "ROPE-CALL-FORM" in d.violates
           and op.name in fams.mutants().get(d.mutant, {})]
    print("its own divergences:" + ("" if own else " none"))
    for d in own:
        print(f"  - {d.id} (mutant {d.mutant}): {d.description}")
    print(f"and every divergence of {op.form_of}, seen through the form: posenc spec show {op.form_of}")
