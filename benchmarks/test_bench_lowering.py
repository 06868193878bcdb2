"""Lowering a paper-scale first-layer problem to a MILP (row scaling, strict margins)."""

from __future__ import annotations

import pytest

from smug_opt.bridges import to_milp


@pytest.mark.parametrize("level", [0, 2])
def test_to_milp_paper_scale(benchmark, paper_problem, level):
    form = benchmark(to_milp, paper_problem, level)
    assert form.num_rows == paper_problem.num_rows
    assert form.num_cols == paper_problem.num_vars
