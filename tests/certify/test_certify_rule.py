"""The default-certification rule reads the problem's features only: the same problem gives
the same features and the same decision, written and read back or not, whatever the
machine is doing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from random_problems import problems

from smug_opt import Problem, load_problem, save_problem
from smug_opt.certify_rule import (
    DEFAULT_MAX_NONZEROS,
    DEFAULT_MAX_ROWS,
    ProblemFeatures,
    certified_by_default,
    features,
)


def test_the_features_of_a_known_problem() -> None:
    A = np.array([[1.0, 0.5, 0.0], [2.0, 0.0, 3.0]])
    f = features(Problem.from_arrays(A, [">", "<="], [0.5, 4.0]))
    assert f == ProblemFeatures(relus=0, rows=2, nonzeros=4)
    assert certified_by_default(f)


@pytest.mark.parametrize("change, decided", [
    ({}, True), ({"relus": 1}, False), ({"rows": 0}, False),
    ({"nonzeros": DEFAULT_MAX_NONZEROS}, True), ({"nonzeros": DEFAULT_MAX_NONZEROS + 1}, False),
    ({"rows": DEFAULT_MAX_ROWS}, True), ({"rows": DEFAULT_MAX_ROWS + 1}, False)])
def test_the_rule(change: dict, decided: bool) -> None:
    base = dict(relus=0, rows=100, nonzeros=1787)
    assert certified_by_default(ProblemFeatures(**{**base, **change})) is decided


@settings(max_examples=30, deadline=None)
@given(problem=problems)
def test_the_decision_survives_a_round_trip(tmp_path_factory: pytest.TempPathFactory,
                                            problem: Problem) -> None:
    path = tmp_path_factory.mktemp("rule") / "p.smug"
    save_problem(problem, path)
    again = load_problem(path)
    assert features(again) == features(problem)
    assert certified_by_default(features(again)) is certified_by_default(features(problem))
