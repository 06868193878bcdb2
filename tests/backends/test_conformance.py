"""The conformance suite on every first-party backend and on a third-party plugin installed
with pip; plugin discovery and its failure modes."""

from __future__ import annotations

import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest
from conftest import FIRST_PARTY, skip_unless_usable

from smug_opt import Problem, registry, solve
from smug_opt.testing import (
    CheckNotApplicable,
    CheckOutcome,
    ConformanceError,
    ExactOptimum,
    brute_force,
    conformance_checks,
    known_failure,
    run_conformance,
)

CHECKS = list(conformance_checks())


@pytest.mark.parametrize(("check_name", "check"), CHECKS, ids=[name for name, _ in CHECKS])
@pytest.mark.parametrize("backend", [*FIRST_PARTY, "toy-bruteforce"])
def test_conformance(backend: str, check_name: str, check, toy_plugin: str,
                     request: pytest.FixtureRequest) -> None:
    skip_unless_usable(backend)
    reason = known_failure(backend, check_name)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, raises=ConformanceError, strict=True))
    try:
        check(backend)
    except CheckNotApplicable as exc:
        pytest.skip(str(exc))


def test_run_conformance_reports_every_check_in_one_call(toy_plugin: str) -> None:
    report = run_conformance(toy_plugin)
    by_name = {r.check: r for r in report.results}
    assert list(by_name) == [name for name, _ in CHECKS]
    assert report.ok, report.summary()
    assert by_name["check_time_limit"].outcome is CheckOutcome.XFAILED
    assert "50 binaries" in by_name["check_time_limit"].message
    assert by_name["check_relu_network"].outcome is CheckOutcome.SKIPPED
    assert by_name["check_exact_never_rejected"].outcome is CheckOutcome.PASSED
    assert report.solver.startswith("toy brute force")


def test_run_conformance_can_leave_out_the_time_limit(toy_plugin: str) -> None:
    report = run_conformance(toy_plugin, time_limit_check=False)
    outcome = {r.check: r.outcome for r in report.results}["check_time_limit"]
    assert outcome is CheckOutcome.SKIPPED


def test_a_failure_names_backend_and_check(toy_plugin: str) -> None:
    check = dict(CHECKS)["check_infeasible"]
    with pytest.raises(ConformanceError, match=r"^\[toy-crash\] check_infeasible: .*ERROR"):
        check("toy-crash")  # its worker dies on every solve


def test_every_check_states_its_invariant() -> None:
    for name, check in CHECKS:
        assert name.startswith("check_")
        doc = (check.__doc__ or "").strip().splitlines()
        assert doc and doc[0].endswith("."), f"{name}: first docstring line must state the invariant"


def test_expected_answers_agree_with_brute_force() -> None:
    from smug_opt.testing import instances

    for label, (problem, optimum, _) in {**instances.STRICT, **instances.NEAR_TIES}.items():
        assert brute_force(problem).objective == optimum, label
    for label, problem in instances.INFEASIBLE.items():
        assert not brute_force(problem).feasible, label


def test_brute_force_is_exact_where_floats_are_not() -> None:
    # 0.1 + 0.2 rounds to 0.30000000000000004 in floats; the exact sum is smaller
    problem = Problem.from_arrays([[0.1, 0.2]], "<", 0.30000000000000004, objective=[-1, -1])
    result = brute_force(problem)
    assert result.objective == -2
    np.testing.assert_array_equal(result.x, [1.0, 1.0])


def test_brute_force_refuses_what_it_cannot_enumerate() -> None:
    with pytest.raises(ValueError, match="limit is 16 binaries"):
        brute_force(Problem.from_arrays(np.ones((1, 17)), ">=", 1))


