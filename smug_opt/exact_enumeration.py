"""The exact optimum of a small problem decided by its binaries, by enumerating every
binary assignment: one of the two exact methods certification compares
(:mod:`smug_opt.certify`)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from smug_opt.deadline import Deadline
from smug_opt.exact import dot_error_bound
from smug_opt.ir import Problem
from smug_opt.verification import Verification, decide_rows, verify

__all__ = ["ENUMERATION_BINARIES", "ENUMERATION_RELU_BINARIES", "best_point", "enumerable",
           "enumerate_optimum"]

ENUMERATION_BINARIES = 14
"""Problems of binaries only, with at most this many, are settled by exact enumeration."""

ENUMERATION_RELU_BINARIES = 8
"""The same for problems with ReLUs (each assignment is verified on its own)."""


def enumerable(problem: Problem) -> bool:
    """Whether certification settles ``problem`` by enumeration: decided by its binaries,
    and at most :data:`ENUMERATION_BINARIES` of them (:data:`ENUMERATION_RELU_BINARIES`
    with ReLUs)."""
    n = int(problem.binary.sum())
    limit = ENUMERATION_RELU_BINARIES if problem.num_relus else ENUMERATION_BINARIES
    return problem.determined_by_binaries and n <= limit


def enumerate_optimum(problem: Problem, deadline: Deadline | None = None) -> Verification | None:
    """The exact optimum over every binary assignment (None: infeasible), by
    :func:`best_point` over all of them. Raises TimeoutError past ``deadline``."""
    binary = np.flatnonzero(problem.binary)
    count = 1 << binary.size
    X = np.zeros((count, problem.num_vars))
    X[:, binary] = (np.arange(count)[:, None] >> np.arange(binary.size)) & 1
    return best_point(problem, X, deadline=deadline)


def best_point(problem: Problem, X: np.ndarray, *, below: Fraction | None = None,
               deadline: Deadline | None = None) -> Verification | None:
    """The point among ``X``'s rows with the least exact objective (below ``below`` when
    given) that verifies, or None. Without ReLUs, rows are decided by
    :func:`~smug_opt.verification.decide_rows` and the feasible points verified in order of
    their float objective, stopping once it exceeds the best (or ``below``) by more than
    twice its rigorous error bound. With ReLUs part of the objective sits on their outputs,
    which only verification computes (exactly): every point is verified. Raises
    TimeoutError past ``deadline``."""
    if problem.num_relus:
        order = list(range(len(X)))
        approx = np.full(len(X), -math.inf)  # unknown: never stop early
    else:
        maybe = decide_rows(problem, X).holds.all(axis=1)
        approx = X @ problem.objective
        order = np.flatnonzero(maybe)[np.argsort(approx[maybe], kind="stable")].tolist()
    slack = 2 * float(dot_error_bound(problem.num_vars, float(np.abs(problem.objective).sum())))
    best: Verification | None = None
    best_approx = math.inf if below is None else float(below)
    for done, k in enumerate(order):
        if approx[k] > best_approx + slack:
            break
        if deadline is not None and done % 256 == 255 and deadline.passed():
            raise TimeoutError
        v = verify(problem, X[k])
        if v.ok and (best is None or v.objective < best.objective) and (below is None or v.objective < below):
            best, best_approx = v, float(approx[k])
    return best
