"""The result of a solve: status, verified solution, bound, gap, timings and attempts."""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from smug_opt.backend import Status

__all__ = ["PROOFS", "Attempt", "Proof", "RaceEntry", "RaceStatus", "SolveResult", "Strengthening",
           "Timings", "relative_gap"]


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """A result's ``gap``: (objective − bound) / max(|objective|, 1), at least 0; None when
    either is missing."""
    if objective is None or bound is None:
        return None
    return max(objective - bound, 0.0) / max(abs(objective), 1.0)


@enum.unique
class Proof(str, enum.Enum):
    """How an OPTIMAL or INFEASIBLE claim was established (:attr:`SolveResult.proof`).

    A ``str`` enum: it compares equal to, and serialises as, its value."""

    EXACT = "exact"
    """Exact arithmetic: an exact backend, the core's own decision, or certification."""
    SOLVER = "solver"
    """A floating-point solver's word about its float model (the solution is still
    verified exactly)."""

    def __str__(self) -> str:
        return self.value


PROOFS = tuple(p.value for p in Proof)
"""Values of :attr:`SolveResult.proof` (None for statuses that claim no proof)."""


@enum.unique
class RaceStatus(str, enum.Enum):
    """How one raced backend's own solve ended: a :class:`Status` name, or STOPPED when the
    race was decided before it ended. A ``str`` enum (compares equal to its name)."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    NO_SOLUTION = "NO_SOLUTION"
    ERROR = "ERROR"
    STOPPED = "STOPPED"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, status: Status) -> RaceStatus:
        """The race status of a finished solve."""
        return cls(status.name)


@dataclass(frozen=True)
class Timings:
    """Wall-clock seconds by phase. ``lower`` and ``solve`` are measured inside the worker;
    ``strengthen`` is :mod:`smug_opt.strengthen` (0 when off); ``overhead`` is the rest
    (process hand-off, queueing, certification); ``certify`` is the part of ``overhead``
    that certifying the claim took (:mod:`smug_opt.certify`; 0 when not asked); ``total``
    is end to end."""

    lower: float = 0.0
    solve: float = 0.0
    verify: float = 0.0
    overhead: float = 0.0
    total: float = 0.0
    strengthen: float = 0.0
    certify: float = 0.0


@dataclass(frozen=True)
class Attempt:
    """One tightening level tried during a solve."""

    level: int
    status: Status  # the solver's claim about the lowered model
    solver_status: str
    objective: float | None
    verified: bool | None  # None: nothing to verify
    message: str
    lower_seconds: float
    solve_seconds: float


@dataclass(frozen=True)
class RaceEntry:
    """One backend's part in a race (``backend="auto"`` or ``"a,b,c"``): how its own solve
    ended, when (seconds since the race began), and what it contributed to the result."""

    backend: str
    status: RaceStatus
    objective: float | None
    bound: float | None
    seconds: float
    proved: bool  # its proof (or its bound meeting the best solution) decided the race
    best_solution: bool  # it found the solution returned
    best_bound: bool  # it proved the bound returned


@dataclass(frozen=True)
class Strengthening:
    """What :mod:`smug_opt.strengthen` did in a solve (:attr:`SolveResult.strengthening`).

    ``applied`` False: the problem was solved as stated, ``note`` says why. Otherwise the
    counts of what was derived (cuts, clauses, tabulated supports, rows removed, cells
    fixed on/off, unconstrained cells), the parts solved separately (the largest's cell
    count, how many were proven optimal) and the seconds strengthening took.
    """

    applied: bool
    pieces: tuple[str, ...]
    seconds: float
    parts: int
    parts_solved: int = 0
    note: str | None = None
    cuts: int = 0
    clauses: int = 0
    integer_rows: int = 0
    tables: int = 0
    rows_removed: int = 0
    fixed_on: int = 0
    fixed_off: int = 0
    unconstrained: int = 0
    largest_part: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (as bench records keep it)."""
        return {**asdict(self), "pieces": list(self.pieces)}

    def summary(self) -> str:
        """One line: what was derived, or why nothing was."""
        pieces = ", ".join(self.pieces) or "no pieces"
        if not self.applied:
            return f"{pieces}: {self.note}"
        return (f"{pieces}: {self.cuts} cuts, {self.clauses} clauses, {self.integer_rows} integer "
                f"rows, {self.rows_removed} rows "
                f"removed, {self.fixed_on} fixed on, {self.fixed_off} fixed off, {self.parts} part(s)")


