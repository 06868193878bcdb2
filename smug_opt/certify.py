"""Certification: turn a floating-point solver's OPTIMAL or INFEASIBLE into an exact proof.

``solve(..., certify=True)`` hands its result here with what is left of the time limit.
"Exact" means exact: a certified objective is the exact optimum, attained by the returned
(verified) solution, and nothing below it exists; no tolerance enters an exact claim.

* **Small binary-decided problems** (at most :data:`ENUMERATION_BINARIES` binaries,
  :data:`ENUMERATION_RELU_BINARIES` with ReLUs) are settled *differentially*: exact
  enumeration of every binary assignment finds the optimum (ReLU outputs, and so their
  share of the objective, recomputed exactly for each assignment), and the exact backend
  (:func:`exact_backend`; z3's exact encoding where z3 is installed) must confirm it ("no
  solution has objective < v", or "no solution at all"). The claim is exact only when
  both agree; a disagreement is reported and nothing is claimed.
* Otherwise, for a claim with a solution, the **safe LP bound** is tried first (cheap):
  :func:`~smug_opt.safe_lp_bound.strengthened_safe_lp_bound`, rigorous whatever the LP
  solver's accuracy; above ``v - 1`` for an integral objective (at least ``v`` otherwise)
  it proves the incumbent optimal. A bound above a verified solution claims nothing.
* Otherwise (no ReLUs) the **safe search** (:mod:`smug_opt.safe_search`): a branch-and-bound
  whose every pruning is a safe LP bound or a safely evaluated Farkas ray, with reduced-cost
  fixing; it finds the exact optimum (or proves infeasibility) from the incumbent on,
  within :data:`SEARCH_LPS` LPs when an exact backend can take over. Past them, a search
  whose lowest open bound is within :data:`CLOSE_GAP` of pruning (integral objective) goes
  on from its open nodes (:mod:`smug_opt.certify_search`), split among :func:`search_workers`
  processes, until the deadline (the exact backend gets what it leaves); any other gets
  :data:`RESIDUAL_SHARE` of the time left for the exact backend first, then the search goes
  on without a budget (on every core; from its open nodes unless the exact backend found a
  better solution).
* Otherwise the **exact backend** (its own isolated worker, like any solve) answers the
  residual question for the incumbent's exact objective ``v``: "is there a solution with
  ``c·x < v``" (``v`` written exactly, as a sum of float64 terms); for INFEASIBLE, "is
  there any solution". "No" (an exact unsat) proves the claim. A solution found is
  verified and becomes the incumbent; with a non-integral objective the exact backend
  then minimises below it (continuous variables could otherwise improve forever), and its
  minimum is certified by the same question.
* When these do not finish in time (or no exact backend is installed) the claim is
  **downgraded**: OPTIMAL becomes FEASIBLE and INFEASIBLE becomes NO_SOLUTION, with a
  message saying why.
"""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

from smug_opt.backend import Status
from smug_opt.certified_results import corrected, downgraded, finished, settled
from smug_opt.certify_search import (
    MAX_SEARCH_WORKERS,
    optimum_search,
    run_search,
    safe_search,
    search_result,
    search_workers,
)
from smug_opt.deadline import Deadline
from smug_opt.exact_enumeration import (
    ENUMERATION_BINARIES,
    ENUMERATION_RELU_BINARIES,
    enumerable,
    enumerate_optimum,
)
from smug_opt.exact_questions import (
    EXACT_CAPABILITIES,
    ExactQuestions,
    exact_backend,
    exact_options,
    objective_below,
)
from smug_opt.ir import Problem
from smug_opt.result import Proof, SolveResult
from smug_opt.step import Step
from smug_opt.verification import Verification, verify

if TYPE_CHECKING:
    from smug_opt.safe_search.prove import OptimumSearch
    from smug_opt.safe_search.prove import Proof as SafeSearchProof
    from smug_opt.safe_search.search import Settings

