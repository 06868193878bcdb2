"""The ``integer_rows`` piece: each strict real row replaced by an integer row that accepts
exactly the same 0/1 patterns (checked in exact rational arithmetic), and the optimum of
stem-like problems the same with and without it (brute force)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt import Problem, ProblemBuilder
from smug_opt.strengthen import Pieces, strengthen
from smug_opt.strengthen.integer_rows import integer_row
from smug_opt.strengthen.rows import pattern_bits
from smug_opt.testing import brute_force

_settings = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_coefficient = st.one_of(
    st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False),
    st.sampled_from([0.1, 0.2, 0.3, -0.3, 1e-9, -1e-9, 0.5, -0.25]))  # exact ties in reals


def _exact_table(coefs: np.ndarray, rhs: float, bits: np.ndarray) -> np.ndarray:
    exact = [Fraction(float(a)) for a in coefs]
    return np.array([sum((a for a, b in zip(exact, p, strict=True) if b), Fraction(0))
                     > Fraction(rhs) for p in bits.tolist()])


@_settings
@given(coefs=st.lists(_coefficient, min_size=1, max_size=9), rhs=st.sampled_from([0.0, 0.3, -0.1]))
def test_an_integer_row_accepts_exactly_the_real_rows_patterns(coefs, rhs) -> None:
    coefs = np.array(coefs)
    bits = pattern_bits(coefs.size)
    allowed = _exact_table(coefs, rhs, bits)
    everything = np.ones(bits.shape[0], dtype=bool)
    found = integer_row(coefs, bits, allowed, everything)
    if found is None:
        assert not allowed.any() or np.abs(coefs).max() > 0
        return
    w, t = found
    assert w.dtype == np.int64
    assert np.array_equal(bits.astype(np.int64) @ w >= t, allowed)


def test_a_homogeneous_row_relaxes_above_the_empty_mask() -> None:
    """``x0 + x1 - 2 x2 > 0`` is ``x0 + x1 - 2 x2 >= 1`` (and the real relaxation
    ``>= 0`` admits the empty mask, the integer one does not)."""
    bits = pattern_bits(3)
    coefs = np.array([0.5, 0.5, -1.0])
    w, t = integer_row(coefs, bits, _exact_table(coefs, 0.0, bits), np.ones(8, dtype=bool))
    assert w.tolist() == [1, 1, -2] and t == 1


@st.composite
def stem_like(draw: st.DrawFn) -> Problem:
    """Homogeneous strict rows ``a·M > 0`` over windows of a row of cells (as a conv's
    receptive fields overlap), several rows per window, mixed signs, each satisfiable."""
    n = draw(st.integers(4, 10))
    width = draw(st.integers(2, min(n, 7)))
    builder = ProblemBuilder()
    x = builder.add_binaries(n)
    rows = []
    for start in range(0, n - width + 1, draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            a = np.zeros(n)
            a[start:start + width] = draw(st.lists(_coefficient, min_size=width, max_size=width))
            if a.max() > 0:
                rows.append(a)
    if not rows:
        rows.append(np.eye(n)[0])
    builder.add_constraints(np.array(rows), x, ">", 0.0)
    builder.set_objective(x, 1.0)
    return builder.build()


@_settings
@given(problem=stem_like(), implied=st.booleans())
def test_the_optimum_is_the_same_with_and_without_integer_rows(problem: Problem, implied) -> None:
    """Brute force over the original, and over the strengthened parts with integer rows on
    and off (``implied`` off: every row of a support is replaced, not only those the
    clauses leave): one optimum."""
    exact = brute_force(problem)
    for on in (True, False):
        s = strengthen(problem, Pieces(implied=implied, integer_rows=on))
        if not s.applied:
            assert not exact.feasible
            continue
        answers = [brute_force(part.problem) for part in s.parts]
        assert all(a.feasible for a in answers) == exact.feasible
        if exact.feasible:
            assert s.offset + sum((a.objective for a in answers), Fraction(0)) == exact.objective


def test_a_paper_scale_stem_keeps_no_strict_row() -> None:
    """On a bias-free 7×7/2 stem (k = 3000, 9 cells a window) the clauses leave hundreds
    of strict rows; integer rows replace all but a few, and the parts' rows are integers."""
    from smug_opt.bench.generators import random_first_layer_problem

    problem = random_first_layer_problem(3000, seed=0, use_bias=False)
    without = strengthen(problem, Pieces(integer_rows=False))
    with_rows = strengthen(problem, Pieces())
    left_before = problem.num_rows - without.stats["rows_removed"]
    left_after = problem.num_rows - with_rows.stats["rows_removed"]
    assert left_before > 50 and left_after <= left_before // 20
    assert with_rows.stats["integer_rows"] == with_rows.stats["rows_removed"] - without.stats["rows_removed"]
    strict = sum(int(np.count_nonzero(part.problem.senses >= 3)) for part in with_rows.parts)
    assert strict == left_after
