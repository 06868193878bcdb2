"""CBC through python-mip (CBC as a shared library, cbcbox), on the MILP lowering of
:mod:`smug_opt.bridges.milp`.

What it sets, and why:

* Rows are added with CBC's C function ``Cbc_addRow`` on python-mip's cffi handle,
  straight from the CSR arrays (python-mip's ``LinExpr`` builds a Python dict per row:
  4.1 s against 0.17 s for a dense 3,000 x 3,000 problem). Rows without coefficients are
  never passed (an all-empty model crashes cbcbox's CBC): a satisfied one is dropped, a
  violated one makes the lowered model infeasible without running CBC.
* ``max_mip_gap`` = the requested relative gap, ``max_mip_gap_abs`` = 0: OPTIMAL means
  CBC exhausted its tree.
* ``integer_tol`` 1e-9 and ``infeas_tol`` 1e-7 (CBC's own primal tolerance; python-mip's
  1e-6 defaults are looser than the level-1 strict-row margins allow for).
* ``threads`` 1 runs CBC serially, which is what one thread means (CBC's ``threads 1``
  starts its threaded search with one worker).
* ``preprocess`` 0: with preprocessing (or its cuts) CBC called the relaxation of a
  narrow strict window (``a·x > b``, ``a·x < b + 3.7e-9``) infeasible; without it, it
  finds the optimum, at the same speed on MNIST first layers. ``extras={"preprocess": -1}``
  restores python-mip's automatic setting.
* No incumbents are streamed: python-mip 2.0 never calls an ``IncumbentUpdater``.
* ``mip`` is imported only inside :meth:`lower`/:meth:`optimize`: python-mip's CBC and
  OR-Tools cannot share a process, and the core runs each backend in its own worker.
"""

from __future__ import annotations

import importlib.metadata
import math
import sys
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
from smug_opt.bridges.milp import SolverObjective, solver_objective
from smug_opt.ir import Problem

__all__ = ["MipCbcBackend"]

_INTEGER_TOLERANCE = 1e-9
_FEASIBILITY_TOLERANCE = 1e-7
_CBC_NO_BOUND = sys.float_info.max  # CBC's COIN_DBL_MAX: stopped before it had a bound


@dataclass
class _MipModel:
    model: Any  # mip.Model
    variables: list[Any]  # mip.Var, one per MILP column
    form: MilpForm
    violated_empty_row: int | None  # an empty row whose range excludes 0
    costs: SolverObjective


