"""The LP relaxation of a certificate's MILP at a branch-and-bound node, solved by HiGHS.

Only an oracle: its duals and Farkas rays are floats, turned into exact derivations by
:mod:`smug_opt.certificate.search`, so a wrong or inaccurate answer costs a weaker bound
(or a failed certificate), never a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.certificate.milp import ExactMilp, ExactRow
from smug_opt.console import silenced_stdout

__all__ = ["LpAnswer", "NodeLp"]


@dataclass(frozen=True)
class LpAnswer:
    """``status``: ``"optimal"`` (``duals``, ``x`` and its float ``value`` set),
    ``"infeasible"`` (``ray`` set when HiGHS gave one) or ``"unknown"`` (time limit or a
    solver failure)."""

    status: str
    duals: np.ndarray | None = None
    x: np.ndarray | None = None
    value: float = float("nan")
    ray: np.ndarray | None = None


class NodeLp:
    """``min c·x`` over ``rows`` with the MILP's bounds; :meth:`solve` fixes binaries."""

    def __init__(self, milp: ExactMilp, rows: Sequence[ExactRow]) -> None:
        import highspy

        self._highspy = highspy
        n, inf = milp.num_vars, highspy.kHighsInf
        row_ids = np.repeat(np.arange(len(rows)), [len(r.cols) for r in rows])
        cols = np.array([j for r in rows for j in r.cols], dtype=np.int64)
        vals = np.array([float(a) for r in rows for a in r.coefs], dtype=np.float64)
        A = sp.csc_matrix((vals, (row_ids, cols)), shape=(len(rows), n))
        rhs = np.array([float(r.rhs) for r in rows])
        senses = np.array([r.sense for r in rows])
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(rows)
        lp.col_cost_ = np.array([float(milp.objective.get(j, 0)) for j in range(n)])
        self._lb = np.array([float(milp.rows[2 * j].rhs) for j in range(n)])
        self._ub = np.array([float(milp.rows[2 * j + 1].rhs) for j in range(n)])
        lp.col_lower_, lp.col_upper_ = self._lb, self._ub
        lp.row_lower_ = np.where(senses == "L", -inf, rhs)
        lp.row_upper_ = np.where(senses == "G", inf, rhs)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data
        with silenced_stdout():  # HiGHS prints its banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.setOptionValue("presolve", "off")  # keeps Farkas rays available
        h.passModel(lp)
        self._h = h
        self._binaries = np.flatnonzero(milp.integer).astype(np.int32)

    def solve(self, fixed: Mapping[int, int], seconds: float) -> LpAnswer:
        """The relaxation with ``x[j] = fixed[j]`` for the fixed binaries."""
        h, highspy = self._h, self._highspy
        lb, ub = self._lb[self._binaries].copy(), self._ub[self._binaries].copy()
        if fixed:
            position = {int(j): k for k, j in enumerate(self._binaries)}
            for j, value in fixed.items():
                lb[position[j]] = ub[position[j]] = float(value)
        h.changeColsBounds(self._binaries.size, self._binaries, lb, ub)
        h.setOptionValue("time_limit", h.getRunTime() + max(seconds, 0.01))
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            solution = h.getSolution()
            return LpAnswer("optimal", duals=np.asarray(solution.row_dual, dtype=np.float64),
                            x=np.asarray(solution.col_value, dtype=np.float64),
                            value=float(h.getInfo().objective_function_value))
        if status == highspy.HighsModelStatus.kInfeasible:
            _, has_ray, ray = h.getDualRay()
            return LpAnswer("infeasible", ray=np.asarray(ray, dtype=np.float64) if has_ray else None)
        return LpAnswer("unknown")