__all__ = [
    "ALONE_LPS", "CLOSE_GAP", "DEFAULT_BACKSTOP_SECONDS", "DEFAULT_INFEASIBLE_LPS", "ENUMERATION_BINARIES",
    "ENUMERATION_RELU_BINARIES", "EXACT_CAPABILITIES", "LP_SHARE", "MAX_SEARCH_WORKERS",
    "RESIDUAL_SHARE", "SEARCH_LPS", "certify", "certify_within_budget", "exact_backend",
    "exact_options", "objective_below", "search_workers", "worth_certifying",
]

LP_SHARE = 0.25
"""The share of the time left that the safe LP bound, tried first, may take."""

LP_SECONDS = 10.0
"""Its time without a time limit."""

SEARCH_LPS = 1500
"""``certify=True``: the LPs the safe search may solve before the exact backend takes the
residual question (the search alone, without one, has no limit but the deadline). Measured
on every bench suite (benchmarks/certify/certified_all_suites.md): three claims need 1,061-1,252
LPs of the search (mlp-d1-c1-k16-g0.5, synthetic n100-m50-t0.8, paper-scale k1000-s1; 9-20 s),
where z3 settled one and timed out on two; the searches z3 settles after it (mnist-first-layer
cnn-d1-c2-k500-g0.0, cnn-d2-c1-k500-g0.0: open bounds still 6-10 below the optimum after
9,000-12,000 LPs) lose the extra 500 LPs (~3-5 s)."""

RESIDUAL_SHARE = 0.5
"""The share of the time left that the exact backend gets after the safe search reached
:data:`SEARCH_LPS`; when it does not settle the claim the search resumes without a budget
(mlp-d1-c1-k16-g0.5: 819 nodes for the search, beyond z3 in 55 s)."""

CLOSE_GAP = Fraction(4)
"""A search stopped at :data:`SEARCH_LPS` whose lowest open bound is at most this far below
what prunes goes on (with :func:`search_workers` processes) before the exact backend is
asked. Measured after 1,500 LPs (benchmarks/certify/close_gap.md): 3.48 below on the
784-binary cnn-d0-c1-k100-g0.5 (the search closes it; z3 does not in 60 s), 0.15 on
cnn-d0-c1-k100-g0.9 (closed by the search with HiGHS's cuts at its root); 4.55 and 5.72
on cnn-d2-c1-k500-g0.0 and cnn-d1-c2-k500-g0.0, which z3 settles and the search does not."""

ALONE_LPS = 500
"""A search that goes on past its budget first runs this many LPs more in this process
before it is split among :func:`search_workers` processes: the workers' start costs ~1.3
CPU s each, what ~500 first-layer LPs cost, and most searches near their end close sooner
(cnn-d0-c1-k100-g0.9: 82 LPs more; 2.65 CPU s and 6.1 s of wall time with two workers,
0.13 and 0.39 s in this process, at load 8; benchmarks/certify/certified_all_suites.md)."""

_ENUMERATION = "exact enumeration of every binary assignment"


DEFAULT_INFEASIBLE_LPS = 128
"""The default certification of an INFEASIBLE claim: the LPs the safe search may solve (a
work budget, so whether a claim is certified never depends on the machine's load)."""

DEFAULT_BACKSTOP_SECONDS = 10.0
"""A backstop on the default certification's wall time (besides the solve's deadline) for an
LP far slower than its size suggests; reached, it leaves the claim as it was and says so."""


def worth_certifying(problem: Problem) -> bool:
    """Whether ``solve``'s default (``certify=None``) tries to certify a floating-point
    claim about ``problem``: :func:`smug_opt.certify_rule.certified_by_default` on its
    features (where one safe LP bound costs under a tenth of the solve, measured)."""
    from smug_opt.certify_rule import certified_by_default, features

    return certified_by_default(features(problem))


