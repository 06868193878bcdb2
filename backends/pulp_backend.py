"""CBC through PuLP (``PULP_CBC_CMD``): the MILP lowering of :mod:`smug_opt.bridges.milp`.

PuLP writes the model to an MPS file (13 significant digits) and runs its bundled CBC on
it, in a private temporary directory. Choices made on purpose:

* The status comes from CBC's own solution header, not PuLP's summary (which calls a
  time-limited run with a solution "Optimal"); continuous values CBC leaves without an
  integer solution are dropped. The best bound is parsed from CBC's log (3 decimals, so
  lowered by 1e-3 to stay valid).
* ``ratio`` is the requested relative gap and ``allow`` 0: OPTIMAL means the tree was
  exhausted.
* ``preprocess off``: CBC 2.10's integer preprocessing called feasible SMUG relaxations
  infeasible at PuLP's 13 digits (two such instances are in the conformance suite);
  ``extras={"preprocess": "on"}`` brings it back.
* ``threads`` 1 runs CBC serially (its ``-threads 1`` is a threaded search with one worker,
  which stalled past the time limit on tiny instances); more threads are passed on.
* ``integerTolerance`` 1e-9; ``randomCbcSeed`` only for a seed > 0 (CBC reads 0 as "from
  the clock"); further ``extras`` are CBC options, an unknown one makes the attempt an ERROR.
* Every answer is verified exactly; continuous values come back with ~8 digits, so free
  continuous variables on tight rows may need a higher level to verify.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import re
import sys
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
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

__all__ = ["PulpCbcBackend"]

_INTEGER_TOLERANCE = 1e-9
_PRINT_PRECISION = 1e-12  # PuLP writes numbers with 13 significant digits (relative error 5e-13)
_BOUND_PRINT_SLACK = 1e-3  # CBC prints "Lower bound:" with 3 decimals
_RESULT_LINE = re.compile(r"^Result - (.+?)\s*$", re.MULTILINE)
_LOWER_BOUND = re.compile(r"^Lower bound:\s+(\S+)", re.MULTILINE)
_NO_MATCH = re.compile(r"^No match for (\S+) - \? for list of commands", re.MULTILINE)


@dataclass
class _PulpModel:
    problem: Any  # pulp.LpProblem
    variables: list[Any]  # pulp.LpVariable, one per MILP column
    form: MilpForm
    costs: SolverObjective  # as written to the MPS file (13 significant digits)


class PulpCbcBackend(Backend):
    """CBC 2.10 bundled with PuLP, run as a subprocess on an MPS file; strict rows by
    margin, ReLU by big-M (both from the core's MILP bridge)."""

    name: ClassVar[str] = "pulp-cbc"
    description: ClassVar[str] = "CBC bundled with PuLP (PULP_CBC_CMD, MPS file; margins, big-M ReLU)"
    requires: ClassVar[tuple[str, ...]] = ("pulp",)
    pip_extra: ClassVar[str] = "pulp"
    capabilities: ClassVar[Capabilities] = Capabilities(relu=True)
    levels: ClassVar[int] = 4
    options: ClassVar[Mapping[str, str]] = MappingProxyType({name: "CBC command-line option" for name in (
        "preprocess", "cuts", "heuristics", "presolve", "strong", "trustPseudoCosts", "passCuts",
        "maxNodes", "gomoryCuts", "probingCuts", "cliqueCuts", "knapsackCuts", "mixedCuts",
        "feasibilityPump", "primalTolerance", "dualTolerance")})

    @classmethod
    def solver_version(cls) -> str:
        return f"CBC (bundled with PuLP {importlib.metadata.version('pulp')})"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _PulpModel:
        import pulp

        form = _widened_for_printing(to_milp(problem, level))
        lp = pulp.LpProblem("smug_opt", pulp.LpMinimize)
        kinds = [pulp.LpInteger if i else pulp.LpContinuous for i in form.integer.tolist()]
        xs = [lp.add_variable(f"x{j}", lo, hi, kind) for j, (lo, hi, kind) in
              enumerate(zip(form.col_lb.tolist(), form.col_ub.tolist(), kinds, strict=True))]
        A = form.A
        cols = [xs[k] for k in A.indices.tolist()]
        data = A.data.tolist()
        ptr = A.indptr.tolist()
        rows: dict[str, Any] = {}
        for i, (lo, hi) in enumerate(zip(form.row_lo.tolist(), form.row_hi.tolist(), strict=True)):
            expr = pulp.LpAffineExpression(zip(cols[ptr[i]:ptr[i + 1]], data[ptr[i]:ptr[i + 1]], strict=True))
            if lo == hi:
                rows[f"e{i}"] = pulp.LpConstraint(expr, pulp.LpConstraintEQ, rhs=lo)
                continue
            if lo > -math.inf:
                rows[f"g{i}"] = pulp.LpConstraint(expr, pulp.LpConstraintGE, rhs=lo)
            if hi < math.inf:
                rows[f"l{i}"] = pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=hi)
        lp.extend(rows)
        # every column in the objective (zeros included) so that PuLP writes all of them
        costs = solver_objective(form, written=_as_printed)
        lp.setObjective(pulp.LpAffineExpression(zip(xs, costs.costs.tolist(), strict=True)))
        if options.start is not None:  # written as CBC's mipstart file (warmStart below)
            for j in np.flatnonzero(problem.binary).tolist():
                xs[j].setInitialValue(float(options.start[j]))
        return _PulpModel(lp, xs, form, costs)

    def optimize(self, model: _PulpModel, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        import pulp

        cbc_options = ["preprocess off", f"integerTolerance {_INTEGER_TOLERANCE}"]
        if options.seed > 0:
            cbc_options.append(f"randomCbcSeed {options.seed}")
        cbc_options += [f"{key} {value}" for key, value in options.extras.items()]
        with tempfile.TemporaryDirectory(prefix="smug-opt-pulp-") as tmp:
            log_path = Path(tmp) / "cbc.log"
            with warnings.catch_warnings():  # PULP_CBC_CMD is deprecated for PuLP 4
                warnings.simplefilter("ignore", DeprecationWarning)
                cbc = pulp.PULP_CBC_CMD(
                    msg=False, timeLimit=options.time_limit,
                    threads=options.threads if options.threads > 1 else None,
                    gapRel=options.relative_gap, gapAbs=0.0, timeMode="elapsed",
                    logPath=str(log_path), options=cbc_options,
                    warmStart=options.start is not None,
                )
            cbc.tmpDir = tmp
            try:
                model.problem.solve(cbc)
            except pulp.PulpSolverError as exc:
                return _after_crash(model, cbc.path, cbc_options, Path(tmp), exc)
            log = log_path.read_text(errors="replace")
        if options.verbose:
            sys.stderr.write(log)
        unknown = _NO_MATCH.findall(log)
        if unknown:  # CBC ignores what it does not know; only extras can be unknown
            return RawResult(Status.ERROR, solver_status="unknown CBC option",
                             message=f"CBC did not recognise {', '.join(unknown)} from extras "
                                     f"{dict(options.extras)!r} (its options: `cbc -?`)")
        return _raw_result(pulp, model, log, options)


def _as_printed(values: np.ndarray) -> np.ndarray:
    """The numbers PuLP's MPS writer puts in the file (``% .12e``: 13 significant digits):
    objective costs change by that much, and the bound accounts for it."""
    return np.array([float(f"{v:.12e}") for v in values.tolist()])


def _widened_for_printing(form: MilpForm) -> MilpForm:
    """Row bounds moved by what PuLP's decimal model file can lose: it prints every number
    to 13 significant digits, so a row's activity and bounds may each shift by a relative
    ``_PRINT_PRECISION``. Outward at level 0 (still a relaxation, so INFEASIBLE stays a
    proof), inward above (still a restriction)."""
    reach = np.maximum(np.abs(form.col_lb), np.abs(form.col_ub))
    activity = abs(form.A) @ reach
    slack = _PRINT_PRECISION * (activity + np.where(np.isfinite(form.row_lo), np.abs(form.row_lo), 0.0)
                                + np.where(np.isfinite(form.row_hi), np.abs(form.row_hi), 0.0))
    direction = -1.0 if form.level == 0 else 1.0
    return dataclasses.replace(form, row_lo=form.row_lo + direction * slack,
                               row_hi=form.row_hi - direction * slack)


def _after_crash(model: _PulpModel, cbc_path: str, cbc_options: list[str], tmp: Path,
                 exc: Exception) -> RawResult:
    """CBC exited abnormally under PuLP. PuLP always asks for a solution file, and CBC 2.10
    segfaults writing one after its bound tightening proved the model infeasible: rerun it
    on the same model without the solution file and read its verdict from the log."""
    import subprocess

    mps = tmp / "rerun.mps"
    model.problem.writeMPS(str(mps))
    args = [cbc_path, str(mps)]
    for option in cbc_options:
        key, _, value = option.partition(" ")
        args += [f"-{key}", *([value] if value else [])]
    args.append("-branch")
    run = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    if "Problem is infeasible" in run.stdout:
        return RawResult(Status.INFEASIBLE, solver_status="infeasible (CBC rerun without solution file)")
    tail = " | ".join(run.stdout.strip().splitlines()[-3:])
    return RawResult(Status.ERROR, solver_status="PulpSolverError",
                     message=f"CBC (via PuLP) failed: {exc}; rerun: {tail}")


def _raw_result(pulp: Any, model: _PulpModel, log: str, options: SolveOptions) -> RawResult:
    """Map CBC's solution status (and log) to a RawResult."""
    found = _RESULT_LINE.findall(log)
    result = found[-1] if found else "no result line in CBC's log"
    bound_match = _LOWER_BOUND.search(log)
    bound = None
    if bound_match is not None:
        value = float(bound_match.group(1))
        if math.isfinite(value):
            bound = model.costs.problem_bound(value - _BOUND_PRINT_SLACK - 1e-9 * abs(value))
    sol_status = model.problem.sol_status
    lp_status = model.problem.status
    solver_status = f"{result} (PuLP status {lp_status}, solution status {sol_status})"
    if lp_status == pulp.LpStatusInfeasible:
        return RawResult(Status.INFEASIBLE, solver_status=solver_status)
    if sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        values = np.array([v.varValue for v in model.variables], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            return RawResult(Status.ERROR, solver_status=solver_status,
                             message="CBC's solution file lacks values for some columns")
        x = model.form.problem_values(values)
        objective = float(model.form.objective @ values)
        if sol_status == pulp.LpSolutionOptimal:
            if bound is None and options.relative_gap == 0:  # CBC's optimum of the costs it read
                bound = model.costs.problem_bound(float(model.costs.costs @ values))
            return RawResult(Status.OPTIMAL, x, objective, bound, solver_status)
        return RawResult(Status.FEASIBLE, x, objective, bound, solver_status)
    if lp_status == pulp.LpStatusNotSolved and result.startswith("Stopped on time"):
        return RawResult(Status.NO_SOLUTION, bound=bound, solver_status=solver_status)
    return RawResult(Status.ERROR, bound=bound, solver_status=solver_status,
                     message=f"CBC (via PuLP) ended without a usable answer: {result}")