class MipCbcBackend(Backend):
    """CBC through python-mip's C interface; strict rows by margin, ReLU by big-M (both
    from the core's MILP bridge)."""

    name: ClassVar[str] = "mip-cbc"
    description: ClassVar[str] = "CBC via python-mip (shared library; margins, big-M ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("mip",)
    pip_extra: ClassVar[str] = "mip"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True)
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({name: "python-mip Model setting" for name in (
        "cuts", "clique", "preprocess", "lp_method", "emphasis", "cut_passes", "max_nodes",
        "max_solutions", "opt_tol", "integer_tol", "infeas_tol", "pump_passes", "round_int_vars",
        "sol_pool_size")})

    @classmethod
    def solver_version(cls) -> str:
        try:
            box = f", cbcbox {importlib.metadata.version('cbcbox')}"
        except importlib.metadata.PackageNotFoundError:
            box = ""
        return f"CBC (python-mip {importlib.metadata.version('mip')}{box})"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _MipModel:
        import mip
        from mip.cbc import cbclib, ffi

        form = to_milp(problem, level)
        costs = solver_objective(form)
        model = mip.Model(sense=mip.MINIMIZE, solver_name=mip.CBC)
        model.verbose = int(options.verbose)
        xs = [model.add_var(lb=lo, ub=hi, obj=c, var_type=mip.INTEGER if integer else mip.CONTINUOUS)
              for lo, hi, c, integer in zip(form.col_lb.tolist(), form.col_ub.tolist(),
                                            costs.costs.tolist(), form.integer.tolist(),
                                            strict=True)]
        A = form.A
        indices = np.ascontiguousarray(A.indices, dtype=np.intc)
        data = np.ascontiguousarray(A.data, dtype=np.float64)
        ptr = A.indptr.tolist()
        cols = ffi.cast("int *", ffi.from_buffer(indices))
        coefs = ffi.cast("double *", ffi.from_buffer(data))
        handle = model.solver._model
        violated = None
        for i, (lo, hi) in enumerate(zip(form.row_lo.tolist(), form.row_hi.tolist(), strict=True)):
            start, nnz = ptr[i], ptr[i + 1] - ptr[i]
            if nnz == 0:
                violated = i if violated is None and not lo <= 0.0 <= hi else violated
                continue
            row_cols, row_coefs = cols + start, coefs + start
            if lo == hi:
                cbclib.Cbc_addRow(handle, b"", nnz, row_cols, row_coefs, b"E", lo)
                continue
            if lo > -math.inf:
                cbclib.Cbc_addRow(handle, b"", nnz, row_cols, row_coefs, b"G", lo)
            if hi < math.inf:
                cbclib.Cbc_addRow(handle, b"", nnz, row_cols, row_coefs, b"L", hi)
        model.constrs.update_constrs(model.solver.num_rows())
        return _MipModel(model, xs, form, violated, costs)

    def optimize(self, model: _MipModel, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        import mip

        if model.violated_empty_row is not None:
            return RawResult(Status.INFEASIBLE, solver_status="empty row excludes 0 (not run)")
        m = model.model
        m.threads = options.threads if options.threads > 1 else 0  # 0: serial CBC
        m.seed = options.seed
        m.max_mip_gap = options.relative_gap
        m.max_mip_gap_abs = 0.0
        m.integer_tol = _INTEGER_TOLERANCE
        m.infeas_tol = _FEASIBILITY_TOLERANCE
        m.preprocess = 0  # see the module docstring: CBC's preprocessing proved a wrong INFEASIBLE
        for key, value in options.extras.items():
            if not isinstance(getattr(type(m), str(key), None), property):
                raise ValueError(f"extras: {key!r} is not a python-mip Model setting")
            setattr(m, str(key), value)
        if options.start is not None:  # CBC completes and checks it (binaries only here)
            x = options.start
            m.start = [(model.variables[j], float(x[j])) for j in np.flatnonzero(problem.binary)]
        limit = mip.INF if options.time_limit is None else float(options.time_limit)
        status = m.optimize(max_seconds=limit)
        name = f"OptimizationStatus.{status.name}"
        bound = m.objective_bound if status in (mip.OptimizationStatus.OPTIMAL,
                                                mip.OptimizationStatus.FEASIBLE,
                                                mip.OptimizationStatus.NO_SOLUTION_FOUND) else None
        bound = (model.costs.problem_bound(float(bound))
                 if bound is not None and math.isfinite(bound) and abs(bound) < _CBC_NO_BOUND
                 else None)
        if status in (mip.OptimizationStatus.OPTIMAL, mip.OptimizationStatus.FEASIBLE):
            values = np.array([v.x for v in model.variables], dtype=np.float64)
            if not np.all(np.isfinite(values)):
                return RawResult(Status.ERROR, solver_status=name,
                                 message="CBC reported a solution without finite values")
            x = model.form.problem_values(values)
            objective = model.costs.unscale(float(m.objective_value))
            kind = Status.OPTIMAL if status is mip.OptimizationStatus.OPTIMAL else Status.FEASIBLE
            return RawResult(kind, x, objective, bound, name)
        if status in (mip.OptimizationStatus.INFEASIBLE, mip.OptimizationStatus.INT_INFEASIBLE):
            return RawResult(Status.INFEASIBLE, solver_status=name)
        if status is mip.OptimizationStatus.NO_SOLUTION_FOUND:
            return RawResult(Status.NO_SOLUTION, bound=bound, solver_status=name)
        return RawResult(Status.ERROR, bound=bound, solver_status=name,
                         message=f"CBC (python-mip) ended with {name}")