@dataclass(frozen=True)
class SolveResult:
    """What :func:`smug_opt.solve` returns.

    ``x`` is the verified solution (binaries exactly 0/1, ReLU outputs recomputed exactly)
    or None; ``objective`` is its exact objective rounded to float; ``bound`` a proven lower
    bound on the optimum of the problem as stated (None if none was proven; rounded up
    when the objective is integral); ``gap`` = (objective − bound) / max(|objective|, 1).
    A solution that failed exact verification is never returned in ``x``. ``strengthening``
    is None when the solve ran without :mod:`smug_opt.strengthen`, else what it did
    (a :class:`Strengthening`). OPTIMAL is exact
    for integral objectives; otherwise it holds within ``smug_opt.claims.objective_tolerance``
    (1e-6 of the objective's scale), the precision floating-point MILP solvers work to.

    ``verified`` is about the returned solution only: True when ``x`` passed the exact
    check, False when the backend returned solutions and every one was rejected, None when
    there was no solution to check (always for INFEASIBLE: that claim is a proof, not a
    solution). ``proof`` says how an OPTIMAL or INFEASIBLE claim was established:
    ``"exact"`` (exact arithmetic: an exact backend, the core's own decision, or
    certification) or ``"solver"`` (a floating-point solver's word about its float model;
    the solution is still verified exactly); None for the other statuses.
    """

    status: Status
    x: np.ndarray | None
    objective: float | None
    bound: float | None
    gap: float | None
    backend: str
    solver: str
    verified: bool | None
    verification: str
    message: str
    times: Timings
    time_limit: float | None
    attempts: tuple[Attempt, ...] = ()
    incumbents: tuple[tuple[float, float], ...] = ()  # (seconds since start, objective)
    peak_memory_mb: float | None = None
    killed: bool = False
    proof: Proof | None = None
    numeric_issues: tuple[str, ...] = ()  # inputs outside the float-faithful range (smug_opt.numeric_range)
    metadata: dict[str, Any] = field(default_factory=dict)
    race: tuple[RaceEntry, ...] = ()  # the raced backends, for backend "auto" or "a,b,c"
    strengthening: Strengthening | None = None

    @property
    def has_solution(self) -> bool:
        return self.x is not None

    def values(self) -> np.ndarray:
        """The solution; raises ValueError when there is none."""
        if self.x is None:
            raise ValueError(f"no solution: the solve ended {self.status.name} ({self.message})")
        return self.x

    def with_note(self, note: str, **changes: Any) -> SolveResult:
        """This result with ``note`` appended to its message (``"; "``-separated) and the
        other fields in ``changes`` replaced."""
        message = "; ".join(m for m in (self.message, note) if m)
        return replace(self, message=message, **changes)

    def exactness(self, solution: str = "solution") -> str:
        """Which part of the result is exact, in words: e.g. "mask verified exactly;
        minimality proven exactly" or "... minimality rests on HiGHS 1.16.0's
        floating-point bound" (``solution`` names what ``x`` is)."""
        if self.status is Status.INFEASIBLE:
            return (f"no {solution} exists: " + ("proven exactly" if self.proof == "exact" else
                    f"this rests on {self.solver}'s floating-point search"))
        if self.x is None or not self.verified:
            return self.verification
        checked = f"{solution} verified exactly"
        if self.status is not Status.OPTIMAL:
            gap = "" if self.gap is None else f" (gap {self.gap:.3g})"
            return f"{checked}; minimality not proven{gap}"
        if self.proof == "exact":
            return f"{checked}; minimality proven exactly"
        return f"{checked}; minimality rests on {self.solver}'s floating-point bound"

    def __repr__(self) -> str:
        obj = "-" if self.objective is None else f"{self.objective:g}"
        bound = "-" if self.bound is None else f"{self.bound:g}"
        proof = f" ({self.proof})" if self.proof else ""
        return (f"SolveResult({self.status.name}{proof}, objective={obj}, bound={bound}, "
                f"backend={self.backend!r}, {self.times.total:.3f}s)")

    def to_dict(self, *, include_x: bool = True) -> dict[str, Any]:
        """A JSON-ready dictionary (the solution as a list of numbers when asked)."""
        out = asdict(self)
        out["status"] = self.status.name
        out["attempts"] = [{**a, "status": a["status"].name} for a in out["attempts"]]
        out["x"] = None if self.x is None or not include_x else _json_numbers(self.x)
        for key in ("objective", "bound", "gap"):
            value = out[key]
            if value is not None and not math.isfinite(value):
                out[key] = None
        return out


def _json_numbers(x: np.ndarray) -> list[float | int]:
    return [int(v) if float(v).is_integer() else float(v) for v in x.tolist()]
