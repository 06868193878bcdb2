"""Issue 9's wrong claims (R1-R14 and the subnormal/empty-model case) on every backend:
each answer may be weak (FEASIBLE, NO_SOLUTION) but never wrong."""

from __future__ import annotations

import pytest
from conftest import skip_unless_accepts, usable_first_party
from wrong_claims import CASES, Case

from smug_opt import SolveResult, Status, solve, verify


def assert_no_wrong_claim(case: Case, r: SolveResult) -> None:
    what = (case.name, r, r.message)
    assert r.status is not Status.ERROR, what
    if r.x is not None:
        assert verify(case.build(), r.x).ok, what
    if case.optimum is None:
        assert r.status in (Status.INFEASIBLE, Status.NO_SOLUTION), what
        return
    assert r.status is not Status.INFEASIBLE, what
    if r.status is Status.OPTIMAL:
        assert case.attained and r.objective == case.optimum, what
    if r.objective is not None:
        assert r.objective >= case.optimum, what
    if r.bound is not None:
        assert r.bound <= case.optimum, what


def _runs() -> list:
    runs = []
    for backend in usable_first_party():
        for case in CASES:
            runs.append(pytest.param(backend, case, None, id=f"{case.name}-{backend}"))
            if backend == "z3" and case.z3_extras:
                runs.append(pytest.param(backend, case, case.z3_extras, id=f"{case.name}-{backend}-pb"))
    return runs


@pytest.mark.parametrize(("backend", "case", "extras"), _runs())
def test_no_wrong_claim(backend: str, case: Case, extras: dict | None) -> None:
    problem = case.build()
    skip_unless_accepts(backend, problem)
    # certify=False: the backend's own claim, not its certification (subnormal inputs
    # would otherwise be certified by exact enumeration)
    assert_no_wrong_claim(case, solve(problem, backend, time_limit=20, extras=extras, certify=False))


@pytest.mark.parametrize("backend", usable_first_party())
def test_exact_claims_where_the_numbers_allow(backend: str) -> None:
    # the subnormal rows are scaled exactly now, on every backend: a real optimum, no ERROR
    case = {c.name: c for c in CASES}["R13"]
    r = solve(case.build(), backend, time_limit=20)
    assert r.status is Status.OPTIMAL and r.objective == 2.0
