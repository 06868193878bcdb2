"""The MILP a certificate for a ``.smug`` problem must state, derived from the problem alone.

The rules are the contract in ``docs/certificates.md``: variables ``x0..x{n-1}`` and a phase
binary ``d{r}`` per ReLU, the binaries and phases integer, ``min`` the objective, then two
bound constraints per variable, one constraint per row and each ReLU's big-M rows
(:mod:`~smug_opt.check_certificate.relu_rows`), every float64 read as the exact rational it
is. A strict row over binaries only is tightened exactly (``a·x > b`` ⟺
``a·x >= (floor(D·b) + 1) / D`` with ``D`` the common denominator of its coefficients); a
strict row with a continuous variable is stated as its closure, and its index is returned
so that solutions are held to the strict row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.check_certificate.relu_rows import relu_constraints
from smug_opt.check_certificate.rows import EQ, GE, LE, Row, first_difference, row_from_values
from smug_opt.check_certificate.verifier import CertificateRejected
from smug_opt.check_certificate.vipr_reader import Header
from smug_opt.ir import Problem, Sense, VarKind

__all__ = ["ExpectedMilp", "expected_milp", "match_problem"]

_SENSES = {Sense.LE: LE, Sense.GE: GE, Sense.EQ: EQ, Sense.LT: LE, Sense.GT: GE}


@dataclass(frozen=True)
class ExpectedMilp:
    """The VAR, INT, OBJ and CON sections a certificate must state."""

    variables: list[str]
    integers: frozenset[int]
    objective: Row
    constraints: list[Row]
    bound_count: int
    strict: frozenset[int]
    """CON indices of strict rows stated as their closure (solutions must hold them strictly)."""
    relu_start: int
    """CON index of the first ReLU row (the problem's rows end there)."""


def expected_milp(problem: Problem) -> ExpectedMilp:
    """The MILP ``problem`` is, as VIPR constraints over exact rationals."""
    n, phases = problem.num_vars, problem.num_relus
    binary = problem.kinds == VarKind.BINARY
    objective = row_from_values(
        ((int(j), *float(problem.objective[j]).as_integer_ratio())
         for j in np.flatnonzero(problem.objective)), Fraction(0), GE)
    constraints: list[Row] = []
    for j in range(n):
        lb, ub = (0.0, 1.0) if binary[j] else (float(problem.lb[j]), float(problem.ub[j]))
        constraints.append(Row({j: 1}, 1, Fraction(lb), GE))
        constraints.append(Row({j: 1}, 1, Fraction(ub), LE))
    for d in range(n, n + phases):
        constraints += [Row({d: 1}, 1, Fraction(0), GE), Row({d: 1}, 1, Fraction(1), LE)]
    bound_count = len(constraints)
    strict = set()
    A = problem.A
    for i in range(problem.num_rows):
        cols = A.indices[A.indptr[i]:A.indptr[i + 1]]
        vals = A.data[A.indptr[i]:A.indptr[i + 1]]
        pairs = sorted((int(j), Fraction(float(v))) for j, v in zip(cols, vals, strict=False) if v != 0)
        sense = Sense(int(problem.senses[i]))
        rhs = Fraction(float(problem.rhs[i]))
        if sense.strict:
            if all(binary[j] for j, _ in pairs):
                rhs = _tightened(pairs, rhs, sense)
            else:
                strict.add(bound_count + i)
        constraints.append(row_from_values(
            ((j, a.numerator, a.denominator) for j, a in pairs), rhs, _SENSES[sense]))
    relu_start = len(constraints)
    constraints += relu_constraints(problem)
    integers = frozenset(np.flatnonzero(binary).tolist()) | frozenset(range(n, n + phases))
    return ExpectedMilp([f"x{j}" for j in range(n)] + [f"d{r}" for r in range(phases)], integers,
                        objective, constraints, bound_count, frozenset(strict), relu_start)


def _tightened(pairs: list[tuple[int, Fraction]], rhs: Fraction, sense: Sense) -> Fraction:
    """The exact non-strict right-hand side of a strict row over integer variables."""
    den = math.lcm(*(a.denominator for _, a in pairs)) if pairs else 1
    if sense == Sense.GT:
        return Fraction(math.floor(den * rhs) + 1, den)
    return Fraction(math.ceil(den * rhs) - 1, den)


def match_problem(header: Header, expected: ExpectedMilp, problem_name: str) -> None:
    """Refuse a certificate whose VAR, INT, OBJ or CON sections are not ``expected``."""
    def differs(what: str) -> CertificateRejected:
        return CertificateRejected(f"the certificate states another problem than {problem_name}: "
                                   f"{what}")

    n = len(expected.variables)
    if header.variables != expected.variables:
        if len(header.variables) != n:
            raise differs(f"VAR has {len(header.variables)} variables, the problem {n}")
        j = next(j for j in range(n) if header.variables[j] != expected.variables[j])
        raise differs(f"variable {j} is named {header.variables[j]!r}, not {expected.variables[j]!r}")
    if header.integers != expected.integers:
        j = min(header.integers ^ expected.integers)
        raise differs(f"x{j} is {'' if j in header.integers else 'not '}integer in INT but "
                      f"{'binary' if j in expected.integers else 'continuous'} in the problem")
    if not header.minimize:
        raise differs("OBJ maximises; the problem minimises")
    if not header.objective.same_lhs(expected.objective):
        j = _differing_variable(header.objective, expected.objective)
        raise differs(f"OBJ has the coefficient {header.objective.coefficient(j)} on x{j}, the "
                      f"problem {expected.objective.coefficient(j)}")
    stated = header.constraints
    if len(stated) != len(expected.constraints) or header.bound_count != expected.bound_count:
        raise differs(f"CON has {len(stated)} constraints ({header.bound_count} bounds), the "
                      f"problem {len(expected.constraints)} ({expected.bound_count} bounds)")
    for i, ((name, row), want) in enumerate(zip(stated, expected.constraints, strict=False)):
        if row.same_as(want):
            continue
        what = (f"bound {i}" if i < expected.bound_count else f"row {i - expected.bound_count}"
                if i < expected.relu_start else f"ReLU row {i - expected.relu_start} (big-M)")
        if row.sense != want.sense or row.rhs != want.rhs:
            raise differs(f"constraint {i} ({name!r}) is {row.letter} {row.rhs}, {what} of the "
                          f"problem is {want.letter} {want.rhs}")
        j = _differing_variable(row, want)
        raise differs(f"constraint {i} ({name!r}) has the coefficient {row.coefficient(j)} on "
                      f"x{j}, {what} of the problem {want.coefficient(j)}")



def _differing_variable(a: Row, b: Row) -> int:
    """The first variable where two left-hand sides known to differ differ."""
    j = first_difference(a, b)
    if j is None:
        raise AssertionError("the left-hand sides were found to differ")
    return j
