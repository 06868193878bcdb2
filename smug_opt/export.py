"""Export a problem for outside solvers: LP and free MPS (MILP) or SMT-LIB2.

LP and MPS are written from :func:`smug_opt.bridges.to_milp` at a tightening level, with
every number in its shortest round-trip form (``repr``), so a reader gets exactly the
float64 MILP the built-in MILP backends solve. Those formats have no strict relations:
strict rows carry the level's margin, which a header comment states. Column ``x{j}`` is
the problem's variable ``j``; columns past ``num_vars`` are ReLU phase binaries. A row
``r{i}`` is the MILP's row ``i`` (rows bounded on both sides become ``r{i}_lo`` and
``r{i}_hi``; empty rows that hold are left out); the problem's rows come first, scaled
by powers of two (exactly).
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from smug_opt.bridges.milp import MilpForm, strict_margin, to_milp
from smug_opt.ir import Problem, Sense

__all__ = ["FORMATS", "export", "write_lp", "write_mps"]

FORMATS = ("lp", "mps", "smt2")
_TERMS_PER_LINE = 8


class _Rows:
    """The MILP's rows as one-sided or equality rows: names, senses (``G``/``L``/``E``),
    right-hand sides and their coefficient matrix (two-sided rows split in two). Empty
    rows that hold are left out: a model whose rows are all empty crashes CBC."""

    def __init__(self, form: MilpForm) -> None:
        lo, hi = form.row_lo, form.row_hi
        vacuous = (np.diff(form.A.indptr) == 0) & (lo <= 0) & (hi >= 0)
        eq = (lo == hi) & ~vacuous
        has_lo = ~eq & ~vacuous & (lo > -np.inf)
        has_hi = ~eq & ~vacuous & (hi < np.inf)
        both = has_lo & has_hi
        names, senses, rhs, source = [], [], [], []
        for i in range(form.num_rows):
            for flag, sense, value, suffix in ((eq[i], "E", lo[i], ""), (has_lo[i], "G", lo[i], "_lo"),
                                               (has_hi[i], "L", hi[i], "_hi")):
                if flag:
                    names.append(f"r{i}{suffix if both[i] else ''}")
                    senses.append(sense)
                    rhs.append(float(value))
                    source.append(i)
        self.names = names
        self.senses = senses
        self.rhs = rhs
        self.matrix: sp.csr_matrix = form.A[np.asarray(source, dtype=np.int64)]


def _header(problem: Problem, form: MilpForm) -> list[str]:
    m = problem.num_rows
    strict = (problem.senses == Sense.LT) | (problem.senses == Sense.GT)
    lines = [f"smug-opt export of {problem!r} at tightening level {form.level}"]
    if strict.any():
        norm1 = np.asarray(abs(form.A[:m]).sum(axis=1)).ravel()[strict]
        margins = np.atleast_1d(strict_margin(form.level, norm1))
        if form.level == 0:
            lines.append(f"{int(strict.sum())} strict row(s) (< or >) written as non-strict "
                         "(<= or >=) with no margin: a relaxation")
        else:
            spread = f"{margins.min():.3g}" + (f" to {margins.max():.3g}"
                                                 if margins.max() > margins.min() else "")
            lines.append(f"{int(strict.sum())} strict row(s) (< or >): LP/MPS have no strict "
                         f"relations, so each is tightened by a margin of {spread} "
                         f"(strict_margin({form.level}, |row|_1) on the scaled row); non-strict "
                         f"rows by strict_margin({form.level - 1}, |row|_1)")
    lines.append(f"columns x0..x{problem.num_vars - 1} are the problem's variables"
                 + (f", x{problem.num_vars}..x{form.num_cols - 1} ReLU phase binaries"
                    if form.num_cols > problem.num_vars else ""))
    return lines


def _number(value: float) -> str:
    return repr(float(value) + 0.0)  # shortest round-trip form; no "-0.0"


def _numbers(values: np.ndarray) -> list[str]:
    """``_number`` of many values (``repr`` is the fastest exact formatting there is)."""
    return [repr(v) for v in (np.asarray(values, dtype=np.float64) + 0.0).tolist()]


def write_mps(problem: Problem, path: str | os.PathLike[str], *, level: int = 1) -> None:
    """Write ``problem`` as free MPS, lowered by ``to_milp(problem, level)``."""
    form = to_milp(problem, level)
    rows = _Rows(form)
    out = [f"* {line}" for line in _header(problem, form)]
    out += ["NAME smug_opt", "ROWS", " N obj"]
    out += [f" {s} {name}" for s, name in zip(rows.senses, rows.names, strict=True)]
    out.append("COLUMNS")
    csc = rows.matrix.tocsc()
    cols = [f"x{j}" for j in range(form.num_cols)]
    entry_cols = np.repeat(np.arange(form.num_cols), np.diff(csc.indptr)).tolist()
    entries = [f" {cols[j]} {rows.names[i]} {v}" for j, i, v in
               zip(entry_cols, csc.indices.tolist(), _numbers(csc.data), strict=True)]
    costs = _numbers(form.objective)
    integer = False
    for j in range(form.num_cols):
        if bool(form.integer[j]) != integer:
            integer = not integer
            out.append(f" M{j} 'MARKER' '{'INTORG' if integer else 'INTEND'}'")
        out.append(f" {cols[j]} obj {costs[j]}")
        out += entries[csc.indptr[j]:csc.indptr[j + 1]]
    if integer:
        out.append(f" M{form.num_cols} 'MARKER' 'INTEND'")
    out.append("RHS")
    out += [f" rhs {name} {_number(v)}" for name, v in zip(rows.names, rows.rhs, strict=True) if v != 0]
    out.append("BOUNDS")
    for j, (lo, hi) in enumerate(zip(form.col_lb.tolist(), form.col_ub.tolist(), strict=True)):
        if lo == hi:
            out.append(f" FX bnd x{j} {_number(lo)}")
            continue
        out.append(f" MI bnd x{j}" if lo == -math.inf else f" LO bnd x{j} {_number(lo)}")
        out.append(f" PL bnd x{j}" if hi == math.inf else f" UP bnd x{j} {_number(hi)}")
    out.append("ENDATA")
    Path(path).write_text("\n".join(out) + "\n")


def _term_lines(matrix: sp.csr_matrix) -> list[list[str]]:
    """Per row, ``+ 1.5 x3 - 2.0 x7 ...`` split into lines of a few terms."""
    data = matrix.data
    signs = np.where(data < 0, "-", "+").tolist()
    terms = [f"{s} {v} x{j}" for s, v, j in
             zip(signs, _numbers(np.abs(data)), matrix.indices.tolist(), strict=True)]
    ptr = matrix.indptr.tolist()
    return [[" ".join(terms[k:min(k + _TERMS_PER_LINE, stop)])
             for k in range(start, stop, _TERMS_PER_LINE)]
            for start, stop in itertools.pairwise(ptr)]


def write_lp(problem: Problem, path: str | os.PathLike[str], *, level: int = 1) -> None:
    """Write ``problem`` in CPLEX LP format, lowered by ``to_milp(problem, level)``."""
    form = to_milp(problem, level)
    rows = _Rows(form)
    out = [f"\\ {line}" for line in _header(problem, form)]
    # every column in the objective (zeros too), so that readers create them in order
    costs = sp.csr_matrix((form.objective, np.arange(form.num_cols), [0, form.num_cols]))
    out += ["Minimize", " obj:", *(f"  {line}" for line in _term_lines(costs)[0])]
    out.append("Subject To")
    relation = {"G": ">=", "L": "<=", "E": "="}
    for name, sense, rhs, lines in zip(rows.names, rows.senses, rows.rhs, _term_lines(rows.matrix),
                                       strict=True):
        out.append(f" {name}:")
        out += [f"  {line}" for line in lines or ["0 x0"]]
        out.append(f"  {relation[sense]} {_number(rhs)}")
    out.append("Bounds")
    for j, (lo, hi) in enumerate(zip(form.col_lb.tolist(), form.col_ub.tolist(), strict=True)):
        out.append(f" x{j} = {_number(lo)}" if lo == hi else
                   f" {'-inf' if lo == -math.inf else _number(lo)} <= x{j} <= "
                   f"{'+inf' if hi == math.inf else _number(hi)}")
    integers = [f"x{j}" for j in np.flatnonzero(form.integer).tolist()]
    if integers:
        out.append("General")
        out += [" " + " ".join(integers[k:k + _TERMS_PER_LINE * 2])
                for k in range(0, len(integers), _TERMS_PER_LINE * 2)]
    out.append("End")
    Path(path).write_text("\n".join(out) + "\n")


def export(problem: Problem, fmt: str, path: str | os.PathLike[str]) -> None:
    """Write ``problem`` to ``path`` as ``"lp"``, ``"mps"`` (tightening level 1) or ``"smt2"``."""
    key = str(fmt).lower().lstrip(".")
    if key == "lp":
        write_lp(problem, path)
    elif key == "mps":
        write_mps(problem, path)
    elif key == "smt2":
        try:
            from smug_opt.export_smt import write_smt2
        except ModuleNotFoundError as exc:
            if exc.name != "smug_opt.export_smt":
                raise
            raise RuntimeError("SMT-LIB2 export needs smug_opt.export_smt, which this "
                               "installation lacks; 'lp' and 'mps' are available") from exc
        write_smt2(problem, path)
    else:
        raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
