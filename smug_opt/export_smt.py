"""Export a :class:`~smug_opt.ir.Problem` to SMT-LIB2 with z3's optimisation extension.

The file is plain SMT-LIB2 (logic ``QF_LRA``: a ``Bool`` per binary variable, a ``Real``
per continuous one) plus z3's ``(minimize ...)`` command, which standard SMT-LIB2 does not
have: solvers without νZ-style optimisation can check feasibility after deleting that line.
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

__all__ = ["smt2_string", "write_smt2"]

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


def _lines(problem: Problem) -> Iterator[str]:
    yield "; smug-opt problem: " + repr(problem)
    yield "; (minimize ...) is z3's optimisation extension to SMT-LIB2"
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
    assert R is not None
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
    yield f"(minimize {_sum(_linear(problem, used, problem.objective[used]))})"
    yield "(check-sat)"
    yield "(get-objectives)"
    yield "(get-model)"


def write_smt2(problem: Problem, path_or_file: str | os.PathLike[str] | TextIO) -> None:
    """Write ``problem`` as SMT-LIB2 (QF_LRA + z3's ``minimize``) to a path or text file."""
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", encoding="ascii") as handle:
            _write(problem, handle)
    else:
        _write(problem, path_or_file)


def smt2_string(problem: Problem) -> str:
    """The SMT-LIB2 text :func:`write_smt2` writes."""
    out = io.StringIO()
    _write(problem, out)
    return out.getvalue()


def _write(problem: Problem, handle: TextIO) -> None:
    for line in _lines(problem):
        handle.write(line)
        handle.write("\n")
