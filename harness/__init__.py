"""The harness: what the suite and the checks run on, below the suite's runtime.

It calls an adapter by the operation table and checks the adapter contract (:mod:`.runner`), holds
the goldens (:mod:`.golden`), compares under the tolerance rule, diagnoses a wrong output by the
registered mutants (:mod:`.diagnosis`) and inference models (:mod:`.inference`), raises the
conformance failure (:mod:`.failure`), explores generated cases (:mod:`.generation`) and drives and
judges whole models (:mod:`.model_run`, :mod:`.model_judge`).  It imports the spec, the reference and
the registry, never the suite (:mod:`posenc.conformance`), a family or an adapter.

Public: :mod:`posenc.harness.checks` (the check author's façade) and :mod:`posenc.harness.generators`
(the generator author's); every other module is the kit's own (docs/architecture.md, "Public API").
"""
