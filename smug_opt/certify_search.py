"""The safe search as certification runs it (:mod:`smug_opt.certify`): how many
processes it may use, a search that a later call takes up again where it stopped (its open
nodes kept: a budgeted search that goes on does not solve its first LPs again), and what a
search's proof makes of the solver's claim."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from smug_opt.certified_results import settled
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem
from smug_opt.result import SolveResult
from smug_opt.verification import Verification

if TYPE_CHECKING:
    from smug_opt.safe_search.prove import OptimumSearch
    from smug_opt.safe_search.prove import Proof as SafeSearchProof
    from smug_opt.safe_search.search import Settings

__all__ = ["MAX_SEARCH_WORKERS", "optimum_search", "run_search", "safe_search", "search_result",
           "search_workers"]

MAX_SEARCH_WORKERS = 4
"""At most this many processes share an unbudgeted safe search."""


def search_workers() -> int:
    """The processes an unbudgeted safe search may use: the cores this process may run on,
    at most :data:`MAX_SEARCH_WORKERS` (1 on a single core: the tree is split only where
    two processes can run at once). Only the search's speed depends on it, never what a
    finished search proves."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_SEARCH_WORKERS))


def safe_search(problem: Problem, incumbent: Verification | None, deadline: Deadline,
                settings: Settings | None = None) -> SafeSearchProof | None:
    """:func:`~smug_opt.safe_search.prove.prove_optimum` from ``incumbent`` by ``deadline``
    (problems without ReLUs); None when it did not run."""
    from smug_opt.safe_search.prove import applies, prove_optimum

    if not applies(problem) or deadline.passed(0.05):
        return None
    try:
        return prove_optimum(problem, incumbent, deadline, settings)
    except ImportError:  # no HiGHS here: the exact backend answers alone
        return None


def optimum_search(problem: Problem, incumbent: Verification | None) -> OptimumSearch | None:
    """The safe search from ``incumbent``, to be run (and taken up again) by :func:`run_search`;
    None when it does not apply (ReLUs, no rows) or HiGHS is missing."""
    from smug_opt.safe_search.prove import OptimumSearch, applies

    if not applies(problem):
        return None
    try:
        return OptimumSearch(problem, incumbent)
    except ImportError:  # no HiGHS here: the exact backend answers alone
        return None


def run_search(tree: OptimumSearch | None, deadline: Deadline, settings: Settings) -> SafeSearchProof | None:
    """``tree`` run on (from where it stopped) by ``deadline``; None when it did not run."""
    if tree is None or deadline.passed(0.05):
        return None
    try:
        return tree.run(deadline, settings)
    except ImportError:  # no HiGHS here: the exact backend answers alone
        return None


def search_result(problem: Problem, result: SolveResult, proof: SafeSearchProof,
                  start: float) -> SolveResult:
    """The claim settled by the safe search's ``proof`` (exact), or ``result`` with a note
    saying why the search did not settle it."""
    if not proof.proven:
        return result.with_note(f"the safe search did not settle it ({proof.why}; {proof.summary()})")
    return settled(problem, result, proof.best,
                   f"a branch-and-bound with safe LP bounds ({proof.summary()})", start)
