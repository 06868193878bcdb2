"""Exact verification agrees with Fraction arithmetic, on the boundary too."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smug_opt import Problem, ProblemBuilder, exact, verify
from smug_opt.verification import ViolationKind, snap_binaries

floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False,
                   allow_subnormal=True)


def _fraction_holds(row, x, sense, rhs) -> bool:
    act = sum((Fraction(a) * Fraction(v) for a, v in zip(row, x, strict=True)), Fraction(0)) - Fraction(rhs)
    return {">": act > 0, ">=": act >= 0, "<": act < 0, "<=": act <= 0, "==": act == 0}[sense]


@settings(max_examples=300, deadline=None)
@given(
    row=st.lists(floats, min_size=1, max_size=8),
    bits=st.lists(st.booleans(), min_size=8, max_size=8),
    sense=st.sampled_from([">", ">=", "<", "<=", "=="]),
    shift=st.sampled_from([0.0, 1e-17, -1e-17, 1e-300]),
)
def test_rows_match_fraction_arithmetic(row, bits, sense, shift):
    x = np.array(bits[: len(row)], dtype=float)
    # put the rhs on (or next to) the float sum of the selected coefficients: the hard case
    rhs = float(np.sum(np.array(row) * x)) + shift
    p = Problem.from_arrays(np.array([row]), sense, [rhs])
    assert verify(p, x).ok == _fraction_holds(row, x, sense, rhs)


def test_exact_dot_is_exact():
    coef = np.array([0.1, 0.2, -0.3, 1e-300, 1e300, -1e300])
    vals = [exact.from_float(v) for v in (1.0, 1.0, 1.0, 3.0, 0.5, 0.5)]
    want = sum(Fraction(a) * Fraction(v) for a, v in zip(coef, (1.0, 1.0, 1.0, 3.0, 0.5, 0.5), strict=True))
    assert exact.to_fraction(exact.dot(coef, vals, 0.25)) == want + Fraction(0.25)


def test_relu_outputs_are_recomputed_not_trusted():
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 5.0)
    b.add_relus(y, [[1.0, 2.0]], m, -1.0, lo=-1.0, hi=2.0)
    b.add_constraints([[1.0]], y, ">", 1.5)
    p = b.build()
    v = verify(p, np.array([1.0, 1.0, 123.0]))  # solver's y is garbage; exact y = 2
    assert v.ok and v.x[2] == 2.0
    assert not verify(p, np.array([1.0, 0.0, 2.0])).ok  # exact y = 0


def test_declared_relu_bounds_are_checked():
    b = ProblemBuilder()
    m = b.add_binaries(1)
    y = b.add_continuous(1, 0.0, 5.0)
    b.add_relus(y, [[3.0]], m, 0.0, lo=-1.0, hi=2.0)  # wrong: z reaches 3
    v = verify(b.build(), np.array([1.0, 0.0]))
    assert not v.ok and v.violations[0].kind is ViolationKind.RELU_BOUND


@settings(max_examples=200, deadline=None)
@given(a=floats, c=floats, bound_shift=st.sampled_from([0.0, 1e-17, -1e-17, 1e-300, -1e-300]),
       side=st.sampled_from(["lo", "hi", "ub"]))
def test_relu_bounds_on_their_boundary_match_fraction_arithmetic(a, c, bound_shift, side):
    """A pre-activation or output that rounds onto its bound is compared exactly."""
    z = Fraction(a) + Fraction(c)  # the exact pre-activation at M = 1
    y = max(z, Fraction(0))
    edge = float(z if side != "ub" else y) + bound_shift
    lo, hi, ub = -1e7, 1e7, 1e7
    if side == "lo":
        lo = edge
    elif side == "hi":
        hi = edge
    else:
        ub = max(edge, 0.0)
    if not lo <= hi:
        return
    b = ProblemBuilder()
    m = b.add_binaries(1)
    out = b.add_continuous(1, 0.0, ub)
    b.add_relus(out, [[a]], m, c, lo=lo, hi=hi)
    want = Fraction(lo) <= z <= Fraction(hi) and y <= Fraction(ub)
    assert verify(b.build(), np.array([1.0, 0.0])).ok == want


def test_non_binary_values_fail_and_snap_rounds_close_ones():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    assert not verify(p, np.array([0.5, 0.5])).ok
    snapped = snap_binaries(p, np.array([0.99999999, 1e-9]))
    assert snapped.tolist() == [1.0, 0.0]
    assert snap_binaries(p, np.array([0.3, -0.0])).tolist() == [0.3, 0.0]


def test_large_problem_uses_the_float_filter():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(500, 400))
    x = (rng.random(400) < 0.5).astype(float)
    p = Problem.from_arrays(A, ">", A @ x - 1.0)
    v = verify(p, x)
    assert v.ok and v.rows_checked_exactly == 0
    q = Problem.from_arrays(A, ">=", A @ x)  # rhs equals the float activity: undecided in floats
    assert verify(q, x).rows_checked_exactly == 500


def test_shape_errors():
    p = Problem.from_arrays([[1.0, 1.0]], ">=", [1.0])
    with pytest.raises(ValueError, match="2 variables"):
        verify(p, np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        verify(p, np.array([np.nan, 0.0]))


def test_snap_moves_a_hair_outside_a_bound_onto_it() -> None:
    b = ProblemBuilder()
    z = b.add_continuous(2, -2.5, 4.0)
    b.add_constraints([[1.0, 1.0]], z, ">=", [-5.0])
    b.set_objective(z, [1.0, 1.0])
    p = b.build()
    x = np.array([-2.5000000000000004, 4.1])  # CBC's -2.5 (one ulp out); 4.1 is truly out
    snapped = snap_binaries(p, x)
    assert snapped.tolist() == [-2.5, 4.1]
    assert not verify(p, x).ok and [v.index for v in verify(p, snapped).violations] == [1]


def test_one_decider_for_one_point_and_for_every_assignment() -> None:
    """verify and the brute force decide rows with the same function (decide_rows): on
    near-ties, where float64 is wrong, a batch of assignments gets exactly verify's verdicts."""
    import itertools

    from smug_opt.testing.instances import EQUALITY, NEAR_TIES, STRICT
    from smug_opt.verification import decide_rows

    problems = [p for p, *_ in [*NEAR_TIES.values(), *STRICT.values(), *EQUALITY.values()]]
    for problem in problems:
        X = np.array(list(itertools.product((0.0, 1.0), repeat=problem.num_vars)))
        decision = decide_rows(problem, X)
        assert decision.holds.shape == (X.shape[0], problem.num_rows)
        assert decision.holds.all(axis=1).tolist() == [verify(problem, x).ok for x in X]
    tie = NEAR_TIES["0.1x1+0.2x2 >= 0.30000000000000004"][0]
    decision = decide_rows(tie, np.array([[1.0, 1.0]]))
    assert not decision.holds[0, 0] and decision.exactly == 1 and decision.diff[0, 0] < 0


def test_check_memo_verifies_each_solution_once_and_agrees_with_verify():
    """A race's start and a solver's returned incumbent are the same solution: the memo
    hands back the first check instead of running the exact check again (after the time
    limit, at load 15, that second check is what pushed jobs past their grace)."""
    from smug_opt.check_memo import CheckMemo

    p = Problem.from_arrays(np.array([[1.0, 1.0]]), ">=", [1.0])
    memo = CheckMemo(p)
    first = memo(np.array([1.0, 0.0]))
    assert first.ok and first.ok == verify(p, np.array([1.0, 0.0])).ok
    assert memo(np.array([1.0 - 1e-7, 1e-9])) is first  # binaries snapped: the same solution
    other = memo(np.array([0.0, 0.0]))
    assert other is not first and not other.ok and other.summary() == verify(p, np.zeros(2)).summary()
