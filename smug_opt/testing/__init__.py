"""The conformance suite every backend must pass, first- or third-party.

The package: :mod:`~smug_opt.testing.brute_force` (exact optima by enumeration),
:mod:`~smug_opt.testing.instances` (the catalogue), :mod:`~smug_opt.testing.checks` (the
``check_*`` functions), :mod:`~smug_opt.testing.run_checks` (outcomes, report, known
failures) and :mod:`~smug_opt.testing.parametrize` (pytest parametrisation).

In the spirit of MathOptInterface's ``MOI.Test`` and scikit-learn's ``check_estimator``:
small ``check_*`` functions, each stating its invariant in its docstring's first line and
naming the backend and the check when it fails. Use it as one call::

    report = run_conformance("my-backend")
    assert report.ok, report.summary()

or as pytest parametrisation, one test id per check::

    from smug_opt.testing import parametrize_with_checks

    @parametrize_with_checks("my-backend")
    def test_my_backend(backend, check): check(backend)

Every solve goes through :func:`smug_opt.solve` (isolated worker, exact verification), and
each result is held to the universal invariants (status vocabulary, verified solution,
``x`` only with a solution, bound <= objective, consistent gap).

Selection by capabilities: strict senses and real coefficients are part of every
:class:`~smug_opt.Problem`, so every backend is checked on them whether it honours them
natively or through a bridge. ReLU constraints are bridged by nobody on a backend's
behalf (a MILP backend lowers them itself with :func:`smug_opt.bridges.to_milp`), so the
ReLU checks run only when ``capabilities.relu`` is declared; the exactness check runs only
when ``capabilities.exact`` is, the LP solver's check only when ``capabilities.lp`` is.

Known failures: a backend class may declare ``known_failures: ClassVar[Mapping[str, str]]``
(check name -> reason). Those checks are expected to fail (xfail); one that passes is
reported as XPASSED, a sign the declaration is stale.
"""

from __future__ import annotations

from smug_opt.testing.brute_force import BruteForceResult, ExactOptimum, brute_force, exact_optimum
from smug_opt.testing.parametrize import parametrize_with_checks
from smug_opt.testing.run_checks import (
    CheckNotApplicable,
    CheckOutcome,
    CheckResult,
    ConformanceError,
    ConformanceReport,
    conformance_checks,
    known_failure,
    run_conformance,
)

__all__ = [
    "BruteForceResult",
    "CheckNotApplicable",
    "CheckOutcome",
    "CheckResult",
    "ConformanceError",
    "ConformanceReport",
    "ExactOptimum",
    "brute_force",
    "conformance_checks",
    "exact_optimum",
    "known_failure",
    "parametrize_with_checks",
    "run_conformance",
]
