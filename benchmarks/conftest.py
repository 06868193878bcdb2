"""Shared inputs of the micro-benchmarks: a paper-scale first-layer problem and its solutions.

Run with ``pytest benchmarks/ --benchmark-only`` (not part of the default test run).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from smug_opt.bench.generators import random_first_layer_problem
from smug_opt.ir import Problem

PAPER_K = 3000


@pytest.fixture(scope="session")
def paper_problem() -> Problem:
    """3,000 strict rows over 3,136 binaries: k = 3000 neurons of a random 224×224×3
    Conv2D(64, 7×7/2) on 4×4 cells, the paper's Inception-v1 setting."""
    return random_first_layer_problem(PAPER_K)


@pytest.fixture(scope="session")
def paper_solutions(paper_problem: Problem) -> dict[str, np.ndarray]:
    """Masks to verify: all cells kept, and (with HiGHS installed) an optimal mask, whose
    tight rows are the ones exact verification has to settle."""
    masks = {"all-cells": np.ones(paper_problem.num_vars)}
    if importlib.util.find_spec("highspy") is not None:
        from smug_opt import solve

        result = solve(paper_problem, "highs", time_limit=60, isolate=False)
        if result.x is not None:
            masks["optimal"] = result.x
    return masks
