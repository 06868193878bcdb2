"""python-sat's RC2 (core-guided MaxSAT) on 0/1 problems encoded exactly as CNF."""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
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
from smug_opt.exact import float_down
from smug_opt.ir import Problem, Sense

from .pb_cnf import Encoder, at_least_rows, integer_weights

__all__ = ["DEFAULTS", "Rc2Backend"]

DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "solver": "cd19", "adapt": True, "exhaust": True, "minz": True, "trim": 5})
"""RC2's settings: CaDiCaL 1.9.5 with its core heuristics on (AM1 detection, core exhaustion,
minimisation, trimming). With them RC2 proved the large part of DenseNet121's bias-free stem
(optimum 558) in 23.5-33.6 CPU s where z3's cores stall at 551; Glucose 4 did not finish it
in 880 s (benchmarks/bias_free_stems/README.md, "DenseNet121's stem")."""

FIRST_CHUNK = 100
"""Conflicts of the first SAT call: CaDiCaL cannot be interrupted through python-sat, so every
call of the MaxSAT loop runs in chunks of conflicts, the deadline checked between them (2,000
conflicts took 3 s on market split 6x50's 400,000 clauses; chunks grow to take CHUNK_SECONDS)."""

HARD_CHUNK = 20_000
"""Clauses added to the SAT oracle between two looks at the clock."""

CHUNK_SECONDS = 0.1
"""What a chunk should take: its size is rescaled after each one that ran out."""

MINIMIZE_CONFLICTS = 1_000
"""RC2's own budget for each call of its core minimisation (a call that runs out keeps the core)."""

INCUMBENT_SECONDS = 0.5
"""Least time between two reads of a model found inside the loop (core exhaustion's
satisfiable calls: each model meets every row, so it is a solution)."""

_SENSES = {Sense.LE: "<=", Sense.GE: ">=", Sense.EQ: "==", Sense.LT: "<", Sense.GT: ">"}


@dataclass(frozen=True)
class _Lowered:
    """The weighted CNF and how to read its cost back, or why there is none."""

    formula: Any = None  # pysat.formula.WCNF: the soft clauses, the variables counted in ``nv``
    hard: Sequence[list[int]] = ()  # the rows' clauses, loaded into RC2's oracle in chunks
    weights: tuple[int, ...] = ()  # the objective times ``scale``, per variable
    scale: int = 1
    offset: Fraction = Fraction(0)  # the objective is offset + cost / scale
    infeasible: str = ""  # a row no 0/1 assignment meets
    skip: str = ""  # no model at this level, or no time left to finish it


class _TimeUp(Exception):
    """The deadline passed inside RC2."""


