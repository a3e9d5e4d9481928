"""Deprecated: the helpers checks share are in the check author's façade :mod:`posenc.harness.checks`
(``clauses_of``, ``step``, ``rows``, ``exact_decode_steps``, ``left_pad_rows``, and ``call_adapter``,
``fail``, ... which this module used to import); the test functions built from the registered checks
are :mod:`posenc.conformance.collect`'s.  Kept for one release (spec 0.4.x); importing it warns."""

from __future__ import annotations

import warnings

from posenc.conformance.collect import build_test, check_tests  # noqa: F401 - re-exported
from posenc.harness.checks import *  # noqa: F401,F403 - re-exported
from posenc.harness.checks import clauses_of, exact_decode_steps, left_pad_rows, rows, step  # noqa: F401

warnings.warn("posenc.conformance.checks is deprecated: import clauses_of, step, rows, exact_decode_steps and "
              "left_pad_rows from posenc.harness.checks", DeprecationWarning, stacklevel=2)