def certify_within_budget(problem: Problem, result: SolveResult, deadline: Deadline) -> SolveResult:
    """The default certification (by ``deadline``, and :data:`DEFAULT_BACKSTOP_SECONDS` at
    most): of an OPTIMAL claim, one LP, the safe LP bound of the problem as stated (no
    strengthening, no search); of an INFEASIBLE one, the safe search within
    :data:`DEFAULT_INFEASIBLE_LPS` LPs. A claim they do not settle keeps its
    ``proof: solver`` (only an explicit ``certify=True`` downgrades)."""
    from smug_opt.safe_lp_bound import safe_lp_bound

    if result.proof == "exact":
        return result
    start = time.monotonic()
    budget = deadline.capped(DEFAULT_BACKSTOP_SECONDS)
    seconds = budget.seconds_left(0.0)
    if seconds is None or seconds <= 0.01:
        return result
    if result.status is Status.INFEASIBLE:
        from smug_opt.safe_search.search import Settings

        proof = safe_search(problem, None, budget, Settings(max_lps=DEFAULT_INFEASIBLE_LPS))
        if proof is not None and proof.proven:
            return search_result(problem, result, proof, start)
        return finished(result, note="", start=start)
    if result.status is not Status.OPTIMAL or result.x is None or result.objective is None:
        return result
    try:
        bound = safe_lp_bound(problem, seconds=seconds)
    except (ImportError, ValueError):  # no LP solver here
        return result
    room = 1e-9 * (1.0 + abs(result.objective))  # for the float objective's rounding: a filter
    if bound is None or not _proves_optimal(problem, bound + room, Fraction(result.objective)):
        return finished(result, note="", start=start)
    incumbent = verify(problem, result.x)  # exactly, only where the bound may prove it (most do not)
    if not incumbent.ok or not _proves_optimal(problem, bound, incumbent.objective):
        return finished(result, note="", start=start)
    if Fraction(bound) > incumbent.objective:  # a rigorous bound above a verified solution: claim nothing
        return finished(result, note=f"the safe LP bound {bound!r} exceeds a verified solution's "
                                     f"objective {float(incumbent.objective)!r}: not certified", start=start)
    return settled(problem, result, incumbent, f"the safe LP bound {bound!r} (Neumaier-Shcherbina "
                                               f"on the LP relaxation's duals)", start)


def certify(problem: Problem, result: SolveResult, *, ask: Step, deadline: Deadline) -> SolveResult:
    """``result`` with its claim proven exactly, corrected, or downgraded (see module doc)
    by ``deadline``. Results whose claim is already exact, or that claim nothing provable,
    pass through. ``ask`` answers the exact questions (a solve step built with
    :func:`exact_options`, each question in its own worker)."""
    if result.status is Status.ERROR and enumerable(problem):
        return _answered_after_error(problem, result, ExactQuestions(problem, ask, deadline), deadline)
    if result.proof == "exact" or not (
            result.status in (Status.OPTIMAL, Status.INFEASIBLE)
            or (result.status is Status.FEASIBLE and result.x is not None)):
        return result
    start = time.monotonic()
    if enumerable(problem):
        exact = ExactQuestions(problem, ask, deadline)
        try:
            enumerated = enumerate_optimum(problem, deadline)
        except TimeoutError:
            return downgraded(result, "exact enumeration did not finish within the time limit", start)
        return _cross_checked(problem, result, enumerated, exact, start)
    incumbent = None if result.x is None else verify(problem, result.x)
    if incumbent is not None:
        settled = _by_safe_lp_bound(problem, result, incumbent, deadline, start)
        if settled is not None:
            return settled
    # the exact backend is looked up only now, when it may be asked (the registry loads the
    # backends' entry points: 0.02-0.03 CPU s after a HiGHS solve in a fresh process)
    exact = ExactQuestions(problem, ask, deadline)
    from smug_opt.safe_search.search import Settings

    # a search past its budget is a long one: HiGHS's verified cuts at its root, every core,
    # depth first (cheaper LPs; its open bound, read only after a budget, matters no more)
    unbudgeted = Settings(highs_cuts_after=0, workers=search_workers(), depth_first=True)
    known = incumbent if incumbent and incumbent.ok else None
    tree = optimum_search(problem, known)
    budgeted = run_search(tree, deadline, Settings(max_lps=SEARCH_LPS) if exact.available()
                    else Settings(workers=search_workers(), depth_first=True))
    searched = result if budgeted is None else search_result(problem, result, budgeted, start)
    if searched.proof == "exact":
        return searched
    if not exact.available():
        return downgraded(searched, exact.missing(), start)
    if budgeted is None:
        return _Residual(problem, result, incumbent, exact, start).run()
    if known is not None and _close(problem, known, budgeted):
        # the search's open bound nearly prunes: it goes on from its open nodes (every core),
        # the exact backend after it
        again = _go_on(tree, deadline, unbudgeted, budgeted.lps)
        if again is not None and again.proven:
            return search_result(problem, result, again, start)
        searched = searched if again is None else search_result(problem, result, again, start)
        return _Residual(problem, searched, incumbent, exact, start).run()
    # the search stopped at its LP budget far from closing: the exact backend gets a share
    # of what is left, then the search the rest, without a budget: from its open nodes when
    # the best solution known is still the incumbent, else afresh from the better one
    shared = ExactQuestions(problem, ask, deadline.share(RESIDUAL_SHARE))
    answered = _Residual(problem, searched, incumbent, shared, start).run()
    if answered.proof == "exact" or deadline.passed(0.05):
        return answered
    found = None if answered.x is None else verify(problem, answered.x)
    best = found if found is not None and found.ok else None
    same = (best.objective == known.objective) if best is not None and known is not None else best is known
    resumed = (_go_on(tree, deadline, unbudgeted, budgeted.lps) if same
               else _go_on(optimum_search(problem, best), deadline, unbudgeted, 0))
    if resumed is None or not resumed.proven:
        return answered
    return search_result(problem, result, resumed, start)


