"""A complete smug-opt backend over ``scipy.optimize.milp`` (HiGHS inside SciPy).

The README's plugin guide walks through this file: a float MILP solver reached through
:func:`smug_opt.bridges.to_milp`, with tightening levels, a proven bound, the time limit
passed on, and every solver ending mapped to a status.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from smug_opt import Backend, Capabilities, Problem, RawResult, SolveOptions, Status
from smug_opt.backend import IncumbentCallback
from smug_opt.bridges import MilpForm, to_milp

__all__ = ["ScipyMilpBackend"]


class ScipyMilpBackend(Backend):
    """``scipy.optimize.milp``: sparse rows, ±inf row bounds, integrality from ``to_milp``."""

    name: ClassVar[str] = "scipy-milp"
    description: ClassVar[str] = "scipy.optimize.milp (HiGHS via SciPy), through to_milp"
    requires: ClassVar[tuple[str, ...]] = ("scipy",)
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True)  # to_milp lowers ReLUs
    levels: ClassVar[int] = 4  # level 0 relaxes strict rows, 1-3 tighten them by growing margins

    @classmethod
    def solver_version(cls) -> str:
        import scipy

        return f"SciPy {scipy.__version__} milp"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> MilpForm:
        return to_milp(problem, level)  # the solver needs nothing more: scipy takes arrays

    def optimize(self, model: MilpForm, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        from scipy.optimize import Bounds, LinearConstraint, milp

        form = model
        settings: dict[str, Any] = {"disp": options.verbose, "mip_rel_gap": options.relative_gap}
        if options.time_limit is not None:  # already this attempt's share of the solve's limit
            settings["time_limit"] = options.time_limit
        # scipy.optimize.milp has no threads or seed setting: those options are ignored
        constraints = [LinearConstraint(form.A, form.row_lo, form.row_hi)] if form.num_rows else []
        res = milp(form.objective, integrality=form.integer.astype(np.int8),
                   bounds=Bounds(form.col_lb, form.col_ub), constraints=constraints,
                   options=settings)
        return self.result(form, res)

    def result(self, form: MilpForm, res: Any) -> RawResult:
        """The solver's ending as a :class:`RawResult` (scipy's ``status`` codes)."""
        x = None if res.x is None else form.problem_values(res.x)
        objective = None if x is None else float(res.fun)
        bound = getattr(res, "mip_dual_bound", None)
        bound = float(bound) if bound is not None and np.isfinite(bound) else None
        if not form.integer.any() and res.status == 0:
            bound = objective  # a pure LP: its optimal objective is its bound
        name = f"{res.status}: {res.message}"
        if res.status == 0:  # optimal: proven, with the bound that proves it
            return RawResult(Status.OPTIMAL, x, objective, bound, name)
        if res.status == 1:  # iteration or time limit: what it found, not a proof
            return RawResult(Status.FEASIBLE if x is not None else Status.NO_SOLUTION, x, objective,
                             bound, name)
        if res.status == 2:  # proven infeasible
            return RawResult(Status.INFEASIBLE, solver_status=name)
        # 3 (unbounded: every variable of a smug-opt problem is bounded, so this is the
        # solver's numerics, e.g. bounds past its infinity) and 4 (other): the solver failed
        return RawResult(Status.ERROR, x, objective, None, name, f"scipy.optimize.milp: {res.message}")
