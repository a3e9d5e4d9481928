"""The conformance suite: ``pytest conformance --adapter NAME`` (or ``--model NAME``), and nothing else.

The pytest plugin (:mod:`.plugin`, the ``pytest11`` entry point; its state :mod:`.state`, where verdicts
are booked :mod:`.booking`), the collection from the registry (:mod:`.collect`), the test modules, the
generated test's runtime (:mod:`.generated`), the model test body (:mod:`.model_suite`), the adapter's
worker process (:mod:`.isolation`, :mod:`.worker`, :mod:`.wire`) and the expectation files
(:mod:`.expectations`).  It runs on the harness (:mod:`posenc.harness`) and finds every family through
the registry (:mod:`posenc.registry`): no module here imports or names a family.
"""
