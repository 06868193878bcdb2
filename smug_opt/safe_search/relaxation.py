"""The LP relaxation of a problem without ReLUs, warm-started across column-bound changes,
and the rigorous bounds its floating-point answers give.

One HiGHS model (dual simplex, no presolve) is built once; a node of the search changes
only column bounds, so each solve restarts from the last basis. HiGHS is an oracle here:
its duals and Farkas rays are turned into bounds by :func:`~smug_opt.bounds.lp.safe_dual_bound`
(Neumaier and Shcherbina 2004), valid in exact arithmetic whatever their accuracy. Strict
rows are relaxed to non-strict ones: a relaxation, so every bound stays valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.highs_answer import LpAnswer, read_answer
from smug_opt.bounds.lp import DualParts, dual_parts, row_range, safe_dual_bound
from smug_opt.console import silenced_stdout
from smug_opt.ir import Problem
from smug_opt.safe_search.covers import Cut

__all__ = ["LpAnswer", "Relaxation", "problem_lp"]


def problem_lp(problem: Problem) -> Any:
    """``problem``'s LP relaxation as a ``highspy.HighsLp`` (rows by :func:`~smug_opt.bounds.lp.row_range`,
    columns within the problem's bounds, A column-wise)."""
    import highspy

    row_lo, row_hi = row_range(problem)
    A = problem.A.tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = problem.num_vars, problem.num_rows
    lp.col_cost_ = np.asarray(problem.objective, dtype=np.float64)
    lp.col_lower_, lp.col_upper_ = np.asarray(problem.lb), np.asarray(problem.ub)
    lp.row_lower_ = np.where(np.isfinite(row_lo), row_lo, -highspy.kHighsInf)
    lp.row_upper_ = np.where(np.isfinite(row_hi), row_hi, highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    return lp


class Relaxation:
    """``min c·x`` over ``problem``'s rows (strict ones as non-strict) within column
    bounds that :meth:`solve` takes afresh each time."""

    def __init__(self, problem: Problem) -> None:
        import highspy

        if problem.num_relus:
            raise ValueError("the safe search's relaxation takes problems without ReLUs")
        self._highspy = highspy
        self.problem = problem
        self.row_lo, self.row_hi = row_range(problem)
        self.cost = np.asarray(problem.objective, dtype=np.float64)
        self.At = problem.A.T.tocsr()
        self.abs_At = abs(self.At).tocsr()
        lp = problem_lp(problem)
        with silenced_stdout():  # HiGHS prints its banner on construction
            self._h: Any = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        self._h.setOptionValue("threads", 1)
        self._h.setOptionValue("presolve", "off")  # keeps the basis and Farkas rays
        self._h.setOptionValue("simplex_strategy", 1)  # dual simplex: warm after bound changes
        self._h.passModel(lp)
        self._columns = np.arange(problem.num_vars, dtype=np.int32)
        self.lps = 0
        self.cuts = 0

    def add_cuts(self, cuts: Sequence[Cut]) -> None:
        """Add rows ``coefs·x >= rhs`` valid for every solution (not merely for the LP):
        the relaxation stays one, so every bound it gives stays valid."""
        if not cuts:
            return
        highspy = self._highspy
        n = self.problem.num_vars
        indptr = np.cumsum([0] + [c.cols.size for c in cuts])
        rows = sp.csr_matrix((np.concatenate([c.coefs for c in cuts]),
                              np.concatenate([c.cols for c in cuts]), indptr), shape=(len(cuts), n))
        rhs = np.array([c.rhs for c in cuts], dtype=np.float64)
        self.At = sp.hstack([self.At, rows.T], format="csr")
        self.abs_At = abs(self.At).tocsr()
        self.row_lo = np.concatenate([self.row_lo, rhs])
        self.row_hi = np.concatenate([self.row_hi, np.full(len(cuts), np.inf)])
        self._h.addRows(len(cuts), rhs, np.full(len(cuts), highspy.kHighsInf), rows.nnz,
                        rows.indptr[:-1].astype(np.int32), rows.indices.astype(np.int32),
                        rows.data.astype(np.float64))
        self.cuts += len(cuts)

    def solve(self, lb: np.ndarray, ub: np.ndarray, seconds: float, warm: bool = True) -> LpAnswer:
        """The relaxation within column bounds ``lb``, ``ub`` (``warm`` False: from scratch)."""
        h, highspy = self._h, self._highspy
        if not warm:
            h.clearSolver()
        h.changeColsBounds(self._columns.size, self._columns, lb, ub)
        h.setOptionValue("time_limit", h.getRunTime() + max(seconds, 0.01))  # HiGHS's clock runs on
        h.run()
        self.lps += 1
        status = h.getModelStatus()
        if status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible,
                          highspy.HighsModelStatus.kTimeLimit):
            h.clearSolver()  # a warm start gone wrong: once more from scratch
            h.run()
        return read_answer(h)

    def safe_bound(self, y: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> tuple[float, np.ndarray]:
        """A rigorous lower bound on ``c·x`` over the relaxation within ``lb``, ``ub`` from
        the multipliers ``y``, and the float reduced costs it used."""
        return safe_dual_bound(self.cost, self.At, self.abs_At, self.row_lo, self.row_hi, lb, ub, y)

    def dual_parts(self, y: np.ndarray) -> DualParts:
        """The parts of :meth:`safe_bound` that do not depend on the box, for ``y`` over
        the rows (cuts included) as they are now: a dual proof that stays valid."""
        return dual_parts(self.cost, self.At, self.abs_At, self.row_lo, self.row_hi, y)

    def proves_infeasible(self, ray: np.ndarray | None, lb: np.ndarray, ub: np.ndarray) -> bool:
        """Whether ``ray`` (either sign) proves the relaxation within ``lb``, ``ub`` empty:
        the safe lower bound of ``0·x`` it gives is positive."""
        if ray is None or not np.all(np.isfinite(ray)):
            return False
        zero = np.zeros(self.cost.size)
        for sign in (1.0, -1.0):
            bound, _ = safe_dual_bound(zero, self.At, self.abs_At, self.row_lo, self.row_hi, lb, ub,
                                       sign * ray)
            if bound > 0:
                return True
        return False