# ------------------------------------------------------------- the safe LP bound
def _by_safe_lp_bound(problem: Problem, result: SolveResult, incumbent: Verification,
                      deadline: Deadline, start: float) -> SolveResult | None:
    """The incumbent proven optimal by
    :func:`~smug_opt.safe_lp_bound.strengthened_safe_lp_bound` (above
    ``v - 1`` for an integral objective, else at least ``v``), or None when it is not.
    It may take :data:`LP_SHARE` of the time left."""
    from smug_opt.safe_lp_bound import strengthened_safe_lp_bound

    lp_deadline = Deadline.after(LP_SECONDS) if deadline.at is None else deadline.share(LP_SHARE)
    if lp_deadline.passed(0.05):
        return None
    try:
        bound = strengthened_safe_lp_bound(problem, deadline=lp_deadline)
    except (ImportError, ValueError):  # no LP solver here: the exact backend answers alone
        return None
    if bound is None:
        return None
    v = incumbent.objective
    if Fraction(bound) > v:  # a rigorous bound above a verified solution: never trust either
        return downgraded(result, f"the safe LP bound {bound!r} exceeds a verified solution's "
                                  f"objective {float(v)!r}", start)
    if not _proves_optimal(problem, bound, v):
        return None
    return settled(problem, result, incumbent, f"the safe LP bound {bound!r} (Neumaier-Shcherbina "
                                               f"on the strengthened LP relaxation's duals)", start)


def _proves_optimal(problem: Problem, bound: float, v: Fraction) -> bool:
    """Whether the rigorous lower bound ``bound`` proves a solution of objective ``v``
    optimal: above ``v - 1`` for an integral objective, else at least ``v``."""
    return bound > v - 1 if problem.integral_objective else Fraction(bound) >= v


# -------------------------------------------------------------- the safe search
def _go_on(tree: OptimumSearch | None, deadline: Deadline, settings: Settings, lps: int
           ) -> SafeSearchProof | None:
    """``tree`` (``lps`` LPs solved so far) run on with ``settings`` (no budget): first in
    this process for :data:`ALONE_LPS` more LPs, then, when it has not ended, split among
    ``settings.workers`` processes from where it stopped."""
    if settings.workers == 1 or tree is None:
        return run_search(tree, deadline, settings)
    alone = run_search(tree, deadline, replace(settings, workers=1, max_lps=lps + ALONE_LPS))
    if alone is None or alone.proven or tree.finished is not None:
        return alone
    return run_search(tree, deadline, settings) or alone


def _close(problem: Problem, incumbent: Verification, proof: SafeSearchProof) -> bool:
    """Whether the budgeted search's lowest open bound is within :data:`CLOSE_GAP` of what
    prunes (``v - 1``; integral objectives only): a search that near its end goes on
    before the exact backend is asked."""
    if proof.bound is None or not problem.integral_objective:
        return False
    return Fraction(proof.bound) >= incumbent.objective - 1 - CLOSE_GAP


