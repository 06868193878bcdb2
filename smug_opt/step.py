"""The one protocol every step of a solve follows: (problem, choice, deadline, start) →
result. :mod:`smug_opt.strategies` has the steps; :func:`smug_opt.solve` composes them;
a step that needs another (strengthening its parts, certification its questions) is
given it when it is built, so no step calls back into the one that called it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from smug_opt.backend_choice import BackendChoice
    from smug_opt.deadline import Deadline
    from smug_opt.ir import Problem
    from smug_opt.result import SolveResult

__all__ = ["Step"]


class Step(Protocol):
    """Solves ``problem`` on ``choice`` by ``deadline`` from ``start`` (one value per
    variable, verified first; None: no start) and returns a verified result."""

    def __call__(self, problem: Problem, choice: BackendChoice, deadline: Deadline,
                 start: np.ndarray | None) -> SolveResult: ...
