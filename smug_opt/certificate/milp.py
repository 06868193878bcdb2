"""The MILP a certificate states for a :class:`~smug_opt.ir.Problem`, in exact rationals.

The rules are the contract of ``docs/certificates.md``: variable ``j`` is ``x{j}``, ReLU
``r``'s phase binary ``d{r}`` comes after them (index ``n + r``); the constraints are two
bound rows per variable (``2j``: lower, ``2j+1``: upper), the problem's rows, then each
ReLU's big-M rows. A strict row over binaries only is stated exactly as the non-strict
row it is equivalent to on integer points; a strict row with a continuous variable as its
closure (a relaxation, so bounds derived from it stay valid).

A ReLU ``y = max(0, z)``, ``z = a·x + c``, with exact pre-activation bounds ``L <= z <= U``
(the declared ``relu_lo``/``relu_hi`` intersected with interval arithmetic over the
variables' own bounds) and its phase binary ``d`` (1: active) is stated by the rows
``y >= 0``, ``y − a·x >= c``, ``y − a·x − L·d <= c − L`` (``d = 1``: ``y <= z``; ``d = 0``:
``z >= L``), ``y − U·d <= 0`` (``d = 0``: ``y <= 0``; ``d = 1``: ``z <= U``), and
``a·x >= L − c`` only when ``L > 0``, ``a·x <= U − c`` only when ``U < 0``: they hold
exactly when ``y = max(0, z)`` and ``L <= z <= U``, so the MILP has the problem's feasible
points (with their phases) and no others.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.ir import Problem, Sense, VarKind

__all__ = ["CertificateError", "ExactMilp", "ExactRow", "complete_solution", "exact_dot", "exact_milp",
           "preactivation_bounds", "violated_row"]


class CertificateError(ValueError):
    """The problem or claim cannot be stated or proven as a VIPR certificate."""


def exact_dot(pairs: Iterable[tuple[Fraction, Fraction | float]]) -> Fraction:
    """``Σ a·b`` over ``pairs`` (Fractions, ``b`` may be a float: its exact value) exactly,
    summed in integers over one common denominator (the certificate's numbers are dyadic,
    so it stays a power of two): a Fraction sum term by term normalises at every step and
    costs ~10x more on rows of hundreds of terms."""
    nums: list[int] = []
    dens: list[int] = []
    for a, b in pairs:
        p, q = b.as_integer_ratio()
        nums.append(a.numerator * p)
        dens.append(a.denominator * q)
    if not nums:
        return Fraction(0)
    common = math.lcm(*dens)
    return Fraction(sum(num * (common // den) for num, den in zip(nums, dens, strict=True)), common)


@dataclass(frozen=True)
class ExactRow:
    """``Σ coef·x[col]  sense  rhs`` with ``sense`` one of ``"L"``, ``"G"``, ``"E"``;
    ``strict``: the closure of a strict row (a solution must not meet it with equality)."""

    name: str
    sense: str
    rhs: Fraction
    cols: tuple[int, ...]
    coefs: tuple[Fraction, ...]
    strict: bool = False

    @functools.cached_property
    def integer_form(self) -> tuple[int, tuple[int, ...]]:
        """``(D, nums)`` with ``coefs[k] == nums[k] / D`` exactly (``D`` the least common
        denominator): the row for integer arithmetic, computed once."""
        D = math.lcm(*(a.denominator for a in self.coefs))
        return D, tuple(a.numerator * (D // a.denominator) for a in self.coefs)


@dataclass(frozen=True)
class ExactMilp:
    """``min objective·x`` over ``rows`` (bound rows first), ``integer[j]`` for binaries
    (the problem's and the ReLUs' phases), ``names[j]`` each variable's VIPR name."""

    num_vars: int
    integer: tuple[bool, ...]
    objective: dict[int, Fraction]
    rows: tuple[ExactRow, ...]
    names: tuple[str, ...]

    @property
    def num_bound_rows(self) -> int:
        return 2 * self.num_vars

    def problem_row(self, i: int) -> ExactRow:
        """Row ``i`` of the problem (constraint index ``2n + i``)."""
        return self.rows[self.num_bound_rows + i]

    @property
    def integral_objective(self) -> bool:
        """Integer coefficients on integer variables only: every objective value is an integer."""
        return all(self.integer[j] and c.denominator == 1 for j, c in self.objective.items())


