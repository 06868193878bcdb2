"""SCIP through PySCIPOpt: the MILP lowering of :mod:`smug_opt.bridges.milp`.

Settings chosen on purpose (SCIP 10 as bundled in the pyscipopt 6.3 wheel):

* ``limits/gap`` is the requested relative gap and ``limits/absgap`` 0: OPTIMAL means SCIP
  closed the tree (SCIP's own gap divides by the smaller bound; the core recomputes it).
* ``numerics/feastol`` 1e-7 (SCIP's default 1e-6): SCIP checks integrality against the
  feasibility tolerance too, and the level-1 margins of the bridge start at 1e-6. Rows are
  scaled by powers of two to a largest coefficient of about 1, tiny coefficients are
  dropped by the bridge (well above SCIP's ``numerics/epsilon``, 1e-9), and the objective
  is scaled as :func:`~smug_opt.bridges.milp.solver_objective` says (bounds unscaled by it).
* SCIP solves serially: ``threads`` is not used (its concurrent mode is not built into
  the wheel's default run). ``seed`` goes to ``randomization/randomseedshift``.
* Exact (rational) solving is not compiled into the wheel, so SCIP is a floating-point
  backend like HiGHS: every answer is verified exactly by the core.
* A start (``options.start``) becomes a partial solution (``createPartialSol`` +
  ``addSol``); SCIP completes and checks it, so a start SCIP cannot use is ignored.
* Improving solutions are streamed through an event handler on ``BESTSOLFOUND``.
* ``extras`` are SCIP parameters by their path name (``"presolving/maxrounds": 0``), the
  ones listed in :attr:`ScipBackend.options`; any other is an error, not a no-op.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Mapping
from dataclasses import dataclass
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
from smug_opt.ir import Problem

__all__ = ["ScipBackend"]

_FEASIBILITY_TOLERANCE = 1e-7
_LIMIT_STATUSES = frozenset({"timelimit", "gaplimit", "nodelimit", "totalnodelimit",
                             "stallnodelimit", "memlimit", "sollimit", "bestsollimit",
                             "restartlimit", "userinterrupt", "primallimit", "duallimit"})


@dataclass
class _ScipModel:
    model: Any  # pyscipopt.Model
    variables: list[Any]  # pyscipopt.Variable, one per MILP column
    form: MilpForm
    costs: SolverObjective


class ScipBackend(Backend):
    """SCIP 10 branch-and-cut (PySCIPOpt); strict rows by margin, ReLU by big-M (both from
    the core's MILP bridge)."""

    name: ClassVar[str] = "scip"
    description: ClassVar[str] = "SCIP via PySCIPOpt (margins for strict rows, big-M ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("pyscipopt",)
    pip_extra: ClassVar[str] = "scip"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True, incumbents=True)
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({
        "presolving/maxrounds": "presolve rounds (-1: unlimited, 0: off)",
        "separating/maxrounds": "cut rounds per node (-1: unlimited)",
        "separating/maxroundsroot": "cut rounds at the root (-1: unlimited)",
        "limits/nodes": "branch-and-bound node limit (-1: none)",
        "limits/solutions": "stop after this many solutions (-1: none)",
        "lp/initalgorithm": "initial LP algorithm: 's' automatic, 'p' primal, 'd' dual, 'b' barrier",
        "numerics/feastol": "feasibility (and integrality) tolerance (the backend sets 1e-7)",
        "branching/scorefunc": "branching score: 's' sum, 'p' product, 'q' quotient",
        "display/verblevel": "log verbosity 0-5 (shown with verbose)",
        "randomization/permutevars": "permute variables with the seed (bool)",
        "heuristics/rens/freq": "RENS heuristic frequency (-1: off)",
    })

    @classmethod
    def solver_version(cls) -> str:
        import pyscipopt

        return f"SCIP {pyscipopt.Model().version()} (PySCIPOpt {importlib.metadata.version('pyscipopt')})"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _ScipModel:
        import pyscipopt
        from pyscipopt.scip import Expr, Term

        form = to_milp(problem, level)
        costs = solver_objective(form)
        model = pyscipopt.Model("smug_opt")
        if not options.verbose:
            model.hideOutput()
        inf = model.infinity()
        xs = [model.addVar(name=f"x{j}", vtype="I" if integer else "C",
                           lb=max(lo, -inf), ub=min(hi, inf), obj=c)
              for j, (lo, hi, c, integer) in enumerate(zip(
                  form.col_lb.tolist(), form.col_ub.tolist(), costs.costs.tolist(),
                  form.integer.tolist(), strict=True))]
        A = form.A
        cols, data, ptr = A.indices.tolist(), A.data.tolist(), A.indptr.tolist()
        for i, (lo, hi) in enumerate(zip(form.row_lo.tolist(), form.row_hi.tolist(), strict=True)):
            if lo == -math.inf and hi == math.inf:  # every point satisfies it
                continue
            expr = Expr({Term(xs[k]): v for k, v in zip(cols[ptr[i]:ptr[i + 1]],
                                                          data[ptr[i]:ptr[i + 1]], strict=True)})
            model.addCons(pyscipopt.scip.ExprCons(expr, lhs=None if lo == -math.inf else lo,
                                                  rhs=None if hi == math.inf else hi),
                          name=f"r{i}")
        return _ScipModel(model, xs, form, costs)

    def optimize(self, model: _ScipModel, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        import pyscipopt

        m, form, xs, costs = model.model, model.form, model.variables, model.costs
        m.setParam("limits/gap", float(options.relative_gap))
        m.setParam("limits/absgap", 0.0)
        m.setParam("numerics/feastol", _FEASIBILITY_TOLERANCE)
        m.setParam("randomization/randomseedshift", int(options.seed))
        if options.time_limit is not None:
            m.setParam("limits/time", float(options.time_limit))
        for key, value in options.extras.items():
            try:
                m.setParam(str(key), value)
            except KeyError as exc:
                raise ValueError(f"extras: {key!r} is not a SCIP parameter") from exc
        start = getattr(options, "start", None)
        if start is not None:
            sol = m.createPartialSol()
            for var, value in zip(xs, start_vector(form, problem, start).tolist(), strict=True):
                m.setSolVal(sol, var, value)
            m.addSol(sol)

        def values(sol: Any) -> np.ndarray:
            return np.array([m.getSolVal(sol, v) for v in xs], dtype=np.float64)

        class BestSolutions(pyscipopt.Eventhdlr):
            def eventinit(self) -> None:
                self.model.catchEvent(pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND, self)

            def eventexit(self) -> None:
                self.model.dropEvent(pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND, self)

            def eventexec(self, event: Any) -> None:
                sol = self.model.getBestSol()
                full = values(sol)
                on_incumbent(form.problem_values(full), float(form.objective @ full))

        m.includeEventhdlr(BestSolutions(), "smug_opt_incumbents", "streams improving solutions")
        m.optimize()
        name = m.getStatus()
        has_sol = m.getNSols() > 0
        x = objective = None
        if has_sol:
            full = values(m.getBestSol())
            if not np.all(np.isfinite(full)):
                return RawResult(Status.ERROR, solver_status=name,
                                 message="SCIP reported a solution without finite values")
            x, objective = form.problem_values(full), float(form.objective @ full)
        dual = m.getDualbound()
        bound = None
        if math.isfinite(dual) and abs(dual) < m.infinity():
            bound = costs.problem_bound(float(dual))
        if name == "optimal":
            return RawResult(Status.OPTIMAL, x, objective, bound, name)
        if name == "infeasible" or (name == "inforunbd" and _bounded(form)):
            return RawResult(Status.INFEASIBLE, solver_status=name)
        if name in _LIMIT_STATUSES:
            return RawResult(Status.FEASIBLE if has_sol else Status.NO_SOLUTION, x, objective,
                             bound, name)
        return RawResult(Status.ERROR, x, objective, bound, name, f"SCIP stopped: {name}")


def _bounded(form: MilpForm) -> bool:
    """Every column has finite bounds, so "infeasible or unbounded" means infeasible."""
    return bool(np.all(np.isfinite(form.col_lb)) and np.all(np.isfinite(form.col_ub)))
