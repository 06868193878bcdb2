"""HiGHS through highspy: the MILP lowering of :mod:`smug_opt.bridges.milp`."""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from smug_opt.backend import (
    Backend,
    Capabilities,
    IncumbentCallback,
    RawResult,
    SolveOptions,
    Status,
)
from smug_opt.bridges import MilpForm, to_milp
from smug_opt.bridges.milp import SolverObjective, solver_objective, start_vector
from smug_opt.console import silenced_stdout
from smug_opt.ir import Problem

__all__ = ["HighsBackend"]

_INTEGRALITY_TOLERANCE = 1e-9


def _stale_start(h: Any, costs: SolverObjective) -> bool:
    """Whether the columns HiGHS hands back do not belong to its reported objective.

    After ``setSolution`` (a start), HiGHS 1.16 can return the start's columns
    (``getSolution`` and the improving callback alike) with the objective of a better
    optimum it found (on a paper-scale first layer: objective 23, columns of the start's 31)."""
    info = h.getInfo()
    if info.primal_solution_status != 2:
        return False
    value = float(info.objective_function_value)
    columns = np.asarray(h.getSolution().col_value, dtype=np.float64)
    return abs(float(costs.costs @ columns) - value) > 1e-6 * max(1.0, abs(value))


class HighsBackend(Backend):
    """HiGHS branch-and-cut (highspy), strict rows by margin, ReLU by big-M."""

    name: ClassVar[str] = "highs"
    description: ClassVar[str] = "HiGHS MILP via highspy (margins for strict rows, big-M ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("highspy",)
    pip_extra: ClassVar[str] = "highs"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True, incumbents=True, lp=True)
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({
        "presolve": "HiGHS presolve: 'on', 'off' or 'choose'",
        "solver": "HiGHS LP solver: 'simplex', 'ipm', 'pdlp' or 'choose'",
        "parallel": "HiGHS parallelism: 'on', 'off' or 'choose'",
        "run_crossover": "after IPM: 'on', 'off' or 'choose'",
        "simplex_strategy": "HiGHS simplex strategy (0-4)",
        "mip_heuristic_effort": "share of MIP effort on primal heuristics (default 0.05)",
        "mip_detect_symmetry": "detect MIP symmetry (bool)",
        "mip_max_nodes": "branch-and-bound node limit",
        "mip_feasibility_tolerance": "integrality/feasibility tolerance (the backend sets 1e-9)",
        "primal_feasibility_tolerance": "LP primal feasibility tolerance (default 1e-7)",
        "dual_feasibility_tolerance": "LP dual feasibility tolerance (default 1e-7)",
    })

    @classmethod
    def lp_solver(cls) -> HighsLpSolver:
        return HighsLpSolver()

    @classmethod
    def solver_version(cls) -> str:
        return f"HiGHS {importlib.metadata.version('highspy')}"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> Any:
        import highspy

        form = to_milp(problem, level)
        costs = solver_objective(form)
        if options.verbose:
            h = highspy.Highs()
        else:
            with silenced_stdout():  # its banner, in a solve run in the caller's process
                h = highspy.Highs()
        h.setOptionValue("output_flag", bool(options.verbose))
        lp = highspy.HighsLp()
        lp.num_col_ = form.num_cols
        lp.num_row_ = form.num_rows
        lp.col_cost_ = costs.costs
        lp.col_lower_ = form.col_lb
        lp.col_upper_ = form.col_ub
        lp.row_lower_ = np.where(np.isinf(form.row_lo), -highspy.kHighsInf, form.row_lo)
        lp.row_upper_ = np.where(np.isinf(form.row_hi), highspy.kHighsInf, form.row_hi)
        csc = form.A.tocsc()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
        lp.a_matrix_.index_ = csc.indices.astype(np.int32)
        lp.a_matrix_.value_ = csc.data
        lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                           for i in form.integer]
        h.passModel(lp)
        return h, form, costs

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        import highspy

        form: MilpForm
        costs: SolverObjective
        h, form, costs = model
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(options.time_limit))
        h.setOptionValue("threads", int(options.threads))
        h.setOptionValue("random_seed", int(options.seed))
        h.setOptionValue("mip_rel_gap", float(options.relative_gap))
        h.setOptionValue("mip_abs_gap", 0.0)
        h.setOptionValue("mip_feasibility_tolerance", _INTEGRALITY_TOLERANCE)
        for key, value in options.extras.items():
            h.setOptionValue(str(key), value)
        if options.start is not None:  # HiGHS checks it and keeps it if feasible
            sol = highspy.HighsSolution()
            sol.col_value = start_vector(form, problem, options.start).tolist()
            sol.value_valid = True
            h.setSolution(sol)

        def improving(event: Any) -> None:
            sol = np.asarray(event.data_out.mip_solution, dtype=np.float64)
            if sol.size >= form.num_problem_vars:
                value = costs.unscale(float(event.data_out.objective_function_value))
                on_incumbent(form.problem_values(sol), value)

        h.cbMipImprovingSolution.subscribe(improving)
        began = time.monotonic()
        h.run()
        if options.start is not None and _stale_start(h, costs):  # solve again, without it
            if options.time_limit is not None:
                h.setOptionValue("time_limit", max(float(options.time_limit) - (time.monotonic() - began),
                                                   1e-3))
            h.clearSolver()
            h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        name = h.modelStatusToString(status)
        has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
        x = form.problem_values(h.getSolution().col_value) if has_sol else None
        objective = costs.unscale(float(info.objective_function_value)) if has_sol else None
        ms = highspy.HighsModelStatus
        if form.integer.any():
            solver_bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else None
        else:  # a pure LP: mip_dual_bound is 0; an optimal LP's objective is its bound
            solver_bound = float(info.objective_function_value) if has_sol and status == ms.kOptimal else None
        bound = None if solver_bound is None else costs.problem_bound(solver_bound)
        if status == ms.kOptimal:
            if bound is None and objective is not None:
                bound = objective - costs.error
            return RawResult(Status.OPTIMAL, x, objective, bound, name)
        if status == ms.kInfeasible:
            return RawResult(Status.INFEASIBLE, solver_status=name)
        if status in (ms.kTimeLimit, ms.kIterationLimit, ms.kSolutionLimit, ms.kInterrupt,
                      ms.kObjectiveBound, ms.kObjectiveTarget, ms.kMemoryLimit):
            return RawResult(Status.FEASIBLE if has_sol else Status.NO_SOLUTION, x, objective,
                             bound, name)
        return RawResult(Status.ERROR, x, objective, bound, name, f"HiGHS stopped: {name}")


