"""Planted bugs: the scipy backend with one careless mistake each. The conformance suite
must fail each of them on a named check (tests/test_conformance_planted.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from smug_opt import Problem, RawResult, SolveOptions, Status
from smug_opt.backend import IncumbentCallback
from smug_opt.bridges import MilpForm, to_milp
from smug_opt_scipy_backend import ScipyMilpBackend

__all__ = ["NoTimeLimit", "NonStrict", "OptimalWithoutBound", "StatusMap"]


class NonStrict(ScipyMilpBackend):
    """Handles strict ``>`` as ``>=`` at every level (never tightens)."""

    name: ClassVar[str] = "planted-nonstrict"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> MilpForm:
        return to_milp(problem, 0)


class NoTimeLimit(ScipyMilpBackend):
    """Never passes the time limit to the solver (the core has to kill it)."""

    name: ClassVar[str] = "planted-no-time-limit"

    def optimize(self, model: MilpForm, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        from dataclasses import replace

        return super().optimize(model, problem, replace(options, time_limit=None), on_incumbent)


class OptimalWithoutBound(ScipyMilpBackend):
    """Says OPTIMAL, with no bound, whenever it has a solution, time-outs included."""

    name: ClassVar[str] = "planted-optimal-without-bound"

    def result(self, form: MilpForm, res: Any) -> RawResult:
        raw = super().result(form, res)
        if raw.x is not None:
            return RawResult(Status.OPTIMAL, raw.x, raw.objective, None, raw.solver_status)
        return raw


class StatusMap(ScipyMilpBackend):
    """Maps every ending that is neither optimal nor a limit to INFEASIBLE."""

    name: ClassVar[str] = "planted-status-map"

    def result(self, form: MilpForm, res: Any) -> RawResult:
        if res.status in (0, 1):
            return super().result(form, res)
        return RawResult(Status.INFEASIBLE, solver_status=f"{res.status}: {res.message}")
