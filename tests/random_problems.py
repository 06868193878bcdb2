"""Random small binary problems for property tests: SMUG first-layer shapes and generic rows
with near-tie coefficients and right-hand sides at (or one float step from) an assignment's
exact activity, where a floating-point solver is most easily wrong."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from smug_opt import Problem

MAX_BINARIES = 14

_NEAR_TIES = [0.1, 0.2, 0.3, 0.30000000000000004, 0.6, 1 / 3, 2 / 3, 0.7, 1e-9, 2.0**-40,
              1e12, 1e16, 1.0 + 2.0**-52]

coefficient = st.one_of(
    st.just(0.0),
    st.integers(-5, 5).map(float),
    st.sampled_from(_NEAR_TIES + [-v for v in _NEAR_TIES]),
    st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False),
    st.builds(lambda m, e: m * 2.0**e, st.integers(-9, 9), st.integers(-40, 40)),  # wide ranges
)
SENSES = ["<=", ">=", "==", "<", ">"]


@st.composite
def first_layer_like(draw: st.DrawFn) -> Problem:
    """SMUG's shape: ``sum_c a_tc M_c + b_t > gamma (sum_c a_tc + b_t)``, minimise the count."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cells, neurons, pixels = draw(st.integers(1, 9)), draw(st.integers(1, 8)), 16
    # a_tc = sum of W[t, j] x_j over the cell's pixels; only active neurons (o_t > 0) are kept
    A = (rng.normal(size=(neurons, cells, pixels)) * rng.uniform(0, 1, (cells, pixels))).sum(axis=2)
    bias = rng.normal(size=neurons) * draw(st.sampled_from([0.0, 0.1, 1.0]))
    active = A.sum(axis=1) + bias > 0
    if not active.any():
        active[np.argmax(A.sum(axis=1) + bias)] = True
    A, bias = A[active], bias[active]
    gamma = draw(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]))
    return Problem.from_arrays(A, ">", gamma * (A.sum(axis=1) + bias) - bias)


@st.composite
def generic(draw: st.DrawFn) -> Problem:
    """Up to 14 binaries and 5 rows, mixed signs, every sense; right-hand sides often at the
    exact activity of some assignment (ties), one float step away, or anywhere."""
    n = draw(st.integers(1, MAX_BINARIES))
    m = draw(st.integers(1, 5))
    A = np.array([[draw(coefficient) for _ in range(n)] for _ in range(m)])
    senses = [draw(st.sampled_from(SENSES)) for _ in range(m)]
    rhs = []
    for row in A:
        point = [draw(st.booleans()) for _ in range(n)]
        activity = float(sum((Fraction(a) for a, on in zip(row.tolist(), point, strict=True) if on),
                             Fraction(0)))
        rhs.append(draw(st.one_of(
            st.just(activity),
            st.just(float(np.nextafter(activity, np.inf))),
            st.just(float(np.nextafter(activity, -np.inf))),
            st.floats(-20.0, 20.0, allow_nan=False, allow_infinity=False),
            st.sampled_from(_NEAR_TIES),
        )))
    objective = draw(st.one_of(
        st.just([1.0] * n),
        st.lists(st.integers(-3, 3).map(float), min_size=n, max_size=n),
        st.lists(st.one_of(coefficient, st.floats(-5.0, 5.0, allow_nan=False)), min_size=n, max_size=n),
    ))
    return Problem.from_arrays(A, senses, rhs, objective=objective)


problems = st.one_of(generic(), first_layer_like())
