"""The coverage rule (issue 9, item 3), over the goldens and a default run's generated cases:
numeric parameter fields at two or more values, one of them not a listed default; enum and bool
fields at every value; every declared branch point on both sides.  The test prints what
exercised each field and branch."""

from __future__ import annotations

import functools


from posenc import families
from posenc.tools import coverage


@functools.lru_cache(maxsize=1)
def _report():
    return coverage.report()


def _assert_no_gaps(rows) -> None:
    """Print what exercised each row; fail listing the rows that are not covered."""
    for r in rows:
        print(r.describe())
    gaps = [r.describe() for r in rows if not r.ok]
    assert not gaps, "\n".join(gaps)


def test_every_parameter_field_is_exercised():
    _assert_no_gaps(_report()[0])


def test_every_branch_point_is_reached_on_both_sides():
    rows = _report()[1]
    _assert_no_gaps(rows)
    assert len(rows) >= 15


def test_a_field_seen_at_its_default_only_is_a_gap():
    """The rule is not vacuous: a case set holding only the default θ is reported."""
    from posenc.registry.cases import Case
    from posenc.spec.models import RopeParams
    c = Case("x", "rope.inv_freq", ("ROPE-INV-FREQ",), RopeParams(head_dim=8))
    rows = coverage.field_coverage([coverage.Exercised("x", c, {})])
    theta = next(r for r in rows if (r.model, r.field) == ("RopeParams", "rope_theta"))
    pairing = next(r for r in rows if (r.model, r.field) == ("RopeParams", "pairing"))
    assert not theta.ok and not pairing.ok and "interleaved" in pairing.missing


def test_every_declared_branch_has_a_predicate():
    assert families.branches()  # raises SpecError naming an undeclared or unregistered branch
