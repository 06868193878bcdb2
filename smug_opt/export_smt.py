"""Export a :class:`~smug_opt.ir.Problem` to SMT-LIB2, in two dialects.

Both are logic ``QF_LRA`` (a ``Bool`` per binary variable, a ``Real`` per continuous one)
and state the problem exactly. They differ in the question:

* ``"z3"`` (default): ``(minimize objective)`` then ``(check-sat)``, ``(get-objectives)``,
  ``(get-model)``: z3's optimisation extension (νZ), which other solvers reject;
* ``"standard"``: plain SMT-LIB 2.6 that any SMT solver (cvc5, z3, Yices, MathSAT) reads: a
  feasibility question, ``sat`` iff a solution exists with ``objective <= bound`` (no
  ``bound``: iff any solution exists), then ``(get-model)``. Bisecting on ``bound`` finds
  the optimum with any solver.

Every float is written as the exact rational it is, ``(/ n.0 d.0)`` from
``Fraction(float)``; strict rows stay strict; a binary ``b`` contributes ``(ite b a 0.0)``;
a ReLU is ``(= y (ite (> z 0.0) z 0.0))`` with its declared pre-activation bounds asserted.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator
from fractions import Fraction
from typing import TextIO

import numpy as np

from smug_opt.ir import Problem, Sense

__all__ = ["DIALECTS", "smt2_string", "write_smt2"]

DIALECTS = ("z3", "standard")

_RELATION = {Sense.LE: "<=", Sense.GE: ">=", Sense.EQ: "=", Sense.LT: "<", Sense.GT: ">"}


def _real(value: float) -> str:
    """The exact value of a float as an SMT-LIB2 real term."""
    f = Fraction(value)
    n, d = abs(f.numerator), f.denominator
    term = f"{n}.0" if d == 1 else f"(/ {n}.0 {d}.0)"
    return f"(- {term})" if f < 0 else term


def _name(problem: Problem, j: int) -> str:
    return f"m{j}" if problem.binary[j] else f"v{j}"


def _sum(terms: list[str]) -> str:
    return "0.0" if not terms else terms[0] if len(terms) == 1 else f"(+ {' '.join(terms)})"


def _linear(problem: Problem, cols: np.ndarray, coefs: np.ndarray) -> list[str]:
    binary = problem.binary
    return [f"(ite m{j} {_real(a)} 0.0)" if binary[j] else f"(* {_real(a)} v{j})"
            for j, a in zip(cols.tolist(), coefs.tolist(), strict=True)]


def _lines(problem: Problem, dialect: str, bound: float | None) -> Iterator[str]:
    yield "; smug-opt problem: " + repr(problem)
    if dialect == "z3":
        yield "; (minimize ...) and (get-objectives) are z3's optimisation extension to SMT-LIB2"
    else:
        yield ("; standard SMT-LIB 2.6: sat iff a solution exists"
               + ("" if bound is None else f" with objective <= {bound!r}"))
        yield "(set-option :produce-models true)"
    yield "(set-logic QF_LRA)"
    for j in range(problem.num_vars):
        if problem.binary[j]:
            yield f"(declare-const m{j} Bool)"
        else:
            yield f"(declare-const v{j} Real)"
            yield f"(assert (<= {_real(problem.lb[j])} v{j} {_real(problem.ub[j])}))"
    A = problem.A
    for i in range(problem.num_rows):
        start, stop = A.indptr[i], A.indptr[i + 1]
        lhs = _sum(_linear(problem, A.indices[start:stop], A.data[start:stop]))
        yield f"(assert ({_RELATION[Sense(problem.senses[i])]} {lhs} {_real(problem.rhs[i])}))"
    R = problem.relu_in
    for r, out in enumerate(problem.relu_out.tolist()):
        start, stop = R.indptr[r], R.indptr[r + 1]
        terms = _linear(problem, R.indices[start:stop], R.data[start:stop])
        if problem.relu_const[r] != 0:
            terms.append(_real(problem.relu_const[r]))
        yield f"(define-fun z{r} () Real {_sum(terms)})"
        yield f"(assert (= {_name(problem, out)} (ite (> z{r} 0.0) z{r} 0.0)))"
        if math.isfinite(problem.relu_lo[r]):
            yield f"(assert (>= z{r} {_real(problem.relu_lo[r])}))"
        if math.isfinite(problem.relu_hi[r]):
            yield f"(assert (<= z{r} {_real(problem.relu_hi[r])}))"
    used = np.flatnonzero(problem.objective)
    objective = _sum(_linear(problem, used, problem.objective[used]))
    if dialect == "z3":
        yield f"(minimize {objective})"
        yield "(check-sat)"
        yield "(get-objectives)"
    else:
        if bound is not None:
            yield f"(assert (<= {objective} {_real(bound)}))"
        yield "(check-sat)"
    yield "(get-model)"


def write_smt2(problem: Problem, path_or_file: str | os.PathLike[str] | TextIO, *,
               dialect: str = "z3", bound: float | None = None) -> None:
    """Write ``problem`` as SMT-LIB2 in ``dialect`` (see the module docstring) to a path or
    text file; ``bound`` (standard dialect only) asks for ``objective <= bound``."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SMT-LIB2 dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    if bound is not None and (dialect != "standard" or not math.isfinite(bound)):
        raise ValueError(f"bound must be a finite number with dialect 'standard'; got {bound!r} "
                         f"with dialect {dialect!r}")
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", encoding="ascii") as handle:
            _write(problem, handle, dialect, bound)
    else:
        _write(problem, path_or_file, dialect, bound)


def smt2_string(problem: Problem, *, dialect: str = "z3", bound: float | None = None) -> str:
    """The SMT-LIB2 text :func:`write_smt2` writes."""
    out = io.StringIO()
    write_smt2(problem, out, dialect=dialect, bound=bound)
    return out.getvalue()


def _write(problem: Problem, handle: TextIO, dialect: str, bound: float | None) -> None:
    for line in _lines(problem, dialect, bound):
        handle.write(line)
        handle.write("\n")
