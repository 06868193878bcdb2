"""Judge a backend's result against the exact truth: wrong, weak-but-honest, or right.

Wrong is any claim the truth contradicts: a returned solution that fails exact
verification, OPTIMAL above the optimum (beyond the documented objective tolerance, or
at all when the claim says ``proof == "exact"``), OPTIMAL where no minimiser exists,
INFEASIBLE on a feasible problem, a solution on an infeasible one, a bound above the
optimum. Weak is an honest non-answer: FEASIBLE, NO_SOLUTION or ERROR where a proof
existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from smug_opt import Problem, SolveResult, Status, verify
from smug_opt.solving import objective_tolerance
from smug_opt.testing import ExactOptimum

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    kind: str  # "right", "weak", "wrong"
    why: str


def judge(problem: Problem, truth: ExactOptimum, r: SolveResult) -> Verdict:
    """Compare ``r`` with ``truth`` (see the module docstring)."""
    exact_claim = getattr(r, "proof", None) == "exact"
    tol = Fraction(0) if exact_claim else Fraction(objective_tolerance(problem))
    if r.x is not None:
        v = verify(problem, r.x)
        if not v.ok:
            return Verdict("wrong", f"returned x fails verification: {v.summary()}")
        if truth.value is None:
            return Verdict("wrong", f"{r.status.name} with a solution on an infeasible problem")
        if v.objective < truth.value:
            return Verdict("wrong", f"objective {v.objective} below the exact infimum {truth.value}")
    if r.status is Status.INFEASIBLE:
        if truth.value is not None:
            return Verdict("wrong", f"INFEASIBLE, optimum {float(truth.value)!r}")
        return Verdict("right", "")
    # results carry floats: a bound or objective is compared with the optimum rounded to
    # the nearest float (an exact optimum's float can lie above it by half an ulp)
    rounded = None if truth.value is None else Fraction(float(truth.value))
    if rounded is not None and r.bound is not None and r.status is not Status.ERROR \
            and Fraction(r.bound) > rounded + tol:
        return Verdict("wrong", f"bound {r.bound!r} above the optimum {float(truth.value)!r}")
    if r.status is Status.OPTIMAL:
        assert rounded is not None and r.objective is not None  # checked above
        if not truth.attained and (exact_claim or Fraction(r.objective) > rounded + tol):
            return Verdict("wrong", f"OPTIMAL {r.objective!r}: the infimum {float(truth.value)!r} "
                                    "is not attained")
        if Fraction(r.objective) > rounded + tol:
            return Verdict("wrong", f"OPTIMAL {r.objective!r}, optimum {float(truth.value)!r}")
        return Verdict("right", "")
    if truth.value is None and r.status is Status.NO_SOLUTION:
        return Verdict("weak", "NO_SOLUTION on an infeasible problem")
    if r.status is Status.FEASIBLE and not truth.attained and r.objective is not None:
        return Verdict("right", "FEASIBLE: no minimiser exists")
    return Verdict("weak", f"{r.status.name}: {r.message[:120]}")
