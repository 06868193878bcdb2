"""Export a problem for outside solvers: LP and free MPS (MILP) or SMT-LIB2.

LP and MPS are faithful: every coefficient, right-hand side, bound and cost of the
problem is written as it is, in its shortest round-trip form (``repr``), unscaled, with
nothing dropped, so a reader gets exactly the float64 problem. The one deliberate change
is the strict-row margin, because LP and MPS have no strict relations: at tightening
level ``L >= 1`` (the default is 1) a strict row ``a·x > b`` is written ``a·x >= b + δ``
(``a·x < b`` as ``a·x <= b - δ``) with ``δ = strict_margin(L, ‖a‖₁/‖a‖∞)·‖a‖∞``
(:func:`smug_opt.bridges.strict_margin`: 1e-6·(1 + ‖a‖₁/(10‖a‖∞))·‖a‖∞ at level 1, ten
times more per level, and at least one ulp of ``b``), so any solution of the file satisfies
the strict row by a margin above MILP solvers' tolerances; at level 0 strict rows are written non-strict (a
relaxation). Non-strict rows are never changed. A header comment states the margin.

Column ``x{j}`` is the problem's variable ``j``; columns past ``num_vars`` are ReLU phase
binaries of the big-M rows (:func:`smug_opt.bridges.big_m_relus`, from interval bounds on
the pre-activations), which follow the problem's rows. Row ``r{i}`` is the problem's row
``i`` (rows bounded on both sides become ``r{i}_lo`` and ``r{i}_hi``); an empty row is
decided exactly: left out when it holds, written ``0 x0 >= 1`` when it does not.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from smug_opt.bridges.intervals import relu_preactivation_bounds
from smug_opt.bridges.milp import big_m_relus, strict_margin
from smug_opt.ir import Problem, Sense

__all__ = ["DEFAULT_LEVEL", "FORMATS", "export", "export_margins", "write_lp", "write_mps"]

FORMATS = ("lp", "mps", "smt2")
DEFAULT_LEVEL = 1
"""The tightening level LP/MPS exports use unless told otherwise (see the module docstring)."""

_TERMS_PER_LINE = 8
_HOLDS = {Sense.LE: lambda d: d <= 0, Sense.GE: lambda d: d >= 0, Sense.EQ: lambda d: d == 0,
          Sense.LT: lambda d: d < 0, Sense.GT: lambda d: d > 0}


def export_margins(problem: Problem, level: int = DEFAULT_LEVEL) -> np.ndarray:
    """The margin ``δ`` each of the problem's rows gets in an LP/MPS export at ``level``:
    0 for non-strict rows, empty rows and at level 0."""
    if level < 0:
        raise ValueError(f"level must be 0 or more, got {level!r}")
    A = abs(problem.A)
    inf_norm = np.asarray(A.max(axis=1).todense()).ravel() if A.shape[0] else np.zeros(0)
    one_norm = np.asarray(A.sum(axis=1)).ravel()
    strict = (problem.senses == Sense.LT) | (problem.senses == Sense.GT)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(inf_norm > 0, one_norm / np.where(inf_norm > 0, inf_norm, 1.0), 0.0)
    margin = np.asarray(strict_margin(level, ratio), dtype=np.float64) * inf_norm
    return np.where(strict & (inf_norm > 0) & (level > 0), margin, 0.0)


@dataclass(frozen=True)
class _Form:
    """What LP/MPS write: rows ``lo <= A v <= hi`` (one name each), columns, costs."""

    A: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    names: list[str]
    col_lb: np.ndarray
    col_ub: np.ndarray
    integer: np.ndarray
    objective: np.ndarray
    num_problem_vars: int

    @property
    def num_cols(self) -> int:
        return int(self.A.shape[1])


def _form(problem: Problem, level: int) -> _Form:
    n, m = problem.num_vars, problem.num_rows
    z_lo, z_hi, lb, ub = relu_preactivation_bounds(problem)
    block, blo, bhi, n_phase = big_m_relus(problem, z_lo, z_hi, lb, ub)
    senses, rhs = problem.senses, problem.rhs
    margin = export_margins(problem, level)
    up = np.where(margin > 0, np.maximum(rhs + margin, np.nextafter(rhs, np.inf)), rhs)
    down = np.where(margin > 0, np.minimum(rhs - margin, np.nextafter(rhs, -np.inf)), rhs)
    lo = np.where(np.isin(senses, [Sense.GE, Sense.GT, Sense.EQ]), up, -np.inf)
    hi = np.where(np.isin(senses, [Sense.LE, Sense.LT, Sense.EQ]), down, np.inf)
    A = sp.csr_matrix(problem.A, shape=(m, n))
    A.resize((m, n + n_phase))
    keep, rows_lo, rows_hi, names = [], [], [], []
    unmet = False
    empty = np.diff(A.indptr) == 0
    for i in range(m):
        if empty[i]:  # decided here, exactly: 0 SENSE rhs
            unmet = unmet or not _HOLDS[Sense(senses[i])](-Fraction(rhs[i]))
            continue
        keep.append(i)
        rows_lo.append(lo[i])
        rows_hi.append(hi[i])
        names.append(f"r{i}")
    blocks = [A[np.asarray(keep, dtype=np.int64)], block]
    names += [f"relu{k}" for k in range(block.shape[0])]
    rows_lo += blo.tolist()
    rows_hi += bhi.tolist()
    if unmet:
        blocks.append(sp.csr_matrix(([0.0], ([0], [0])), shape=(1, n + n_phase)))
        names.append("unmet_empty_row")
        rows_lo.append(1.0)
        rows_hi.append(np.inf)
    return _Form(
        A=sp.vstack(blocks, format="csr"), lo=np.asarray(rows_lo, dtype=np.float64),
        hi=np.asarray(rows_hi, dtype=np.float64), names=names,
        col_lb=np.concatenate([lb, np.zeros(n_phase)]), col_ub=np.concatenate([ub, np.ones(n_phase)]),
        integer=np.concatenate([problem.binary, np.ones(n_phase, dtype=bool)]),
        objective=np.concatenate([problem.objective, np.zeros(n_phase)]), num_problem_vars=n,
    )


class _Rows:
    """The form's rows as one-sided or equality rows: names, senses (``G``/``L``/``E``),
    right-hand sides and their coefficient matrix (two-sided rows split in two)."""

    def __init__(self, form: _Form) -> None:
        lo, hi = form.lo, form.hi
        eq = lo == hi
        has_lo = ~eq & (lo > -np.inf)
        has_hi = ~eq & (hi < np.inf)
        both = has_lo & has_hi
        names, senses, rhs, source = [], [], [], []
        for i, base in enumerate(form.names):
            for flag, sense, value, suffix in ((eq[i], "E", lo[i], ""), (has_lo[i], "G", lo[i], "_lo"),
                                               (has_hi[i], "L", hi[i], "_hi")):
                if flag:
                    names.append(f"{base}{suffix if both[i] else ''}")
                    senses.append(sense)
                    rhs.append(float(value))
                    source.append(i)
        self.names = names
        self.senses = senses
        self.rhs = rhs
        self.matrix: sp.csr_matrix = form.A[np.asarray(source, dtype=np.int64)]


def _header(problem: Problem, form: _Form, level: int) -> list[str]:
    strict = (problem.senses == Sense.LT) | (problem.senses == Sense.GT)
    lines = [f"smug-opt export of {problem!r} at tightening level {level}",
             "every coefficient, bound and cost as in the problem (shortest round-trip repr, unscaled)"]
    if strict.any():
        if level == 0:
            lines.append(f"{int(strict.sum())} strict row(s) (< or >) written as non-strict "
                         "(<= or >=) with no margin: a relaxation")
        else:
            margins = export_margins(problem, level)[strict]
            margins = margins[margins > 0] if (margins > 0).any() else margins
            spread = f"{margins.min():.3g}" + (f" to {margins.max():.3g}"
                                                 if margins.max() > margins.min() else "")
            lines.append(f"{int(strict.sum())} strict row(s) (< or >): LP/MPS have no strict "
                         f"relations, so each is tightened by a margin of {spread} "
                         f"(strict_margin({level}, |a|_1/|a|_inf) * |a|_inf); non-strict rows "
                         "are unchanged")
    lines.append(f"columns x0..x{problem.num_vars - 1} are the problem's variables"
                 + (f", x{problem.num_vars}..x{form.num_cols - 1} ReLU phase binaries"
                    if form.num_cols > problem.num_vars else ""))
    return lines


def _number(value: float) -> str:
    return repr(float(value) + 0.0)  # shortest round-trip form; no "-0.0"


def _numbers(values: np.ndarray) -> list[str]:
    """``_number`` of many values (``repr`` is the fastest exact formatting there is)."""
    return [repr(v) for v in (np.asarray(values, dtype=np.float64) + 0.0).tolist()]


def write_mps(problem: Problem, path: str | os.PathLike[str], *, level: int = DEFAULT_LEVEL) -> None:
    """Write ``problem`` as free MPS (strict rows with the margin of ``level``)."""
    form = _form(problem, level)
    rows = _Rows(form)
    out = [f"* {line}" for line in _header(problem, form, level)]
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


def write_lp(problem: Problem, path: str | os.PathLike[str], *, level: int = DEFAULT_LEVEL) -> None:
    """Write ``problem`` in CPLEX LP format (strict rows with the margin of ``level``)."""
    form = _form(problem, level)
    rows = _Rows(form)
    out = [f"\\ {line}" for line in _header(problem, form, level)]
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


def export(problem: Problem, fmt: str, path: str | os.PathLike[str], *, level: int = DEFAULT_LEVEL,
           dialect: str = "z3", bound: float | None = None) -> None:
    """Write ``problem`` to ``path`` as ``"lp"`` or ``"mps"`` (strict rows with the margin of
    tightening ``level``) or ``"smt2"`` (in ``dialect`` ``"z3"`` or ``"standard"``, the latter
    asking whether a solution with objective ``<= bound`` exists; see
    :mod:`smug_opt.export_smt`)."""
    key = str(fmt).lower().lstrip(".")
    if key in ("lp", "mps"):
        if dialect != "z3" or bound is not None:
            raise ValueError(f"dialect and bound apply to smt2 exports, not {key}")
        (write_lp if key == "lp" else write_mps)(problem, path, level=level)
    elif key == "smt2":
        if level != DEFAULT_LEVEL:
            raise ValueError("smt2 exports are exact (strict rows stay strict): level does not apply")
        try:
            from smug_opt.export_smt import write_smt2
        except ModuleNotFoundError as exc:
            if exc.name != "smug_opt.export_smt":
                raise
            raise RuntimeError("SMT-LIB2 export needs smug_opt.export_smt, which this "
                               "installation lacks; 'lp' and 'mps' are available") from exc
        write_smt2(problem, path, dialect=dialect, bound=bound)
    else:
        raise ValueError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
