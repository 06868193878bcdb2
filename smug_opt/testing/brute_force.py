"""Exact optima of small problems by enumeration: the ground truth of the conformance suite
and of the adversarial campaign (``benchmarks/campaign``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.exact import dot_error_bound
from smug_opt.ir import Problem, Sense
from smug_opt.verification import decide_rows, verify

__all__ = ["BruteForceResult", "ExactOptimum", "brute_force", "exact_optimum"]



@dataclass(frozen=True)
class BruteForceResult:
    """The exact optimum of a small problem: ``objective`` None when infeasible."""

    objective: Fraction | None
    x: np.ndarray | None

    @property
    def feasible(self) -> bool:
        return self.objective is not None


def brute_force(problem: Problem, *, max_binaries: int = 16) -> BruteForceResult:
    """Enumerate every binary assignment and return the exact optimum.

    Each float is read as the rational it is. Needs a problem whose binaries determine
    everything (continuous variables only as ReLU outputs). Rows are decided in float64
    with a rigorous error bound and, where the bound cannot decide, in exact arithmetic.
    """
    n_bin = int(problem.binary.sum())
    if not problem.determined_by_binaries:
        raise ValueError("brute_force needs every continuous variable to be a ReLU output")
    if n_bin > max_binaries:
        raise ValueError(f"brute_force enumerates 2^{n_bin} assignments; the limit is "
                         f"{max_binaries} binaries")
    if problem.num_relus:
        return _brute_force_by_verify(problem)
    n = problem.num_vars
    X = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    feasible = decide_rows(problem, X).holds.all(axis=1)
    if not feasible.any():
        return BruteForceResult(None, None)
    candidates = np.flatnonzero(feasible)
    c = problem.objective
    approx = X[candidates] @ c
    slack = float(dot_error_bound(n, float(np.abs(c).sum())))
    close = candidates[approx <= approx.min() + 2 * slack]
    exact_c = [Fraction(v) for v in c.tolist()]
    best = min(close.tolist(), key=lambda k: (_exact_dot(exact_c, X[k]), k))
    return BruteForceResult(_exact_dot(exact_c, X[best]), X[best].copy())


def _exact_dot(coefs: list[Fraction], x: np.ndarray) -> Fraction:
    return sum((a for a, v in zip(coefs, x.tolist(), strict=True) if v), Fraction(0))


def _brute_force_by_verify(problem: Problem) -> BruteForceResult:
    binaries = np.flatnonzero(problem.binary)
    best: tuple[Fraction, np.ndarray] | None = None
    for bits in itertools.product((0.0, 1.0), repeat=binaries.size):
        x = np.zeros(problem.num_vars)
        x[binaries] = bits
        v = verify(problem, x)
        if v.ok and (best is None or v.objective < best[0]):
            best = (v.objective, v.x)
    return BruteForceResult(None, None) if best is None else BruteForceResult(*best)




@dataclass(frozen=True)
class ExactOptimum:
    """The exact infimum of a small problem (None: infeasible) and whether a solution
    attains it (strict rows that bind a continuous variable may keep it out of reach)."""

    value: Fraction | None
    attained: bool


def exact_optimum(problem: Problem, *, max_binaries: int = 16) -> ExactOptimum:
    """The exact infimum of ``problem``: by :func:`brute_force` when the binaries determine
    everything, else (one continuous variable that is no ReLU output, bounded) by
    enumerating the binaries and solving each one-dimensional remainder exactly."""
    if problem.determined_by_binaries:
        found = brute_force(problem, max_binaries=max_binaries)
        return ExactOptimum(found.objective, found.objective is not None)
    free = np.flatnonzero(~problem.binary)
    if free.size != 1 or problem.num_relus or int(problem.binary.sum()) > max_binaries:
        raise ValueError("exact_optimum needs binaries plus at most one continuous variable "
                         f"(no ReLUs), at most {max_binaries} binaries; got {problem!r}")
    t = int(free[0])
    if not (np.isfinite(problem.lb[t]) and np.isfinite(problem.ub[t])):
        raise ValueError(f"exact_optimum needs finite bounds on variable {t}")
    A = problem.A.tocsc()
    a_t = [Fraction(v) for v in A[:, t].toarray().ravel().tolist()]
    rest = A.tolil()
    rest[:, t] = 0
    rest = rest.tocsr()
    rows = [[(j, Fraction(v)) for j, v in zip(rest.indices[rest.indptr[i]:rest.indptr[i + 1]].tolist(),
                                             rest.data[rest.indptr[i]:rest.indptr[i + 1]].tolist(),
                                             strict=True)] for i in range(problem.num_rows)]
    rhs = [Fraction(v) for v in problem.rhs.tolist()]
    senses = [Sense(s) for s in problem.senses.tolist()]
    cost = [Fraction(v) for v in problem.objective.tolist()]
    binaries = np.flatnonzero(problem.binary).tolist()
    best: tuple[Fraction, bool] | None = None
    for bits in itertools.product((0, 1), repeat=len(binaries)):
        ones = {j for j, b in zip(binaries, bits, strict=True) if b}
        piece = _one_dimensional(rows, a_t, rhs, senses, ones, Fraction(problem.lb[t]),
                                 Fraction(problem.ub[t]), cost[t])
        if piece is None:
            continue
        value = sum((cost[j] for j in ones), Fraction(0)) + piece[0]
        if best is None or value < best[0] or (value == best[0] and piece[1]):
            best = (value, piece[1] or (best is not None and value == best[0] and best[1]))
    return ExactOptimum(None, False) if best is None else ExactOptimum(*best)


def _one_dimensional(rows: list[list[tuple[int, Fraction]]], a_t: list[Fraction], rhs: list[Fraction],
                     senses: list[Sense], ones: set[int], lb: Fraction, ub: Fraction,
                     c: Fraction) -> tuple[Fraction, bool] | None:
    """min ``c·t`` over the t allowed by every row once the binaries are fixed: (infimum,
    attained), or None when no t is allowed."""
    lo, lo_open, hi, hi_open = lb, False, ub, False
    for row, a, b, sense in zip(rows, a_t, rhs, senses, strict=True):
        s = sum((v for j, v in row if j in ones), Fraction(0))
        if a == 0:
            d = s - b
            ok = {Sense.LE: d <= 0, Sense.GE: d >= 0, Sense.EQ: d == 0,
                  Sense.LT: d < 0, Sense.GT: d > 0}[sense]
            if not ok:
                return None
            continue
        bound = (b - s) / a  # a·t SENSE b - s  <=>  t SENSE' bound
        if sense is Sense.EQ:
            uppers, lowers = [(bound, False)], [(bound, False)]
        else:
            upper = (sense in (Sense.LE, Sense.LT)) == (a > 0)
            strict = sense in (Sense.LT, Sense.GT)
            uppers, lowers = ([(bound, strict)], []) if upper else ([], [(bound, strict)])
        for v, open_ in uppers:
            if v < hi or (v == hi and open_):
                hi, hi_open = v, open_
        for v, open_ in lowers:
            if v > lo or (v == lo and open_):
                lo, lo_open = v, open_
    if lo > hi or (lo == hi and (lo_open or hi_open)):
        return None
    if c > 0:
        return c * lo, not lo_open
    if c < 0:
        return c * hi, not hi_open
    return Fraction(0), True
