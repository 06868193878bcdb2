"""Real→integer scaling: outward rows keep every exact solution, inward rows admit only exact ones."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt import Problem, ProblemBuilder, verify
from smug_opt.bridges.integer import IntegerForm, to_integer

SENSES = ["<=", ">=", "<", ">", "=="]


def _holds(form: IntegerForm, X: list[int]) -> bool:
    """Exact check of every integer row, domain and max constraint at integer point ``X``."""
    if any(not lo <= x <= hi for x, lo, hi in zip(X, form.lb.tolist(), form.ub.tolist(), strict=True)):
        return False
    if any(X[out] != max(X[z], 0) for out, z in form.maxes):
        return False
    C = form.C
    for i in range(form.num_rows):
        lo, hi = C.indptr[i], C.indptr[i + 1]
        act = sum(int(c) * X[j] for c, j in zip(C.data[lo:hi], C.indices[lo:hi], strict=True))
        if (form.row_lo[i] is not None and act < form.row_lo[i]) or (
                form.row_hi[i] is not None and act > form.row_hi[i]):
            return False
    return True


def _binary_points(n: int):
    for bits in itertools.product((0, 1), repeat=n):
        yield list(bits)


@st.composite
def wide_rows(draw: st.DrawFn) -> Problem:
    """Binary problems whose rows mix magnitudes 1e-12..1e12 and sit on near-ties."""
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 3))
    A = np.zeros((m, n))
    rhs = np.zeros(m)
    for i in range(m):
        exps = draw(st.lists(st.floats(-12, 12), min_size=n, max_size=n))
        signs = draw(st.lists(st.sampled_from([-1.0, 1.0, 0.0]), min_size=n, max_size=n))
        A[i] = np.array(signs) * 10.0 ** np.array(exps)
        subset = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        tie = float(np.sum(A[i][np.array(subset)]))  # float sum: an exact or near tie
        rhs[i] = draw(st.sampled_from([tie, np.nextafter(tie, np.inf), np.nextafter(tie, -np.inf),
                                       tie * (1 + 1e-12), 0.0]))
    senses = draw(st.lists(st.sampled_from(SENSES), min_size=m, max_size=m))
    return Problem.from_arrays(A, senses, rhs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide_rows())
def test_outward_keeps_and_inward_admits_only_exact_solutions(problem: Problem) -> None:
    """Level 0 contains every exactly feasible binary point; levels >= 1 contain no other."""
    forms = [to_integer(problem, level) for level in range(3)]
    for x in _binary_points(problem.num_vars):
        exact = verify(problem, np.array(x, dtype=float)).ok
        if exact:
            assert _holds(forms[0], x), f"level 0 cut off the exact solution {x}"
        for form in forms[1:]:
            if _holds(form, x):
                assert exact, f"level {form.level} admits the infeasible point {x}"


@settings(max_examples=100, deadline=None)
@given(wide_rows())
def test_activity_fits_the_budget(problem: Problem) -> None:
    """Σ|c|·max|X| of every row stays below 2**activity_bits, and row_lo <= row_hi."""
    form = to_integer(problem, 1)
    C = form.C
    for i in range(form.num_rows):
        lo, hi = C.indptr[i], C.indptr[i + 1]
        assert sum(abs(int(c)) for c in C.data[lo:hi]) < 2**form.activity_bits
        assert form.row_lo[i] is None or form.row_hi[i] is None or form.row_lo[i] <= form.row_hi[i]


def test_integer_rows_are_exact_strictness_included() -> None:
    """x1 + x2 > 1 becomes X1 + X2 >= 2 already at level 0."""
    form = to_integer(Problem.from_arrays([[1.0, 1.0]], ">", 1.0), 0)
    assert form.C.toarray().tolist() == [[1, 1]]
    assert form.row_lo == (2,) and form.row_hi == (None,)


def test_float_ties_are_decided_exactly() -> None:
    """0.1 + 0.2 (exactly 0.30000000000000001665...) is > 0.3 but not > 0.30000000000000004:
    level 0 keeps the feasible point, levels 1+ reject the infeasible one (and, as a gap of
    1e-16 relative is below the 40-bit resolution, the feasible one too)."""
    feasible = Problem.from_arrays([[0.1, 0.2]], ">", 0.3)
    infeasible = Problem.from_arrays([[0.1, 0.2]], ">", 0.1 + 0.2)
    assert verify(feasible, np.ones(2)).ok and not verify(infeasible, np.ones(2)).ok
    assert _holds(to_integer(feasible, 0), [1, 1])
    for level in (1, 2, 3):
        assert not _holds(to_integer(infeasible, level), [1, 1])


def test_rows_without_an_integer_activity_stay_well_formed() -> None:
    """x1 + x2 == 2**-40 has no integer activity: an unsatisfiable row, never lo > hi."""
    form = to_integer(Problem.from_arrays([[1.0, 1.0]], "==", 2.0**-40), 1)
    for lo, hi in zip(form.row_lo, form.row_hi, strict=True):
        assert lo is None or hi is None or lo <= hi
    assert not any(_holds(form, x) for x in _binary_points(2))


def test_bad_parameters_are_named() -> None:
    p = Problem.from_arrays([[1.0]], ">=", 1.0)
    to_integer(p, 0, coefficient_bits=8)  # no continuous variable: the grid plays no part
    b = ProblemBuilder()
    b.add_constraints([[1.0]], b.add_continuous(1, 0.0, 1.0), ">=", 0.5)
    with pytest.raises(ValueError, match="grid_bits"):
        to_integer(b.build(), 0, grid_bits=50)
    with pytest.raises(ValueError, match="level"):
        to_integer(p, -1)
    with pytest.raises(ValueError, match="relu encoding"):
        to_integer(p, 0, relu="sigmoid")


# ------------------------------------------------------------------ ReLU networks
@st.composite
def tiny_nets(draw: st.DrawFn) -> Problem:
    """Masks on 2..4 inputs, 2 + (0..2) ReLUs in two layers, a strict row on the outputs."""
    n = draw(st.integers(2, 4))
    h1 = draw(st.integers(1, 2))
    h2 = draw(st.integers(0, 2))
    weight = st.floats(-3, 3).map(lambda e: 10.0**e) | st.floats(-3, 3).map(lambda e: -(10.0**e))
    b = ProblemBuilder()
    x = b.add_binaries(n)
    y1 = b.add_continuous(h1, 0.0, 1e4)
    W1 = np.array(draw(st.lists(weight, min_size=h1 * n, max_size=h1 * n))).reshape(h1, n)
    c1 = np.array(draw(st.lists(st.floats(-5, 5), min_size=h1, max_size=h1)))
    b.add_relus(y1, W1, x, c1)
    outs = list(y1)
    if h2:
        y2 = b.add_continuous(h2, 0.0, 1e8)
        W2 = np.array(draw(st.lists(weight, min_size=h2 * h1, max_size=h2 * h1))).reshape(h2, h1)
        b.add_relus(y2, W2, y1, np.zeros(h2))
        outs += list(y2)
    w = np.array(draw(st.lists(weight, min_size=len(outs), max_size=len(outs))))
    b.add_constraints(w[None, :], outs, draw(st.sampled_from([">", ">=", "<"])),
                      draw(st.floats(-10, 10)))
    b.set_objective(x, 1.0)
    return b.build()


def _exact_relus(problem: Problem, x: list[int]) -> dict[int, Fraction]:
    values: dict[int, Fraction] = {j: Fraction(v) for j, v in enumerate(x)}
    pre: dict[int, Fraction] = {}
    R = problem.relu_in
    assert R is not None
    for r, out in enumerate(problem.relu_out.tolist()):
        lo, hi = R.indptr[r], R.indptr[r + 1]
        z = Fraction(problem.relu_const[r]) + sum(
            (Fraction(a) * values[j] for a, j in zip(R.data[lo:hi], R.indices[lo:hi], strict=True)),
            Fraction(0))
        pre[r] = z
        values[out] = max(z, Fraction(0))
    return values | {-1 - r: z for r, z in pre.items()}


def _grid_point(problem: Problem, form: IntegerForm, values: dict[int, Fraction],
                shift: list[int], relu: str) -> list[int]:
    """Binaries, ReLU values rounded to the grid (pre-activations or outputs moved by
    ``shift``), exact phases (big-M) or outputs recomputed by ``max`` (max)."""
    from smug_opt.bridges.intervals import relu_preactivation_bounds

    X = [0] * form.num_cols
    for j in range(problem.num_vars):
        X[j] = round(values[j] * 2 ** int(form.exponent[j]))
    z_lo, z_hi, _, _ = relu_preactivation_bounds(problem)
    extra = iter(range(problem.num_vars, form.num_cols))
    for r, y in enumerate(problem.relu_out.tolist()):
        if not z_lo[r] < 0 < z_hi[r]:
            X[y] += shift[r]
        elif relu == "big-m":
            X[next(extra)] = int(values[-1 - r] > 0)
            X[y] += shift[r]
        else:
            z = next(extra)
            X[z] = round(values[-1 - r] * 2 ** int(form.exponent[z])) + shift[r]
            X[y] = max(X[z], 0)
    return X


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_nets(), st.lists(st.integers(-3, 3), min_size=4, max_size=4),
       st.sampled_from(["big-m", "max"]))
def test_relu_grid_relaxation_and_restriction(problem: Problem, shift: list[int], relu: str) -> None:
    """The rounded exact point satisfies every level-0 row; any grid point near it that
    satisfies the level-1 rows is, after exact recomputation, feasible."""
    forms = [to_integer(problem, level, relu=relu) for level in (0, 1)]
    for x in _binary_points(int(problem.binary.sum())):
        values = _exact_relus(problem, x)
        exact = verify(problem, np.array([float(values[j]) for j in range(problem.num_vars)])).ok
        X0 = _grid_point(problem, forms[0], values, [0] * problem.num_relus, relu)
        if exact:
            assert _holds(forms[0], X0), f"level 0 cut off the exact solution at {x}"
        X1 = _grid_point(problem, forms[1], values, shift[: problem.num_relus], relu)
        if _holds(forms[1], X1):
            assert exact, f"level 1 admits {x}, which is infeasible"


def test_max_encoding_shares_the_grid() -> None:
    """relu="max": one row and one pre-activation column per undecided ReLU, on its output's grid."""
    b = ProblemBuilder()
    x = b.add_binaries(2)
    y = b.add_continuous(2, 0.0, 10.0)
    b.add_relus(y, [[1.0, -2.0], [1.0, 1.0]], x, [0.5, 0.5])  # undecided; always > 0
    b.add_constraints([[1.0, 1.0]], y, ">", 1.0)
    form = to_integer(b.build(), 0, relu="max")
    assert form.num_cols == 5 and form.maxes == ((2, 4),) and form.num_rows == 3
    assert form.exponent[2] == form.exponent[4]


def test_objective_bound_is_valid_for_real_costs() -> None:
    """A non-integral objective is scaled; its bound, minus the error, stays below the optimum."""
    costs = np.array([0.1, 1e-7, 3.3, 1e5 / 3])
    p = Problem.from_arrays([[1.0, 1.0, 1.0, 1.0]], ">=", 2.0, objective=costs)
    form = to_integer(p, 0)
    best = min(Fraction(0) + sum(Fraction(c) for c, b in zip(costs, x, strict=True) if b)
               for x in _binary_points(4) if sum(x) >= 2)
    int_opt = min(int(np.dot(form.objective.astype(object), np.array(x, dtype=object)))
                  for x in _binary_points(4) if _holds(form, x))
    assert form.objective_error > 0
    assert Fraction(form.objective_bound(int_opt)) <= best
