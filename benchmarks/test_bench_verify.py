"""Exact verification of a paper-scale first-layer solution (3,000 × 3,136)."""

from __future__ import annotations

import pytest

from smug_opt import verify


@pytest.mark.parametrize("mask", ["all-cells", "optimal"])
def test_verify_paper_scale(benchmark, paper_problem, paper_solutions, mask):
    if mask not in paper_solutions:
        pytest.skip("no optimal mask (HiGHS is not installed)")
    result = benchmark(verify, paper_problem, paper_solutions[mask])
    assert result.ok