def _answered_after_error(problem: Problem, result: SolveResult, exact: ExactQuestions,
                          deadline: Deadline) -> SolveResult:
    """A solver that failed on a problem small enough to enumerate (a CBC that refuses a
    coefficient of 1e22, say): the two exact methods answer instead; the solver's ERROR
    stands unless they agree."""
    start = time.monotonic()
    try:
        enumerated = enumerate_optimum(problem, deadline)
    except TimeoutError:
        return result
    answered = _cross_checked(problem, result, enumerated, exact, start)
    return answered if answered.proof == Proof.EXACT else result


def _cross_checked(problem: Problem, result: SolveResult, enumerated: Verification | None,
                   exact: ExactQuestions, start: float) -> SolveResult:
    """Enumeration's answer, exact only when the exact backend (the second exact method) confirms it."""
    if not exact.available():
        return settled(problem, result, enumerated,
                       f"{_ENUMERATION} ({exact.missing()}: not cross-checked)", start)
    said = ("infeasible" if enumerated is None
            else f"optimum {float(enumerated.objective)!r}")
    answer = exact.below(None if enumerated is None else enumerated.objective)
    if answer.none_below:
        return settled(problem, result, enumerated,
                       f"{_ENUMERATION}, confirmed by {exact.name} (exact)", start)
    if answer.found is not None:
        return corrected(problem, result, answer.found,
                         f"the exact methods disagree ({_ENUMERATION} found {said}, "
                         f"{exact.name} (exact) a verified solution of objective "
                         f"{float(answer.found.objective)!r}): nothing is claimed exact",
                         start, proven=False)
    why = (f"{_ENUMERATION} found {said}, but {exact.name} did not confirm it "
           f"({answer.why}); two exact methods must agree")
    if enumerated is not None and (result.x is None or result.objective is None
                                   or enumerated.objective < Fraction(result.objective)):
        return corrected(problem, result, enumerated, f"not certified: {why}", start, proven=False)
    return downgraded(result, why, start)


class _Residual:
    """The residual-question loop for problems enumeration does not settle."""

    def __init__(self, problem: Problem, result: SolveResult, incumbent: Verification | None,
                 exact: ExactQuestions, start: float) -> None:
        self.problem, self.result, self.exact, self.start = problem, result, exact, start
        self.best = incumbent
        self.improved = False
        self.bound: float | None = None  # the exact backend's lower bound (rounded down), once it minimised

    def run(self) -> SolveResult:
        minimised = False
        while True:
            answer = self.exact.below(None if self.best is None else self.best.objective)
            if answer.none_below:
                what = (f"{self.exact.name} (exact) proved no solution is better" if self.best
                        else f"{self.exact.name} (exact) proved infeasibility")
                return settled(self.problem, self.result, self.best, what, self.start)
            if answer.found is not None:
                self._offer(answer.found)
                if self.problem.integral_objective:
                    continue  # each answer improves by at least 1: the loop ends
            elif not answer.better_exists:
                return self._unsettled(answer.why)
            if minimised:
                return self._unsettled(f"{self.exact.name} finds solutions below every float64 one it "
                                       f"returns: the optimum is not attained by a float64 point")
            least = self.exact.minimum()
            minimised = True
            if least.none_below:
                return self._unsettled(f"{self.exact.name} called the problem infeasible after finding "
                                       f"a solution")
            if least.found is not None:
                self._offer(least.found)
            self.bound = least.bound
            if least.found is None and least.bound is None:
                return self._unsettled(least.why)

    def _offer(self, found: Verification) -> None:
        if self.best is None or found.objective < self.best.objective:
            self.best, self.improved = found, True

    def _unsettled(self, why: str) -> SolveResult:
        if self.improved and self.best is not None:  # the solver's claim was wrong: keep the better one
            return corrected(self.problem, self.result, self.best,
                             f"certification found a better solution ({float(self.best.objective)!r}) "
                             f"than the solver's claim but could not prove it optimal ({why})",
                             self.start, proven=False, bound=self.bound)
        detail = f" ({why})" if why else ""
        result = self.result if self.bound is None else replace(self.result, bound=self.bound)
        return downgraded(result, f"{self.exact.name} did not settle it{detail}", self.start)
