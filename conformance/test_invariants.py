"""Oracle-free checks: every family's registered checks (:func:`posenc.registry.check`),
collected here as ``test_<name>[<dtype>-<case>@<CLAUSES>]`` (:mod:`posenc.conformance.collect`)."""

from posenc.conformance.collect import check_tests

globals().update(check_tests())
