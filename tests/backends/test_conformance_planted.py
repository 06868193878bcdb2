"""The conformance suite catches a careless plugin: each planted mistake in
``tests/scipy_plugin`` fails its named check, which the honest plugin passes
(``test_conformance_scipy_plugin.py`` runs every check on it)."""

from __future__ import annotations

import pytest

from smug_opt.testing import CheckOutcome, ConformanceError, conformance_checks, run_conformance

CHECKS = dict(conformance_checks())

PLANTED = {
    "planted-nonstrict": "check_strict_row_binds_continuous",  # strict > as >= at every level
    "planted-no-time-limit": "check_time_limit",  # time limit never passed to the solver
    "planted-optimal-without-bound": "check_timeout_with_incumbent",  # OPTIMAL on a time-out
    "planted-status-map": "check_unusual_endings",  # unbounded/other ending as INFEASIBLE
}


@pytest.mark.parametrize(("backend", "check_name"), list(PLANTED.items()), ids=list(PLANTED))
def test_each_planted_mistake_fails_its_named_check(backend: str, check_name: str, scipy_plugin: str) -> None:
    with pytest.raises(ConformanceError, match=rf"^\[{backend}\] {check_name}: "):
        CHECKS[check_name](backend)


@pytest.mark.slow
def test_the_honest_plugin_passes_every_check_in_one_call(scipy_plugin: str) -> None:
    report = run_conformance(scipy_plugin)
    assert report.ok, report.summary()
    # every check applies except those needing a capability the plugin does not declare
    # (it is not exact and has no LP solver), which are skipped with that reason, never failed
    not_passed = {r.check: r for r in report.results if r.outcome is not CheckOutcome.PASSED}
    needs = {"check_exact_never_rejected": "exact", "check_lp_solver": "lp"}
    assert set(not_passed) == set(needs), report.summary()
    for check, capability in needs.items():
        assert not_passed[check].outcome is CheckOutcome.SKIPPED, report.summary()
        assert f"capabilities.{capability}" in not_passed[check].message, report.summary()
