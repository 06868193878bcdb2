"""The batched derivation of single-row groups (``strengthen.batched``) records exactly what
deriving each group alone records: the same cuts, clauses and integer rows in the same
order, the same rows removed, the same counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from smug_opt import Problem
from smug_opt.strengthen import presolve
from smug_opt.strengthen.outcome import Pieces
from tests.random_problems import problems


def _derived(problem, pieces: Pieces, batched: bool):
    work = presolve._Work(problem, pieces)
    if not work.propagate():
        return None
    with pytest.MonkeyPatch.context() as patch:
        if not batched:  # every group through _derive_group, one at a time
            patch.setattr(presolve, "single_row_groups", lambda *args: {})
        work.derive()
    cuts = [(cells.tolist(), coef.tolist(), int(bound)) for cells, coef, bound in work.cuts]
    return cuts, work.removed.tolist(), dict(work.stats), work.fixed.tolist()


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems)
def test_batched_single_rows_derive_what_each_group_alone_derives(problem) -> None:
    if problem.num_relus or not bool(problem.binary.all()):
        return
    for pieces in (Pieces(), Pieces(integer_rows=False), Pieces(fixings=False)):
        assert _derived(problem, pieces, True) == _derived(problem, pieces, False)


def test_single_row_groups_of_several_sizes_are_batched() -> None:
    rng = np.random.default_rng(3)
    A = np.zeros((60, 40))
    for i in range(60):
        cols = rng.choice(40, size=int(rng.integers(2, 10)), replace=False)
        A[i, cols] = rng.normal(size=cols.size)
    point = rng.random(40) < 0.5  # every row holds at this point: feasible
    problem = Problem.from_arrays(A, ">", A @ point - 0.01)
    work = presolve._Work(problem, Pieces())
    assert work.propagate()
    found = presolve.single_row_groups(work.groups, work.rows, work.fixed)
    assert len({work.groups[g].cells.size for g in found}) > 3  # several sizes at once
    assert _derived(problem, Pieces(), True) == _derived(problem, Pieces(), False)
