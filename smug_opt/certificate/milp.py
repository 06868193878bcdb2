"""The MILP a certificate states for a :class:`~smug_opt.ir.Problem`, in exact rationals.

The rules are the contract of ``docs/certificates.md``: variable ``j`` is ``x{j}``; the
constraints are two bound rows per variable (``2j``: lower, ``2j+1``: upper), then the
problem's rows (``2n + i``). A strict row over binaries only is stated exactly as the
non-strict row it is equivalent to on integer points; a strict row with a continuous
variable as its closure (a relaxation, so bounds derived from it stay valid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.ir import Problem, Sense, VarKind

__all__ = ["CertificateError", "ExactMilp", "ExactRow", "exact_milp", "violated_row"]


class CertificateError(ValueError):
    """The problem or claim cannot be stated or proven as a VIPR certificate."""


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


@dataclass(frozen=True)
class ExactMilp:
    """``min objective·x`` over ``rows`` (bound rows first), ``integer[j]`` for binaries."""

    num_vars: int
    integer: tuple[bool, ...]
    objective: dict[int, Fraction]
    rows: tuple[ExactRow, ...]

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
    """The certificate's MILP of ``problem``; :class:`CertificateError` if it has ReLUs."""
    if problem.num_relus:
        raise CertificateError(f"certificates cover problems without ReLU constraints; this one "
                               f"has {problem.num_relus}")
    n = problem.num_vars
    binary = problem.kinds == VarKind.BINARY
    rows: list[ExactRow] = []
    for j in range(n):
        one = (j,), (Fraction(1),)
        rows.append(ExactRow(f"lb{j}", "G", Fraction(float(problem.lb[j])), *one))
        rows.append(ExactRow(f"ub{j}", "L", Fraction(float(problem.ub[j])), *one))
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
    objective = {int(j): Fraction(float(problem.objective[j]))
                 for j in np.flatnonzero(problem.objective)}
    return ExactMilp(n, tuple(bool(b) for b in binary), objective, tuple(rows))


def violated_row(milp: ExactMilp, x: dict[int, Fraction]) -> str | None:
    """The name of the first row of ``milp`` that ``x`` (absent: 0) violates, or None; an
    integer variable with a fractional value, or a strict row met with equality, violates."""
    for j, v in x.items():
        if milp.integer[j] and v.denominator != 1:
            return f"x{j} (integer, value {v})"
    for row in milp.rows:
        lhs = sum((c * x.get(j, 0) for j, c in zip(row.cols, row.coefs, strict=True)), Fraction(0))
        if (row.sense == "L" and lhs > row.rhs) or (row.sense == "G" and lhs < row.rhs) or (
                row.sense == "E" and lhs != row.rhs):
            return row.name
        if row.strict and lhs == row.rhs:
            return f"{row.name} (strict)"
    return None