def _strict_rhs(coefs: list[Fraction], rhs: Fraction, sense: Sense) -> Fraction:
    """The non-strict right-hand side equivalent to ``a·x > rhs`` (or ``<``) on integer points."""
    scale = math.lcm(*(c.denominator for c in coefs)) if coefs else 1
    if sense == Sense.GT:
        return Fraction(math.floor(rhs * scale) + 1, scale)
    return Fraction(math.ceil(rhs * scale) - 1, scale)


_SENSE_LETTER = {Sense.LE: "L", Sense.LT: "L", Sense.GE: "G", Sense.GT: "G", Sense.EQ: "E"}


def exact_milp(problem: Problem) -> ExactMilp:
    """The certificate's MILP of ``problem`` (ReLUs as big-M rows with phase binaries)."""
    n, phases = problem.num_vars, problem.num_relus
    binary = problem.kinds == VarKind.BINARY
    rows: list[ExactRow] = []
    for j in range(n):
        one = (j,), (Fraction(1),)
        rows.append(ExactRow(f"lb{j}", "G", Fraction(float(problem.lb[j])), *one))
        rows.append(ExactRow(f"ub{j}", "L", Fraction(float(problem.ub[j])), *one))
    for j in range(n, n + phases):
        one = (j,), (Fraction(1),)
        rows += [ExactRow(f"lb{j}", "G", Fraction(0), *one), ExactRow(f"ub{j}", "L", Fraction(1), *one)]
    A = problem.A.tocsr()
    A.sort_indices()
    for i in range(problem.num_rows):
        start, end = A.indptr[i], A.indptr[i + 1]
        cols = tuple(int(j) for j in A.indices[start:end])
        coefs = [Fraction(float(v)) for v in A.data[start:end]]
        keep = [k for k, c in enumerate(coefs) if c != 0]
        cols, coefs = tuple(cols[k] for k in keep), [coefs[k] for k in keep]
        sense = Sense(int(problem.senses[i]))
        rhs = Fraction(float(problem.rhs[i]))
        closure = sense.strict and not all(binary[j] for j in cols)
        if sense.strict and not closure:
            rhs = _strict_rhs(coefs, rhs, sense)
        rows.append(ExactRow(f"r{i}", _SENSE_LETTER[sense], rhs, cols, tuple(coefs), closure))
    rows += relu_rows(problem)
    objective = {int(j): Fraction(float(problem.objective[j]))
                 for j in np.flatnonzero(problem.objective)}
    names = tuple(f"x{j}" for j in range(n)) + tuple(f"d{r}" for r in range(phases))
    return ExactMilp(n + phases, tuple(bool(b) for b in binary) + (True,) * phases, objective,
                     tuple(rows), names)


def violated_row(milp: ExactMilp, x: dict[int, Fraction]) -> str | None:
    """The name of the first row of ``milp`` that ``x`` (absent: 0) violates, or None; an
    integer variable with a fractional value, or a strict row met with equality, violates."""
    for j, v in x.items():
        if milp.integer[j] and v.denominator != 1:
            return f"{milp.names[j]} (integer, value {v})"
    for row in milp.rows:
        lhs = exact_dot((c, x[j]) for j, c in zip(row.cols, row.coefs, strict=True) if j in x)
        if (row.sense == "L" and lhs > row.rhs) or (row.sense == "G" and lhs < row.rhs) or (
                row.sense == "E" and lhs != row.rhs):
            return row.name
        if row.strict and lhs == row.rhs:
            return f"{row.name} (strict)"
    return None