class HighsLpSolver:
    """HiGHS as the core's bound-LP solver (:class:`smug_opt.backend.LpSolver`): one model,
    only the objective changes, each solve restarts from the last basis (no presolve).
    Dual simplex, because primal simplex, though faster on 784-32-10, can stall for minutes
    (on a 784-64-64-10 LP); the time limit per LP is a guard (a miss keeps the bound it had)."""

    def __init__(self) -> None:
        import highspy

        self._highspy = highspy
        with silenced_stdout():  # HiGHS prints its banner on construction
            self._h = highspy.Highs()
        self._h.setOptionValue("output_flag", False)
        self._h.setOptionValue("threads", 1)
        self._h.setOptionValue("presolve", "off")
        self._h.setOptionValue("simplex_strategy", 1)
        self._col: int | None = None

    def load(self, A: Any, row_lo: np.ndarray, row_hi: np.ndarray, col_lb: np.ndarray,
             col_ub: np.ndarray, time_limit: float = float("inf")) -> bool:
        highspy = self._highspy
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
        lp.col_cost_ = np.zeros(A.shape[1])
        lp.col_lower_, lp.col_upper_ = col_lb, col_ub
        lp.row_lower_ = np.where(np.isinf(row_lo), -inf, row_lo)
        lp.row_upper_ = np.where(np.isinf(row_hi), inf, row_hi)
        csc = A.tocsc()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
        lp.a_matrix_.index_ = csc.indices.astype(np.int32)
        lp.a_matrix_.value_ = csc.data
        self._h.passModel(lp)
        if np.isfinite(time_limit):  # HiGHS's clock runs on
            self._h.setOptionValue("time_limit", self._h.getRunTime() + time_limit)
        self._h.run()
        return self._h.getModelStatus() == highspy.HighsModelStatus.kOptimal

    def minimize(self, col: int, sign: float, time_limit: float) -> np.ndarray | None:
        h = self._h
        if self._col is not None and self._col != col:
            h.changeColCost(self._col, 0.0)
        h.changeColCost(col, sign)
        self._col = col
        h.setOptionValue("time_limit", h.getRunTime() + time_limit)  # HiGHS's clock runs on
        h.run()
        if h.getModelStatus() != self._highspy.HighsModelStatus.kOptimal:
            return None
        return np.asarray(h.getSolution().row_dual, dtype=np.float64)
