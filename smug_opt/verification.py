"""Exact verification of a solution against a :class:`~smug_opt.ir.Problem`.

Each float64 in the problem and the solution is read as the exact rational it is. ReLU
outputs are not taken from the solver: they are recomputed exactly, in order, from the
binaries and the other variables (a solver's continuous values carry its tolerances).
Rows are first decided by a float64 evaluation with a rigorous error bound; any row the
bound cannot decide is evaluated in exact dyadic arithmetic (:mod:`smug_opt.exact`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt import exact
from smug_opt.ir import Problem, Sense, VarKind

__all__ = ["RowDecision", "Verification", "Violation", "ViolationKind", "decide_rows", "snap_binaries",
           "verify"]


@enum.unique
class ViolationKind(enum.Enum):
    """What a violation breaks; ``index`` then names the variable, row or ReLU."""

    BINARY = "binary"  # a binary variable is not 0 or 1
    BOUND = "bound"  # a variable is outside its bounds
    ROW = "row"  # a linear row does not hold
    RELU_BOUND = "relu-bound"  # a ReLU's pre-activation is outside its declared bounds


@dataclass(frozen=True)
class Violation:
    """One failed requirement: which kind, which index, and by how much (approximately)."""

    kind: ViolationKind
    index: int
    amount: float
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.index}: {self.detail}"


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`. ``x`` holds the completed solution (ReLU outputs
    recomputed exactly, then rounded to float64); ``objective`` is exact."""

    ok: bool
    violations: tuple[Violation, ...]
    num_violations: int
    objective: Fraction
    x: np.ndarray
    rows_checked_exactly: int

    def __bool__(self) -> bool:
        return self.ok

    def summary(self) -> str:
        if self.ok:
            return "verified exactly"
        shown = "; ".join(str(v) for v in self.violations[:3])
        more = f" (+{self.num_violations - 3} more)" if self.num_violations > 3 else ""
        return f"{self.num_violations} violation(s): {shown}{more}"


BOUND_SNAP = 1e-9
"""A continuous value at most this far (relative to ``max(1, |bound|)``) outside its
bound is moved onto the bound before verification (solvers honour bounds only to their
tolerance: CBC returned -2.5000000000000004 for a variable bounded below by -2.5)."""


def snap_binaries(problem: Problem, x: np.ndarray, tolerance: float = 1e-4) -> np.ndarray:
    """Round a solver's binary values to exact 0/1 and move continuous values that are a
    hair outside their bounds (:data:`BOUND_SNAP`) onto them; values further than
    ``tolerance`` from an integer are left as they are (and then fail verification)."""
    out = np.array(x, dtype=np.float64, copy=True).reshape(-1)
    if out.shape[0] != problem.num_vars:
        raise ValueError(f"solution has {out.shape[0]} values for {problem.num_vars} variables")
    b = problem.binary
    rounded = np.round(out[b])
    close = np.abs(out[b] - rounded) <= tolerance
    vals = out[b]
    vals[close] = rounded[close]
    out[b] = vals + 0.0  # no negative zeros
    lb, ub = problem.lb, problem.ub
    low = ~b & (out < lb) & (lb - out <= BOUND_SNAP * np.maximum(1.0, np.abs(lb)))
    high = ~b & (out > ub) & (out - ub <= BOUND_SNAP * np.maximum(1.0, np.abs(ub)))
    out[low], out[high] = lb[low], ub[high]
    return out


def _complete(problem: Problem, x: np.ndarray) -> dict[int, exact.Dyadic]:
    """Exact ReLU outputs, in order, from the solution's other values."""
    values: dict[int, exact.Dyadic] = {}
    relu_in = problem.relu_in
    x_mant, x_exp = exact.from_floats(x)  # every given value's dyadic, converted once
    a_mant, a_exp = exact.from_floats(relu_in.data)  # and every coefficient's
    c_mant, c_exp = exact.from_floats(problem.relu_const)
    indptr, indices = relu_in.indptr.tolist(), relu_in.indices.tolist()
    for r, out in enumerate(problem.relu_out.tolist()):
        lo, hi = indptr[r], indptr[r + 1]
        vals = [values[c] if c in values else (x_mant[c], x_exp[c]) for c in indices[lo:hi]]
        z = exact.dot_split(a_mant[lo:hi], a_exp[lo:hi], vals, (c_mant[r], c_exp[r]))
        values[out] = z if exact.sign(z) > 0 else exact.ZERO
        values[-1 - r] = z  # pre-activation, kept for the bound check
    return values