class Rc2Backend(Backend):
    """RC2 (OLL with core exhaustion, minimisation and trimming; Ignatiev, Morgado,
    Marques-Silva, JSAT 2019) on python-sat's SAT solvers, CaDiCaL 1.9.5 by default.

    Binary-only problems: every row is written exactly as clauses
    (:mod:`smug_opt_backends.pb_cnf`: floats read as the rationals they are, scaled to Python
    integers, strict rows as ``>= K + 1``), the objective as soft unit clauses with its
    exact integer weights; so OPTIMAL, INFEASIBLE and the bound are exact (integer
    arithmetic throughout). A problem with continuous variables or ReLUs is refused when
    lowered (an ERROR naming them); a row whose exact encoding passes
    :data:`~smug_opt_backends.pb_cnf.MAX_NODES` BDD nodes is refused the same way.

    The time limit is kept by running every SAT call in chunks of conflicts and checking
    the deadline between them (and between the rows while encoding); at the limit the
    result is FEASIBLE with the best model RC2's core exhaustion met on the way, or
    NO_SOLUTION, and RC2's cost so far as the bound (valid: each core found raises it by
    what it proves). Starts are ignored (the search goes from below); one thread; the seed
    is not used.
    """

    name: ClassVar[str] = "rc2"
    description: ClassVar[str] = "python-sat RC2 MaxSAT (CaDiCaL): 0/1 problems, rows as exact CNF"
    requires: ClassVar[tuple[str, ...]] = ("pysat",)
    pip_extra: ClassVar[str] = "maxsat"
    capabilities: ClassVar[Capabilities] = Capabilities(strict_inequalities=True, incumbents=True,
                                                        exact=True, binary_only=True)
    options: ClassVar[Mapping[str, str]] = MappingProxyType({
        "solver": "python-sat SAT solver name (default 'cd19': CaDiCaL 1.9.5; 'g4': Glucose 4)",
        "adapt": "detect and use at-most-one groups of soft clauses (default True)",
        "exhaust": "core exhaustion (default True)",
        "minz": "core minimisation, 1,000 conflicts a call (default True)",
        "trim": "times a core is trimmed (default 5)",
    })
    known_failures: ClassVar[Mapping[str, str]] = MappingProxyType({
        "check_timeout_with_incumbent": "0/1 problems only: the instance has continuous variables",
        "check_strict_row_binds_continuous": "0/1 problems only: the instances have continuous variables",
    })

    @classmethod
    def warm_up(cls) -> None:
        from pysat.examples.rc2 import RC2  # noqa: F401
        from pysat.solvers import Solver

        with Solver(name=DEFAULTS["solver"], bootstrap_with=[[1]]) as s:
            s.solve()

    @classmethod
    def solver_version(cls) -> str:
        return f"RC2 (python-sat {importlib.metadata.version('python-sat')})"

    def lower(self, problem: Problem, options: SolveOptions, level: int) -> _Lowered:
        from pysat.formula import WCNF

        if level > 0:
            return _Lowered(skip=f"the CNF is exact: there is no level {level}")
        _refuse_unless_binary(problem)
        ends = None if options.time_limit is None else time.monotonic() + options.time_limit
        n = problem.num_vars
        encoder = Encoder(n + 1, expired=lambda: ends is not None and time.monotonic() > ends)
        A = problem.A
        try:
            for i in range(problem.num_rows):
                cols, coefs = A.indices[A.indptr[i]:A.indptr[i + 1]], A.data[A.indptr[i]:A.indptr[i + 1]]
                sense = _SENSES[Sense(int(problem.senses[i]))]
                for lits, weights, bound in at_least_rows(cols.tolist(), coefs.tolist(), sense,
                                                          float(problem.rhs[i])):
                    encoder.add(lits, weights, bound, i)
                    if encoder.clauses and not encoder.clauses[-1]:
                        return _Lowered(infeasible=f"row {i} has no 0/1 solution")
        except TimeoutError as exc:
            return _Lowered(skip=str(exc))
        weights, scale = integer_weights(problem.objective.tolist())
        formula = WCNF()  # the hard clauses stay apart: WCNF.extend takes 1.2 s on 400,000 of them
        formula.nv = encoder.top
        offset = Fraction(0)
        for j, w in enumerate(weights):
            if w:  # c·x = |c|·(1 - x) + c for a negative cost
                formula.append([-(j + 1)] if w > 0 else [j + 1], weight=abs(w))
                offset += Fraction(min(w, 0), scale)
        return _Lowered(formula, encoder.clauses, tuple(weights), scale, offset)

    def optimize(self, model: _Lowered, problem: Problem, options: SolveOptions,
                 on_incumbent: IncumbentCallback) -> RawResult:
        if model.skip:
            return RawResult(Status.NO_SOLUTION, solver_status="not solved", message=model.skip)
        if model.infeasible:
            return RawResult(Status.INFEASIBLE, solver_status="empty clause", message=model.infeasible)
        settings = {**DEFAULTS, **options.extras}
        ends = None if options.time_limit is None else time.monotonic() + options.time_limit
        rc2 = _timed_rc2(model, settings, ends, problem.num_vars, on_incumbent)
        try:
            try:
                rc2.load_hard(model.hard)
                found = rc2.compute()
            except _TimeUp:
                best = rc2.best
                x = None if best is None else best[1]
                return RawResult(Status.FEASIBLE if x is not None else Status.NO_SOLUTION, x,
                                 None if x is None else float(problem.objective @ x),
                                 _bound(model, rc2.cost), "time limit")
            if found is None:
                return RawResult(Status.INFEASIBLE, solver_status="hard clauses unsatisfiable")
            x = _values(found, problem.num_vars)
            return RawResult(Status.OPTIMAL, x, float(problem.objective @ x), _bound(model, rc2.cost),
                             "optimum")
        finally:
            rc2.delete()


