"""Oracle-free checks: every family's registered checks (:mod:`posenc.conformance.checks`),
collected here as ``test_<name>[<dtype>-<case>@<CLAUSES>]``."""

from posenc.conformance.checks import check_tests

globals().update(check_tests())