def verify(problem: Problem, x: np.ndarray, *, max_listed: int = 20) -> Verification:
    """Check ``x`` against every bound, row and ReLU of ``problem`` in exact arithmetic."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.shape[0] != problem.num_vars:
        raise ValueError(f"solution has {x.shape[0]} values for {problem.num_vars} variables")
    if not np.all(np.isfinite(x)):
        raise ValueError("solution contains NaN or inf")
    violations: list[Violation] = []
    count = 0

    def report(v: Violation) -> None:
        nonlocal count
        count += 1
        if len(violations) < max_listed:
            violations.append(v)

    binary = problem.kinds == VarKind.BINARY
    for j in np.flatnonzero(binary & (x != 0) & (x != 1)).tolist():
        report(Violation(ViolationKind.BINARY, j, abs(x[j] - round(x[j])), f"value {x[j]!r} is not 0 or 1"))

    exact_vals = _complete(problem, x)
    xf = x.copy()
    is_relu_out = np.zeros(problem.num_vars, dtype=bool)
    is_relu_out[problem.relu_out] = True
    for j, val in exact_vals.items():
        if j >= 0:
            xf[j] = exact.to_float(val)

    # bounds: plain variables exactly as given, relu outputs by their exact value
    plain = ~binary & ~is_relu_out
    for j in np.flatnonzero(plain & ((x < problem.lb) | (x > problem.ub))).tolist():
        report(Violation(ViolationKind.BOUND, j, float(max(problem.lb[j] - x[j], x[j] - problem.ub[j])),
                         f"value {x[j]!r} outside [{problem.lb[j]!r}, {problem.ub[j]!r}]"))
    # correct rounding is monotone: a value whose nearest float is strictly inside a float
    # bound is inside it; only the others (ties in float) are compared exactly
    outs = problem.relu_out
    z_f = np.array([exact.to_float(exact_vals[-1 - r]) for r in range(outs.size)])
    y_f = xf[outs]
    lb, ub, zlo_all, zhi_all = problem.lb[outs], problem.ub[outs], problem.relu_lo, problem.relu_hi
    inside = (y_f > lb) & (y_f < ub) & (z_f > zlo_all) & (z_f < zhi_all)
    ties = np.flatnonzero(~inside)
    lows, highs = _Bounds(lb[ties]), _Bounds(ub[ties])
    zlows, zhighs = _Bounds(zlo_all[ties]), _Bounds(zhi_all[ties])
    for k, r in enumerate(ties.tolist()):
        j = int(outs[r])
        y, z = exact_vals[j], exact_vals[-1 - r]
        if lows.crossed(k, y, -1) or highs.crossed(k, y, 1):
            y_q = exact.to_fraction(y)
            report(Violation(ViolationKind.BOUND, j, float(max(Fraction(lb[r]) - y_q, y_q - Fraction(ub[r]))),
                             f"relu output {float(y_q)!r} outside [{lb[r]!r}, {ub[r]!r}]"))
        zlo, zhi = zlo_all[r], zhi_all[r]
        below, above = zlows.crossed(k, z, -1), zhighs.crossed(k, z, 1)
        if below or above:
            z_q = exact.to_fraction(z)
            amount = float(Fraction(zlo) - z_q if below else z_q - Fraction(zhi))
            report(Violation(ViolationKind.RELU_BOUND, r, amount,
                             f"pre-activation {float(z_q)!r} outside the declared bounds "
                             f"[{zlo!r}, {zhi!r}]"))

    exactly = _check_rows(problem, x, xf, exact_vals, report)
    objective = _objective(problem, x, exact_vals)
    return Verification(
        ok=count == 0, violations=tuple(violations), num_violations=count,
        objective=objective, x=xf, rows_checked_exactly=exactly,
    )


class _Bounds:
    """Float bounds as exact dyadics, converted at once; an infinite bound is never crossed."""

    def __init__(self, bounds: np.ndarray) -> None:
        self.finite = np.isfinite(bounds).tolist()
        self.mant, self.exp = exact.from_floats(np.where(np.isfinite(bounds), bounds, 0.0))

    def crossed(self, k: int, value: exact.Dyadic, side: int) -> bool:
        """Whether ``value`` is beyond bound ``k``: below it (``side`` -1) or above it (1)."""
        return self.finite[k] and exact.compare(value, (self.mant[k], self.exp[k])) == side


@dataclass(frozen=True)
class RowDecision:
    """Every row at every point, decided exactly: ``holds[k, i]``; ``diff[k, i]`` is
    ``activity - rhs`` (exact where the float filter could not decide, else its float
    value); ``exactly`` counts the (point, row) pairs that needed exact arithmetic."""

    holds: np.ndarray
    diff: np.ndarray
    exactly: int


def decide_rows(problem: Problem, X: np.ndarray,
                exact_value: Callable[[int, int], exact.Dyadic] | None = None) -> RowDecision:
    """Decide every constraint row of ``problem`` at every point (a row of ``X``): in float64
    with the rigorous bound :func:`~smug_opt.exact.dot_error_bound`, and where that cannot
    decide (near-ties, every equality), in exact dyadic arithmetic. ``exact_value(k, j)``
    gives the exact value of variable ``j`` at point ``k`` (default: ``X[k, j]`` as the
    rational it is; :func:`verify` passes exactly recomputed ReLU outputs)."""
    A = problem.A
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    k, m = X.shape[0], A.shape[0]
    if m == 0:
        return RowDecision(np.ones((k, 0), dtype=bool), np.zeros((k, 0)), 0)
    d = np.asarray(A @ X.T).T - problem.rhs
    magnitude = np.asarray(abs(A) @ np.abs(X).T).T
    bound = exact.dot_error_bound(np.diff(A.indptr), magnitude)
    certain = np.abs(d) > 2.0 * bound + exact.UNIT_ROUNDOFF * np.abs(problem.rhs)
    holds = _sense_holds(problem.senses, np.sign(d)) & certain  # equality rows: never certain
    undecided = np.argwhere(~certain)
    if undecided.size == 0:
        return RowDecision(holds, d, 0)
    a_mant, a_exp = exact.from_floats(A.data)  # every coefficient converted once
    r_mant, r_exp = exact.from_floats(-problem.rhs)
    indptr, indices = A.indptr.tolist(), A.indices.tolist()
    points: dict[int, tuple[list[int], list[int]]] = {}
    signs = np.zeros(undecided.shape[0], dtype=np.int64)
    for n, (point, i) in enumerate(undecided.tolist()):
        lo, hi = indptr[i], indptr[i + 1]
        if exact_value is None:
            if point not in points:
                points[point] = exact.from_floats(X[point])
            x_mant, x_exp = points[point]
            vals = [(x_mant[j], x_exp[j]) for j in indices[lo:hi]]
        else:
            vals = [exact_value(point, j) for j in indices[lo:hi]]
        diff = exact.dot_split(a_mant[lo:hi], a_exp[lo:hi], vals, (r_mant[i], r_exp[i]))
        signs[n] = exact.sign(diff)
        d[point, i] = exact.to_float(diff)
    holds[undecided[:, 0], undecided[:, 1]] = _sense_holds(problem.senses[undecided[:, 1]], signs)
    return RowDecision(holds, d, int(undecided.shape[0]))


def _sense_holds(senses: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Whether ``activity - rhs`` of sign ``sign`` meets each row's sense."""
    table = {Sense.LE: sign <= 0, Sense.GE: sign >= 0, Sense.EQ: sign == 0,
             Sense.LT: sign < 0, Sense.GT: sign > 0}
    return np.select([senses == s for s in table], list(table.values()), default=False)