# ------------------------------------------------------------------ ReLUs
def _inputs(problem: Problem, r: int) -> dict[int, Fraction]:
    """ReLU ``r``'s input coefficients, exact (duplicate entries summed, zeros dropped)."""
    relu_in = problem.relu_in
    start, end = relu_in.indptr[r], relu_in.indptr[r + 1]
    coefs: dict[int, Fraction] = {}
    for j, v in zip(relu_in.indices[start:end].tolist(), relu_in.data[start:end].tolist(), strict=True):
        coefs[j] = coefs[j] + Fraction(v) if j in coefs else Fraction(v)
    return {j: a for j, a in sorted(coefs.items()) if a != 0}


def preactivation_bounds(problem: Problem, r: int, coefs: dict[int, Fraction]) -> tuple[Fraction, Fraction]:
    """``(L, U)``: the declared bounds of ReLU ``r``'s pre-activation intersected with
    ``c + Σ a_j·[lb_j, ub_j]`` (always finite: continuous variables have finite bounds)."""
    const = Fraction(float(problem.relu_const[r]))
    lb, ub = problem.lb.tolist(), problem.ub.tolist()
    # a·lb_j <= a·ub_j exactly when a >= 0 (lb_j <= ub_j)
    low = const + exact_dot((a, lb[j] if a > 0 else ub[j]) for j, a in coefs.items())
    high = const + exact_dot((a, ub[j] if a > 0 else lb[j]) for j, a in coefs.items())
    declared_lo, declared_hi = float(problem.relu_lo[r]), float(problem.relu_hi[r])
    if np.isfinite(declared_lo):
        low = max(low, Fraction(declared_lo))
    if np.isfinite(declared_hi):
        high = min(high, Fraction(declared_hi))
    return low, high


def _row(name: str, sense: str, rhs: Fraction, terms: dict[int, Fraction]) -> ExactRow:
    kept = sorted((j, a) for j, a in terms.items() if a != 0)
    return ExactRow(name, sense, rhs, tuple(j for j, _ in kept), tuple(a for _, a in kept))


def relu_rows(problem: Problem) -> list[ExactRow]:
    """The rows of every ReLU in order; ReLU ``r``'s phase binary is variable ``n + r``."""
    n = problem.num_vars
    rows: list[ExactRow] = []
    for r, out in enumerate(problem.relu_out.tolist()):
        coefs = _inputs(problem, r)
        low, high = preactivation_bounds(problem, r, coefs)
        const = Fraction(float(problem.relu_const[r]))
        minus = {j: -a for j, a in coefs.items()}
        phase = n + r
        rows.append(_row(f"relu{r}_nonneg", "G", Fraction(0), {out: Fraction(1)}))
        rows.append(_row(f"relu{r}_above", "G", const, {**minus, out: Fraction(1)}))
        rows.append(_row(f"relu{r}_on", "L", const - low, {**minus, out: Fraction(1), phase: -low}))
        rows.append(_row(f"relu{r}_off", "L", Fraction(0), {out: Fraction(1), phase: -high}))
        if low > 0:
            rows.append(_row(f"relu{r}_lo", "G", low - const, coefs))
        if high < 0:
            rows.append(_row(f"relu{r}_hi", "L", high - const, coefs))
    return rows


def complete_solution(problem: Problem, x: np.ndarray) -> dict[int, Fraction]:
    """The solution as the certificate's MILP reads it: ``x``'s values exactly, every ReLU
    output recomputed exactly in order, and each phase binary 1 where its pre-activation
    is positive (zeros left out)."""
    values = {j: Fraction(v) for j, v in enumerate(np.asarray(x, dtype=np.float64).tolist()) if v != 0}
    n = problem.num_vars
    for r, out in enumerate(problem.relu_out.tolist()):
        z = Fraction(float(problem.relu_const[r])) + exact_dot(
            (a, values[j]) for j, a in _inputs(problem, r).items() if j in values)
        values.pop(out, None)
        if z > 0:
            values[out] = z
            values[n + r] = Fraction(1)
    return values
