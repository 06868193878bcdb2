"""OR-Tools CP-SAT on the integer lowering of :mod:`smug_opt.bridges.integer`."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
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
from smug_opt.bridges.integer import IntegerForm, to_integer
from smug_opt.ir import Problem

__all__ = ["CpSatBackend"]

_SCALING_KEYS = ("coefficient_bits", "activity_bits", "grid_bits")
"""``options.extras`` keys that go to :func:`to_integer`; every other key is a CP-SAT
parameter (``SatParameters`` field name)."""

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1


@dataclass(frozen=True)
class _Lowered:
    model: Any  # cp_model.CpModel, or None when a grid domain is empty
    form: IntegerForm
    empty: str = ""


class CpSatBackend(Backend):
    """CP-SAT on rows scaled to integers by powers of two, with proven rounding bounds.

    Level 0 rounds outward (a relaxation: its proven optimum is a valid lower bound),
    levels 1-3 round inward with margins 1, 2 and 4 times the proven error, so a level-1
    solution is feasible for the real rows (see :mod:`smug_opt.bridges.integer`).

    The CP-SAT objective has integer coefficients on integer variables, so its values and
    bounds are integers: an absolute gap below 1 is a proof, and with ``relative_gap`` 0
    both gap limits are 0, so OPTIMAL means proven optimal for the lowered model.
    """

    name: ClassVar[str] = "cpsat"
    description: ClassVar[str] = "OR-Tools CP-SAT (rows scaled to integers by powers of two, big-M ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("ortools",)
    extra: ClassVar[str] = "cpsat"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True, incumbents=True)
    levels: ClassVar[int] = 4

    @classmethod
    def solver_version(cls) -> str:
        return f"OR-Tools CP-SAT {importlib.metadata.version('ortools')}"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _Lowered:
        from ortools.sat.python import cp_model

        scaling = {k: int(v) for k, v in options.extras.items() if k in _SCALING_KEYS}
        form = to_integer(problem, level, **scaling)
        if np.any(form.lb > form.ub):
            j = int(np.flatnonzero(form.lb > form.ub)[0])
            return _Lowered(None, form, f"variable {j} has no grid point within its bounds "
                                        f"at level {level}")
        model = cp_model.CpModel()
        proto = model.proto
        for lo, hi in zip(form.lb.tolist(), form.ub.tolist(), strict=True):
            proto.variables.add().domain.extend([lo, hi])
        C = form.C
        for i, (lo, hi) in enumerate(zip(form.row_lo, form.row_hi, strict=True)):
            if lo is None and hi is None:
                continue
            start, stop = C.indptr[i], C.indptr[i + 1]
            linear = proto.constraints.add().linear
            linear.vars.extend(C.indices[start:stop].tolist())
            linear.coeffs.extend(C.data[start:stop].tolist())
            linear.domain.extend([_INT_MIN if lo is None else lo, _INT_MAX if hi is None else hi])
        used = np.flatnonzero(form.objective)
        if used.size:
            proto.objective.vars.extend(used.tolist())
            proto.objective.coeffs.extend(form.objective[used].tolist())
        return _Lowered(model, form)

    def optimize(self, model: _Lowered, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        from ortools.sat.python import cp_model

        form = model.form
        if model.model is None:
            return RawResult(Status.INFEASIBLE, solver_status="EMPTY_DOMAIN", message=model.empty)
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = int(options.threads)
        params.random_seed = int(options.seed)
        params.relative_gap_limit = float(options.relative_gap)
        params.absolute_gap_limit = 0.0
        params.log_search_progress = bool(options.verbose)
        if options.time_limit is not None:
            params.max_time_in_seconds = float(options.time_limit)
        for key, value in options.extras.items():
            if key in _SCALING_KEYS:
                continue
            if not hasattr(params, key):
                raise ValueError(f"unknown CP-SAT parameter {key!r} in extras (scaling keys: "
                                 f"{', '.join(_SCALING_KEYS)})")
            setattr(params, key, value)

        def values(solution: Any) -> np.ndarray:
            return form.problem_values(np.fromiter(solution, dtype=np.int64, count=form.num_cols))

        class Incumbents(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                x = values(self.response_proto.solution)
                on_incumbent(x, float(problem.objective @ x))

        status = solver.solve(model.model, Incumbents())
        name = solver.status_name(status)
        bound = None
        if form.objective.any() and np.isfinite(solver.best_objective_bound):
            bound = form.objective_bound(solver.best_objective_bound)
        if status == cp_model.MODEL_INVALID:
            return RawResult(Status.ERROR, solver_status=name,
                             message=f"CP-SAT rejected the model: {model.model.validate()}")
        if status == cp_model.INFEASIBLE:
            return RawResult(Status.INFEASIBLE, solver_status=name)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            x = values(solver.response_proto.solution)
            objective = float(problem.objective @ x)
            proven = status == cp_model.OPTIMAL and (
                not form.objective.any() or solver.best_objective_bound >= solver.objective_value)
            if not form.objective.any():
                bound = objective if proven else None
            return RawResult(Status.OPTIMAL if proven else Status.FEASIBLE, x, objective, bound, name)
        return RawResult(Status.NO_SOLUTION, bound=bound, solver_status=name)