def _refuse_unless_binary(problem: Problem) -> None:
    """Raise ValueError naming what a MaxSAT encoding over 0/1 variables cannot hold."""
    continuous = int(problem.num_vars - problem.binary.sum())
    if continuous:
        relus = f" and {problem.num_relus} ReLU(s)" if problem.num_relus else ""
        raise ValueError(f"rc2 solves 0/1 problems only (MaxSAT over binaries); this one has "
                         f"{continuous} continuous variable(s){relus}: use z3 (exact), cpsat or a "
                         f"MILP backend")


def _bound(model: _Lowered, cost: int) -> float:
    """RC2's cost as a bound on the problem's objective, rounded down."""
    return float_down(model.offset + Fraction(cost, model.scale))


def _values(literals: list[int], n: int) -> np.ndarray:
    """The 0/1 values of the problem's ``n`` variables in a model (literals of variables
    1..n and beyond)."""
    x = np.zeros(n)
    for lit in literals:
        if 0 < lit <= n:
            x[lit - 1] = 1.0
    return x


def _timed_rc2(model: _Lowered, settings: Mapping[str, Any], ends: float | None, n: int,
               on_incumbent: IncumbentCallback) -> Any:
    """An RC2 whose SAT calls keep the deadline ``ends`` (raising :class:`_TimeUp`) and
    which streams the solutions its satisfiable calls meet."""
    from pysat.examples.rc2 import RC2

    class TimedRC2(RC2):  # type: ignore[misc]
        best: tuple[int, np.ndarray] | None = None

        def __init__(self) -> None:
            super().__init__(model.formula, solver=str(settings["solver"]),
                             adapt=bool(settings["adapt"]), exhaust=bool(settings["exhaust"]),
                             minz=bool(settings["minz"]), trim=int(settings["trim"]))
            self.chunk = FIRST_CHUNK
            self.minimizing = False
            self.read_at = time.monotonic()

        def load_hard(self, clauses: Sequence[list[int]]) -> None:
            """Add the rows' clauses to the oracle, the deadline checked between chunks
            (loading 400,000 clauses takes 0.35 s, more on a loaded machine)."""
            for start in range(0, len(clauses), HARD_CHUNK):
                if ends is not None and time.monotonic() > ends:
                    raise _TimeUp
                self.oracle.append_formula(clauses[start:start + HARD_CHUNK])

        def adapt_am1(self) -> None:
            """RC2's at-most-one detection (one propagation per soft literal: 3.6 s on
            market split 6x50), the deadline checked before each propagation."""
            propagate = self.oracle.propagate

            def checked(*args: Any, **kwargs: Any) -> Any:
                if ends is not None and time.monotonic() > ends:
                    raise _TimeUp
                return propagate(*args, **kwargs)

            self.oracle.propagate = checked
            try:
                super().adapt_am1()
            finally:
                self.oracle.propagate = propagate

        def minimize_core(self) -> None:
            self.minimizing = True
            try:
                super().minimize_core()
            finally:
                self.minimizing = False

        def _call_oracle(self, assumptions: Any = (), expect_interrupt: bool = False) -> bool | None:
            while True:
                if ends is not None and time.monotonic() > ends:
                    raise _TimeUp
                self.oracle.conf_budget(MINIMIZE_CONFLICTS if self.minimizing else self.chunk)
                began = time.monotonic()
                answer = self.oracle.solve_limited(assumptions=list(assumptions))
                if answer is not None or self.minimizing:
                    if answer:
                        self._read()
                    return answer  # type: ignore[no-any-return]
                spent = max(time.monotonic() - began, 1e-3)
                self.chunk = int(min(max(self.chunk * CHUNK_SECONDS / spent, 100), 10_000_000))

        def _read(self) -> None:
            """Keep the model of a satisfiable call when it is a better solution."""
            now = time.monotonic()
            if now - self.read_at < INCUMBENT_SECONDS:
                return
            self.read_at = now
            x = _values(self.oracle.get_model() or [], n)
            cost = sum(w for j, w in enumerate(model.weights) if w and x[j])  # objective · scale
            if self.best is None or cost < self.best[0]:
                self.best = (cost, x)
                on_incumbent(x, float(Fraction(cost, model.scale)))

    return TimedRC2()
