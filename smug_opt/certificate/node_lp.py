"""The LP relaxation of a certificate's MILP at a branch-and-bound node, solved by HiGHS.

Only an oracle: its duals and Farkas rays are floats, turned into exact derivations by
:mod:`smug_opt.certificate.search`, so a wrong or inaccurate answer costs a weaker bound
(or a failed certificate), never a wrong one. Each row is handed to HiGHS scaled by a power
of two (its largest coefficient in [0.5, 1)): rows of 1e-12 coefficients are below HiGHS's
smallest matrix value, which it drops, turning a feasible node infeasible. The duals are
scaled back (exactly: powers of two), so they are the original rows' multipliers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.highs_answer import LpAnswer, read_answer
from smug_opt.certificate.milp import CertificateError, ExactMilp, ExactRow
from smug_opt.console import silenced_stdout

__all__ = ["LpAnswer", "NodeLp"]


class NodeLp:
    """``min c·x`` over ``rows`` with the MILP's bounds; :meth:`solve` fixes binaries."""

    def __init__(self, milp: ExactMilp, rows: Sequence[ExactRow]) -> None:
        import highspy

        self._highspy = highspy
        n, inf = milp.num_vars, highspy.kHighsInf
        row_ids = np.repeat(np.arange(len(rows)), [len(r.cols) for r in rows])
        cols = np.array([j for r in rows for j in r.cols], dtype=np.int64)
        vals = np.array([float(a) for r in rows for a in r.coefs], dtype=np.float64)
        largest = np.zeros(len(rows))
        np.maximum.at(largest, row_ids, np.abs(vals))
        self._scale = np.ldexp(1.0, -np.frexp(np.where(largest > 0, largest, 1.0))[1])  # rows × scale
        A = sp.csc_matrix((vals * self._scale[row_ids], (row_ids, cols)), shape=(len(rows), n))
        with np.errstate(over="ignore"):  # a huge rhs over tiny coefficients: ±inf, a relaxation
            rhs = np.array([float(r.rhs) for r in rows]) * self._scale
        senses = np.array([r.sense for r in rows])
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, len(rows)
        lp.col_cost_ = np.array([float(milp.objective.get(j, 0)) for j in range(n)])
        self._lb = np.array([float(milp.rows[2 * j].rhs) for j in range(n)])
        self._ub = np.array([float(milp.rows[2 * j + 1].rhs) for j in range(n)])
        lp.col_lower_, lp.col_upper_ = self._lb, self._ub
        row_lo, row_hi = np.where(senses == "L", -inf, rhs), np.where(senses == "G", inf, rhs)
        lp.row_lower_, lp.row_upper_ = row_lo, row_hi
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data
        self._h = self._highs(lp)
        self._binaries = np.flatnonzero(milp.integer).astype(np.int32)
        self._position = np.full(n, -1, dtype=np.int64)  # a binary's place among the binaries
        self._position[self._binaries] = np.arange(self._binaries.size)
        self._binary_bounds = (self._lb[self._binaries], self._ub[self._binaries])  # the model's own
        # the elastic LP (min Σ slack, every row relaxed by its slack): its duals prove a
        # node infeasible when HiGHS gives no Farkas ray (infeasible without a simplex run)
        m = len(rows)
        elastic = highspy.HighsLp()
        elastic.num_col_, elastic.num_row_ = n + 2 * m, m
        elastic.col_cost_ = np.concatenate([np.zeros(n), np.ones(2 * m)])
        elastic.col_lower_ = np.concatenate([self._lb, np.zeros(2 * m)])
        elastic.col_upper_ = np.concatenate([self._ub, np.full(2 * m, inf)])
        elastic.row_lower_, elastic.row_upper_ = row_lo, row_hi
        slack = sp.hstack([A, sp.identity(m, format="csc"), -sp.identity(m, format="csc")], format="csc")
        elastic.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        elastic.a_matrix_.start_ = slack.indptr.astype(np.int32)
        elastic.a_matrix_.index_ = slack.indices.astype(np.int32)
        elastic.a_matrix_.value_ = slack.data
        self._elastic_lp = elastic
        self._elastic: Any = None
        self._held: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per HiGHS model: its binaries' bounds

    def _highs(self, lp: Any) -> Any:
        highspy = self._highspy
        with silenced_stdout():  # HiGHS prints its banner on construction
            h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.setOptionValue("presolve", "off")  # keeps Farkas rays available
        if h.passModel(lp) == highspy.HighsStatus.kError:
            raise CertificateError("HiGHS refuses the LP relaxation (a coefficient or bound out of "
                                   "its range, e.g. a matrix entry above 1e15)")
        return h

    def _fix(self, h: Any, fixed: Mapping[int, int], seconds: float) -> None:
        lb, ub = self._binary_bounds[0].copy(), self._binary_bounds[1].copy()
        if fixed:
            at = self._position[np.fromiter(fixed.keys(), dtype=np.int64, count=len(fixed))]
            values = np.fromiter(fixed.values(), dtype=np.float64, count=len(fixed))
            lb[at] = ub[at] = values
        # only the binaries whose bounds differ from the model's (HiGHS's cost per column)
        held_lb, held_ub = self._held.get(id(h), self._binary_bounds)
        changed = np.flatnonzero((lb != held_lb) | (ub != held_ub)).astype(np.int32)
        if changed.size:
            h.changeColsBounds(changed.size, self._binaries[changed], lb[changed], ub[changed])
        self._held[id(h)] = (lb, ub)
        h.setOptionValue("time_limit", h.getRunTime() + max(seconds, 0.01))

    def elastic_duals(self, fixed: Mapping[int, int], seconds: float) -> np.ndarray | None:
        """Row duals of ``min Σ slack`` over the rows relaxed by slacks (a positive optimum:
        the node is infeasible, and these duals say why), or None."""
        if self._elastic is None:
            self._elastic = self._highs(self._elastic_lp)
        h = self._elastic
        self._fix(h, fixed, seconds)
        h.run()
        if h.getModelStatus() != self._highspy.HighsModelStatus.kOptimal:
            return None
        return np.asarray(h.getSolution().row_dual, dtype=np.float64) * self._scale

    def solve(self, fixed: Mapping[int, int], seconds: float) -> LpAnswer:
        """The relaxation with ``x[j] = fixed[j]`` for the fixed binaries."""
        h = self._h
        self._fix(h, fixed, seconds)
        h.run()
        answer = read_answer(h)
        return replace(answer, duals=None if answer.duals is None else answer.duals * self._scale,
                       ray=None if answer.ray is None else answer.ray * self._scale)
