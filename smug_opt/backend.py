"""The Backend contract: what a solver plug-in declares and implements, and what a solve returns.

A backend is a plain class registered under the entry-point group ``smug_opt.backends``.
It declares metadata and capabilities as class variables, lowers a :class:`Problem` to its
solver's own model at a *tightening level*, and runs it. Everything solver-neutral
(time-limit enforcement, process isolation, exact verification, retries) is the core's.

Tightening levels: level 0 is a relaxation of the problem (strict rows as non-strict,
outward rounding): its proven optimum is a valid lower bound. Levels 1, 2, ... are
increasingly conservative restrictions (margins on strict rows, inward rounding) that
trade a little optimality for solutions that survive exact verification. A backend that is
exact by construction declares ``levels = 1`` and solves the problem itself at level 0.
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

import numpy as np
import scipy.sparse as sp

from smug_opt.errors import ParameterError
from smug_opt.ir import Problem

__all__ = [
    "Backend",
    "Capabilities",
    "Capability",
    "IncumbentCallback",
    "LpSolver",
    "RawResult",
    "SolveOptions",
    "Status",
]


@enum.unique
class Status(enum.Enum):
    """One status vocabulary for every solver."""

    OPTIMAL = "optimal"  # proven optimal, solution verified
    FEASIBLE = "feasible"  # a verified solution, optimality not proven (limit hit)
    INFEASIBLE = "infeasible"  # proven to have no solution
    NO_SOLUTION = "no_solution"  # limit hit (or answers rejected) with no verified solution
    ERROR = "error"  # the solver failed; the message says how

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass(frozen=True)
class Capabilities:
    """What a backend honours natively. Every problem reaches :meth:`Backend.lower` as it
    is; a backend bridges the rest itself (:func:`smug_opt.bridges.to_milp`)."""

    strict_inequalities: bool = False
    relu: bool = False
    incumbents: bool = False  # reports improving solutions while it runs
    exact: bool = False  # solutions are exact by construction (still verified)
    lp: bool = False  # provides an LP solver for the core's bound LPs (Backend.lp_solver)
    binary_only: bool = False  # takes only problems whose every variable is binary (refuses others)

    def declares(self, capability: Capability) -> bool:
        """Whether the flag ``capability`` names is set."""
        return bool(getattr(self, Capability(capability).value))


@enum.unique
class Capability(str, enum.Enum):
    """The name of one :class:`Capabilities` flag (what a conformance check needs, say). A
    ``str`` enum (compares equal to the field's name)."""

    STRICT_INEQUALITIES = "strict_inequalities"
    RELU = "relu"
    INCUMBENTS = "incumbents"
    EXACT = "exact"
    LP = "lp"
    BINARY_ONLY = "binary_only"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SolveOptions:
    """How to run a solve. ``time_limit`` None means no limit; ``relative_gap`` 0 asks
    for proven optimality; ``extras`` are backend-specific settings passed through.

    ``start`` is a solution the core has already verified exactly (one value per problem
    variable; None: no start). A backend may hand it to its solver as a starting
    solution or hint (which also gives the solver an objective cutoff) or ignore it: the
    core keeps it as the incumbent either way."""

    time_limit: float | None = None
    threads: int = 1
    seed: int = 0
    relative_gap: float = 0.0
    verbose: bool = False
    extras: Mapping[str, Any] = field(default_factory=dict)
    start: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.time_limit is not None and not self.time_limit > 0:
            raise ParameterError("time_limit", f"must be positive seconds or None, got {self.time_limit!r}")
        if self.threads < 1:
            raise ParameterError("threads", f"must be at least 1, got {self.threads!r}")
        if not 0 <= self.relative_gap < 1:
            raise ParameterError("relative_gap", f"must be in [0, 1), got {self.relative_gap!r}")


@dataclass(frozen=True)
class RawResult:
    """What a backend's ``optimize`` returns, before the core verifies it.

    ``status`` is the solver's claim about the lowered model: OPTIMAL (proven for the
    lowered model), FEASIBLE (limit hit with a solution), INFEASIBLE, NO_SOLUTION, ERROR.
    ``x`` has one value per problem variable (None without a solution); ``bound`` is the
    solver's proven lower bound on the lowered model's objective (None if unknown).
    """

    status: Status
    x: np.ndarray | None = None
    objective: float | None = None
    bound: float | None = None
    solver_status: str = ""
    message: str = ""


class LpSolver(Protocol):
    """A linear-programming solver a backend may provide (:meth:`Backend.lp_solver`) for the
    core's bound LPs (:mod:`smug_opt.bounds.lp`): one LP whose objective changes."""

    def load(self, A: sp.csr_matrix, row_lo: np.ndarray, row_hi: np.ndarray,
             col_lb: np.ndarray, col_ub: np.ndarray, time_limit: float = float("inf")) -> bool:
        """Take ``row_lo <= A v <= row_hi``, ``col_lb <= v <= col_ub`` (±inf: no side) and
        solve it with a zero objective within ``time_limit`` seconds; True when it is
        feasible (False also when the time ran out)."""

    def minimize(self, col: int, sign: float, time_limit: float) -> np.ndarray | None:
        """Minimise ``sign · v[col]`` (warm-started from the previous solve) within
        ``time_limit`` seconds; the row multipliers of an optimal answer, or None. The
        core turns any multipliers into a rigorous bound, so they need not be exact."""


IncumbentCallback = Callable[[np.ndarray, float], None]
"""Called by a backend with each improving solution (values of the problem's variables)."""


class Backend(ABC):
    """Base class of solver plug-ins.

    Subclasses set the class variables and implement :meth:`lower` and :meth:`optimize`;
    import the solver package inside those methods (never at module import time).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()  # import names of the solver packages
    pip_extra: ClassVar[str] = ""  # the pip extra that installs them: smug-opt[pip_extra]
    capabilities: ClassVar[Capabilities] = Capabilities()
    levels: ClassVar[int] = 1  # tightening levels the backend implements
    # the ``extras`` keys the backend accepts: name -> what it does. The core rejects any
    # other key with a ValueError before a worker starts; the default accepts none, so a
    # misspelt option is never silently ignored.
    options: ClassVar[Mapping[str, str]] = MappingProxyType({})
    # the ``extras`` under which every answer is exact, ReLUs and strict rows included; an
    # exact backend that also declares ``relu`` and ``strict_inequalities`` may be asked
    # certification's questions (:mod:`smug_opt.certify`) with them
    exact_extras: ClassVar[Mapping[str, Any]] = MappingProxyType({})
    # conformance checks (smug_opt.testing) the backend is known to fail: name -> reason
    known_failures: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when every required package is importable, else what to install."""
        missing = [m for m in cls.requires if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        hint = f'pip install "smug-opt[{cls.pip_extra}]"' if cls.pip_extra else f"pip install {missing[0]}"
        return f"missing Python package(s) {', '.join(missing)}: {hint}"

    @classmethod
    def check_extras(cls, extras: Mapping[str, Any]) -> None:
        """Raise ValueError naming every key of ``extras`` that :attr:`options` does not
        declare, and listing the ones it does."""
        unknown = sorted(str(k) for k in extras if k not in cls.options)
        if unknown:
            accepted = ", ".join(sorted(cls.options)) or "none"
            raise ValueError(f"backend {cls.name!r} does not accept the option(s) "
                             f"{', '.join(map(repr, unknown))}; it accepts: {accepted}")

    @classmethod
    def warm_up(cls) -> None:
        """Import what a solve needs; run by a fresh worker process before its first solve
        so that import time is not spent from a time limit. Never called in the parent."""
        for module in cls.requires:
            importlib.import_module(module)

    @classmethod
    def lp_solver(cls) -> LpSolver | None:
        """An LP solver for the core's bound LPs, or None (the default) if the backend has
        none; a backend that provides one declares ``capabilities.lp``."""
        return None

    @classmethod
    def solver_version(cls) -> str:
        """The solver's name and version, e.g. ``"HiGHS 1.16.0"``."""
        return "unknown"

    @abstractmethod
    def lower(self, problem: Problem, options: SolveOptions, level: int) -> Any:
        """Build the solver's own model of ``problem`` at tightening ``level``."""

    @abstractmethod
    def optimize(
        self,
        model: Any,
        problem: Problem,
        options: SolveOptions,
        on_incumbent: IncumbentCallback,
    ) -> RawResult:
        """Solve a lowered model within ``options.time_limit`` (seconds, None = none)."""
