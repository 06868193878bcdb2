"""A backend that answers what its subclass scripts, whatever it is asked: the base of the
lying backends with which tests check what the core believes of a claim."""

from __future__ import annotations

from typing import Any, ClassVar

from smug_opt import Backend, Problem, RawResult, SolveOptions
from smug_opt.backend import IncumbentCallback


class ScriptedBackend(Backend):
    """Answers with ``answer(problem)`` whatever it is asked."""

    description: ClassVar[str] = "test double: a scripted answer"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> Any:
        return None

    def optimize(self, model: Any, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        return self.answer(problem)

    def answer(self, problem: Problem) -> RawResult:
        raise NotImplementedError