def _check_rows(
    problem: Problem,
    x: np.ndarray,
    xf: np.ndarray,
    exact_vals: dict[int, exact.Dyadic],
    report: Callable[[Violation], None],
) -> int:
    """Check every row; returns how many rows needed exact arithmetic."""
    x_mant, x_exp = exact.from_floats(x)
    decision = decide_rows(problem, xf, lambda _, c: exact_vals[c] if c in exact_vals
                           else (x_mant[c], x_exp[c]))
    for i in np.flatnonzero(~decision.holds[0]).tolist():
        report(_row_violation(problem, i, float(decision.diff[0, i])))
    return decision.exactly


def _row_violation(problem: Problem, i: int, diff: float) -> Violation:
    sense = Sense(problem.senses[i])
    return Violation(ViolationKind.ROW, i, abs(diff),
                     f"activity - rhs = {diff!r}, required {sense.symbol} 0")


def _objective(problem: Problem, x: np.ndarray, exact_vals: dict[int, exact.Dyadic]) -> Fraction:
    recomputed = np.zeros(x.size, dtype=bool)
    recomputed[[c for c in exact_vals if c >= 0]] = True
    # a variable at exactly 0 adds nothing (unless its exact value was recomputed)
    cols = np.flatnonzero((problem.objective != 0) & ((x != 0) | recomputed)).tolist()
    vals = [exact_vals[c] if c in exact_vals else exact.from_float(x[c]) for c in cols]
    return exact.to_fraction(exact.dot(problem.objective[cols], vals))
