"""OR-Tools CP-SAT on the integer lowering of :mod:`smug_opt.bridges.integer`."""

from __future__ import annotations

import importlib.metadata
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
from smug_opt.bridges.integer import IntegerForm, to_integer
from smug_opt.ir import Problem

__all__ = ["CpSatBackend"]

_LOWERING_KEYS = ("coefficient_bits", "activity_bits", "grid_bits", "relu", "phase_rows")
"""``options.extras`` keys that shape the model (the first three go to :func:`to_integer`);
the other declared ``options`` are CP-SAT parameters (``SatParameters`` field names)."""

DEFAULT_RELU = "max"
"""ReLUs as CP-SAT's native ``y = max(z, 0)`` (``extras={"relu": "big-m"}`` for big-M rows):
on a random 784-32-10 network (optimum 1, which HiGHS proves in 3 s) big-M rows gave no
solution in 30 s, the native form proved the optimum in 1.4 s.

``extras={"phase_rows": True}`` adds, per ReLU, a phase literal ``a`` with the exact
integer rows ``y <= z - lo(z)·(1 - a)`` and ``y <= hi(z)·a`` (three variables each). They
give CP-SAT's LP a bound: on 64-16-4 networks with optima 5 they proved in 0.6-1.3 s what
the plain form could not prove in 15 s, but on the 784-32-10 network they stopped CP-SAT
from finding any solution in 15 s; hence off by default."""

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1


@dataclass(frozen=True)
class _Lowered:
    model: Any  # cp_model.CpModel, or None when a grid domain is empty
    form: IntegerForm
    empty: str = ""


class CpSatBackend(Backend):
    """CP-SAT on rows scaled to integers by powers of two, with proven rounding bounds, and
    ReLUs as native ``max`` constraints.

    Level 0 rounds outward (a relaxation: its proven optimum is a valid lower bound),
    levels 1-3 round inward with margins 1, 2 and 4 times the proven error, so a level-1
    solution is feasible for the real rows (see :mod:`smug_opt.bridges.integer`).

    The CP-SAT objective has integer coefficients on integer variables, so its values and
    bounds are integers: an absolute gap below 1 is a proof, and with ``relative_gap`` 0
    both gap limits are 0, so OPTIMAL means proven optimal for the lowered model.
    """

    name: ClassVar[str] = "cpsat"
    description: ClassVar[str] = "OR-Tools CP-SAT (rows scaled to integers by powers of two, native max ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("ortools",)
    pip_extra: ClassVar[str] = "cpsat"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True, incumbents=True)
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({
        "coefficient_bits": "integer bridge: bits of the largest scaled term per row (default 40)",
        "activity_bits": "integer bridge: bound on a row's scaled activity (default 53)",
        "grid_bits": "integer bridge: resolution of continuous variables (default 20)",
        "relu": "'max' (native, default) or 'big-m'",
        "phase_rows": "add big-M phase rows beside the native max (bool)",
        **{name: "CP-SAT parameter (SatParameters field)" for name in (
            "presolve_inclusion_work_limit", "cp_model_presolve", "cp_model_probing_level",
            "linearization_level", "symmetry_level", "search_branching", "max_presolve_iterations",
            "optimize_with_core", "use_lns_only", "use_objective_lb_search",
            "add_lp_constraints_lazily", "max_number_of_conflicts", "log_to_stdout")},
    })

    @classmethod
    def warm_up(cls) -> None:
        from ortools.sat.python import cp_model  # noqa: F401  (about 1 s to import)

    @classmethod
    def solver_version(cls) -> str:
        return f"OR-Tools CP-SAT {importlib.metadata.version('ortools')}"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _Lowered:
        from ortools.sat.python import cp_model

        scaling = {k: int(v) for k, v in options.extras.items() if k in _LOWERING_KEYS[:3]}
        form = to_integer(problem, level, relu=str(options.extras.get("relu", DEFAULT_RELU)),
                          **scaling)
        if np.any(form.lb > form.ub):
            j = int(np.flatnonzero(form.lb > form.ub)[0])
            return _Lowered(None, form, f"variable {j} has no grid point within its bounds "
                                        f"at level {level}")
        model = cp_model.CpModel()
        proto = model.proto
        for lo, hi in zip(form.lb.tolist(), form.ub.tolist(), strict=True):
            proto.variables.add().domain.extend([lo, hi])
        for out, pre in form.maxes:
            y = model.get_int_var_from_proto_index(out)
            z = model.get_int_var_from_proto_index(pre)
            model.add_max_equality(y, [z, 0])
            if options.extras.get("phase_rows", False):
                lo, hi = int(form.lb[pre]), int(form.ub[pre])
                a = model.new_bool_var("")
                model.add(y <= z - lo * (1 - a))
                model.add(y <= hi * a)
        C = form.C
        for i, (lo, hi) in enumerate(zip(form.row_lo, form.row_hi, strict=True)):
            if lo is None and hi is None:
                continue
            start, stop = C.indptr[i], C.indptr[i + 1]
            linear = proto.constraints.add().linear
            linear.vars.extend(C.indices[start:stop].tolist())
            linear.coeffs.extend(C.data[start:stop].tolist())
            linear.domain.extend([_INT_MIN if lo is None else lo, _INT_MAX if hi is None else hi])
        if options.start is not None:  # a hint on the binaries; CP-SAT repairs or drops it
            for j in np.flatnonzero(problem.binary).tolist():
                model.add_hint(model.get_int_var_from_proto_index(j), int(options.start[j]))
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
        # OR-Tools 9.15's constraint-inclusion presolve proved a wrong optimum (27 for 26)
        # on a 75-binary strict problem (tests/backends/test_backend_cpsat.py); extras can re-enable it
        params.presolve_inclusion_work_limit = 0
        if options.time_limit is not None:
            params.max_time_in_seconds = float(options.time_limit)
        for key, value in options.extras.items():
            if key in _LOWERING_KEYS:
                continue
            if not hasattr(params, key):
                raise ValueError(f"unknown CP-SAT parameter {key!r} in extras (model keys: "
                                 f"{', '.join(_LOWERING_KEYS)})")
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
        if form.objective.any() and np.isfinite(solver.best_objective_bound) and _bound_set(solver, status):
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


def _bound_set(solver: Any, status: Any) -> bool:
    """Whether the response carries an objective bound CP-SAT computed: a solve stopped before
    it loaded the model answers UNKNOWN with every field at its default, ``best_objective_bound``
    0.0 included (seen at 1-20 ms limits, 0 above optima of -6 and -9762); a model loaded
    counts its variables."""
    from ortools.sat.python import cp_model

    loaded = solver.response_proto.num_booleans + solver.response_proto.num_integers > 0
    return status in (cp_model.OPTIMAL, cp_model.FEASIBLE) or loaded
