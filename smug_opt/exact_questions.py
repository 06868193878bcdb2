"""Certification's questions to an exact backend: which backend is asked (the one that
declares what :data:`EXACT_CAPABILITIES` lists), with what options, and the question
"is there a solution with ``c·x < v``" written exactly (:func:`objective_below`).
:mod:`smug_opt.certify` decides what to ask and what the answers prove."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from smug_opt.backend import Backend, SolveOptions, Status
from smug_opt.backend_choice import BackendChoice
from smug_opt.deadline import Deadline
from smug_opt.ir import Problem, Sense, VarKind
from smug_opt.step import Step
from smug_opt.verification import Verification, verify

__all__ = ["EXACT_CAPABILITIES", "ExactAnswer", "ExactQuestions", "exact_backend", "exact_options",
           "objective_below"]

EXACT_CAPABILITIES = ("exact", "relu", "strict_inequalities")
"""What the backend asked certification's questions declares: exact answers, on ReLUs
and on the strict row ``c·x < v`` that every question adds."""


def exact_backend() -> type[Backend]:
    """The backend that answers certification's questions: the first usable one, by name,
    declaring every capability in :data:`EXACT_CAPABILITIES` (so a new one is found by
    what it declares); :class:`~smug_opt.registry.BackendUnavailableError` when none is."""
    from smug_opt.registry import backend_declaring

    return backend_declaring("certifying a floating-point claim", *EXACT_CAPABILITIES)


def exact_options(options: SolveOptions) -> SolveOptions:
    """``options`` with the extras under which :func:`exact_backend` answers exactly
    (:attr:`~smug_opt.backend.Backend.exact_extras`); no extras when none is installed."""
    from smug_opt.registry import BackendUnavailableError

    try:
        extras = dict(exact_backend().exact_extras)
    except BackendUnavailableError:
        extras = {}
    return replace(options, extras=extras)


@dataclass(frozen=True)
class ExactAnswer:
    """What the exact backend said: ``none_below`` (exact unsat), or a verified ``found`` solution, or
    ``why`` neither; ``bound`` is its exact lower bound rounded down, when it minimised."""

    none_below: bool = False
    found: Verification | None = None
    better_exists: bool = False  # it found one, but its float64 rounding fails verification
    bound: float | None = None
    why: str = ""


class ExactQuestions:
    """Questions to :func:`exact_backend`, each in its own worker, within the deadline."""

    def __init__(self, problem: Problem, ask: Step, deadline: Deadline) -> None:
        from smug_opt.registry import BackendUnavailableError

        self.problem, self.ask, self.deadline = problem, ask, deadline
        try:
            self.backend: type[Backend] | None = exact_backend()
            self._missing = ""
        except BackendUnavailableError as error:
            self.backend, self._missing = None, str(error)
        self.name = "the exact backend" if self.backend is None else self.backend.name

    def available(self) -> bool:
        return self.backend is not None

    def missing(self) -> str:
        """Why no exact backend can be asked (empty when one can)."""
        return self._missing

    def below(self, value: Fraction | None) -> ExactAnswer:
        """Is there a solution with objective ``< value`` (None: any solution)?"""
        return self._ask(value, minimise=False)

    def minimum(self) -> ExactAnswer:
        """A minimiser and the exact minimum (rounded down), by the exact backend's minimisation."""
        return self._ask(None, minimise=True)

    def _ask(self, value: Fraction | None, *, minimise: bool) -> ExactAnswer:
        p = self.problem
        question = objective_below(p, value, keep_objective=minimise)
        if question is None:
            return ExactAnswer(why=f"the objective value {value} cannot be written as a sum of float64 terms")
        if self.deadline.passed(0.05):
            return ExactAnswer(why="the time limit was reached")
        answer = self.ask(question, BackendChoice.parse(self.name, check=False), self.deadline, None)
        if answer.status is Status.INFEASIBLE and answer.proof == "exact":
            return ExactAnswer(none_below=True)
        bound = answer.bound if minimise else None
        if answer.x is None:
            return ExactAnswer(better_exists=answer.verified is False, bound=bound,
                           why=answer.message or f"{self.name} said {answer.status.name}")
        found = verify(p, answer.x[:p.num_vars])
        if not found.ok:  # cannot happen for a verified answer; never trust it
            return ExactAnswer(why="its solution failed verification against the problem")
        return ExactAnswer(found=found, bound=bound)


def objective_below(problem: Problem, value: Fraction | None, *,
                    keep_objective: bool = False) -> Problem | None:
    """``problem`` plus the row ``c·x < value`` with ``value`` exact (None: no row), and a
    zero objective unless ``keep_objective``. A value that is no float64 is written as
    ``f0`` plus fixed continuous variables holding ``f1, f2, ...`` (its exact expansion
    into float64 terms), which are appended after the problem's variables; None when no
    such expansion exists (a part below the subnormal range)."""
    p = replace(problem, metadata={})
    if not keep_objective:
        p = replace(p, objective=np.zeros(problem.num_vars))
    if value is None:
        return p
    terms = _float_expansion(value)
    if terms is None:
        return None
    head, rest = terms[0], np.array(terms[1:])
    k = rest.size
    if k:
        zeros = sp.csr_matrix((p.num_rows, k))
        p = replace(p, kinds=np.concatenate([p.kinds, np.full(k, VarKind.CONTINUOUS, dtype=p.kinds.dtype)]),
                    lb=np.concatenate([p.lb, rest]), ub=np.concatenate([p.ub, rest]),
                    A=sp.hstack([p.A, zeros], format="csr"),
                    objective=np.concatenate([p.objective, np.zeros(k)]),
                    relu_in=sp.hstack([p.relu_in, sp.csr_matrix((p.num_relus, k))], format="csr"))
    row = np.concatenate([problem.objective, -np.ones(k)])
    return p.with_constraints(row[None, :], [Sense.LT], [head])


def _float_expansion(value: Fraction, max_terms: int = 64) -> list[float] | None:
    """Floats whose exact sum is ``value``, largest first; None when there are none."""
    terms: list[float] = []
    rest = value
    while rest != 0 or not terms:
        f = float(rest) if rest != 0 else 0.0
        if (rest != 0 and f == 0.0) or not math.isfinite(f) or len(terms) == max_terms:
            return None
        terms.append(f)
        rest -= Fraction(f)
    return terms