# ------------------------------------------------------------------- discovery
def test_broken_plugin_is_reported_without_breaking_others(toy_plugin: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        infos = {info.name: info for info in registry.backend_infos()}
    broken = infos["toy-broken"]
    assert not broken.usable
    assert "ModuleNotFoundError" in (broken.reason or "")
    assert broken.distribution == "smug-opt-toy-backend"
    assert any("toy-broken" in str(w.message) for w in caught if w.category is RuntimeWarning)
    assert infos["toy-bruteforce"].usable and infos["highs"].usable
    assert "toy-bruteforce" in registry.available_backends()
    assert "toy-broken" not in registry.available_backends()


def test_unknown_backend_error_lists_installed_ones(toy_plugin: str) -> None:
    problem = Problem.from_arrays([[1.0]], ">=", 1)
    with pytest.raises(registry.UnknownBackendError, match="'gurobi'.*highs.*toy-bruteforce"):
        solve(problem, "gurobi")


def test_missing_solver_package_names_the_extra(toy_plugin: str) -> None:
    with pytest.raises(registry.BackendUnavailableError,
                       match=r"smug_opt_toy_solver_not_installed.*smug-opt\[toy-solver\]"):
        registry.backend_class("toy-missing-solver")
    info = {i.name: i for i in registry.backend_infos()}["toy-missing-solver"]
    assert not info.usable and "toy-solver" in (info.reason or "")


def test_importing_backends_and_the_suite_loads_no_solver() -> None:
    code = (
        "import sys, smug_opt.testing, smug_opt.export\n"
        "from smug_opt.registry import backend_infos\n"
        "import smug_opt_backends.pulp_backend as p, smug_opt_backends.mip_backend as m\n"
        "p.PulpCbcBackend.solver_version(); m.MipCbcBackend.solver_version()\n"
        "backend_infos()\n"
        "print(sorted(k for k in ('pulp', 'mip', 'highspy', 'z3', 'ortools', 'cbcbox')"
        " if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_continuous_instances_agree_with_exact_optimum() -> None:
    from smug_opt.testing import exact_optimum
    from smug_opt.testing.instances import STRICT_CONTINUOUS, huge_bounds

    for label, (problem, infimum) in STRICT_CONTINUOUS.items():
        assert exact_optimum(problem) == ExactOptimum(Fraction(infimum), attained=False), label
    assert exact_optimum(huge_bounds()).value == Fraction(-1e30) + 2


def test_exact_optimum_of_one_continuous_variable() -> None:
    """Intervals from every row, open where the row is strict; the infimum is attained
    only at a closed end (or when the variable costs nothing)."""
    from smug_opt import ProblemBuilder
    from smug_opt.testing import exact_optimum

    b = ProblemBuilder()
    m = b.add_binaries(2)
    t = b.add_continuous(1, -1.0, 3.0)
    cols = np.concatenate([m, t])
    # m0 + t >= 1 (closed), t > 0.5 - 2 m1 (open), minimise m0 + m1 + t
    b.add_constraints([[1.0, 0.0, 1.0], [0.0, 2.0, 1.0]], cols, [">=", ">"], [1.0, 0.5])
    b.set_objective(cols, [1.0, 1.0, 1.0])
    # m = (1, 1): t > -1.5, t >= 0 -> t = 0 attained, total 2; m = (0, 1): t >= 1 -> 2 attained;
    # m = (1, 0): t > 0.5 -> inf 1.5 open; m = (0, 0): t >= 1 -> 1 attained: optimum 1
    assert exact_optimum(b.build()) == ExactOptimum(Fraction(1), attained=True)
    with pytest.raises(ValueError, match="at most one continuous variable"):
        b2 = ProblemBuilder()
        v = b2.add_continuous(2, 0.0, 1.0)
        b2.add_constraints([[1.0, 1.0]], v, ">", [0.5])
        exact_optimum(b2.build())


# ------------------------------------------------- solvers chosen by what they declare
def test_the_core_finds_its_solvers_by_declared_capabilities(toy_plugin: str) -> None:
    """A plugin that declares a capability is found by it, with no change to the core: the
    toy brute force (exact, strict, no ReLU) answers for exact-and-strict but is not asked
    certification's questions, which need ReLUs too."""
    pytest.importorskip("z3")
    pytest.importorskip("highspy")
    from smug_opt.bounds.lp import lp_solver
    from smug_opt.certify import exact_backend

    assert registry.backend_declaring("a test", "exact", "strict_inequalities").name == "toy-bruteforce"
    certifier = exact_backend()
    assert certifier.name == "z3" and certifier.exact_extras == {"encoding": "exact"}
    assert registry.backend_declaring("LP bounds", "lp").name == "highs"
    assert lp_solver() is not None
    with pytest.raises(registry.BackendUnavailableError,
                       match=r"^a test needs a backend that declares capabilities\.exact and "
                             r"capabilities\.lp; none is registered"):
        registry.backend_declaring("a test", "exact", "lp")
    with pytest.raises(ValueError, match="unknown capabilities \\['exactly'\\]"):
        registry.backend_declaring("a test", "exactly")


@pytest.mark.parametrize("backend", FIRST_PARTY)
def test_a_backend_declares_lp_exactly_when_it_provides_an_lp_solver(backend: str) -> None:
    skip_unless_usable(backend)
    cls = registry.backend_class(backend)
    assert cls.capabilities.lp == (cls.lp_solver() is not None)
