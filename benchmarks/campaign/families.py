"""Adversarial instance families for the campaign, each small enough for exact brute force.

Every family is a function ``(rng) -> Problem`` of at most 10 binaries (plus, in
``continuous``, one continuous variable; in ``relu``, ReLU outputs determined by the
binaries). They aim at the places where floating-point solvers and bridges go wrong:
ties at strict rows, huge dynamic range inside one row, decimal fractions that are not
what they look like, homogeneous strict rows, degenerate rows, infeasibility, real
objectives, strict rows that bind a continuous variable, and ReLU chains.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from smug_opt import Problem, ProblemBuilder

__all__ = ["FAMILIES"]

_SENSES = np.array([">", ">=", "<", "<=", "=="])


def _point(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2, n).astype(np.float64)


def _shape(rng: np.random.Generator) -> tuple[int, int]:
    return int(rng.integers(2, 11)), int(rng.integers(1, 5))


def _nudge(rng: np.random.Generator, value: float) -> float:
    """``value`` exactly, one ulp either side, or 1e-12 / 1e-9 (relative) away."""
    kind = rng.integers(0, 6)
    if kind == 0:
        return value
    if kind == 1:
        return math.nextafter(value, math.inf)
    if kind == 2:
        return math.nextafter(value, -math.inf)
    step = (1e-12 if kind < 5 else 1e-9) * max(abs(value), 1.0)
    return value + step * (1 if rng.random() < 0.5 else -1)


def _objective(rng: np.random.Generator, n: int) -> np.ndarray | None:
    return None if rng.random() < 0.5 else rng.integers(-3, 4, n).astype(np.float64)


def near_tie(rng: np.random.Generator) -> Problem:
    """Rows whose right-hand side is an assignment's float activity, nudged by 0, 1 ulp,
    1e-12 or 1e-9: strict and non-strict differ exactly at the tie."""
    n, m = _shape(rng)
    A = rng.choice([rng.normal(size=(m, n)), np.round(rng.normal(size=(m, n)) * 8) / 8])
    rhs = np.array([_nudge(rng, float(A[i] @ _point(rng, n))) for i in range(m)])
    return Problem.from_arrays(A, list(rng.choice(_SENSES, m)), rhs, objective=_objective(rng, n))


def wide_range(rng: np.random.Generator) -> Problem:
    """1e12 and 1e-10 (and ordinary numbers) in one row, the rhs at an activity ± a little."""
    n, m = _shape(rng)
    A = rng.normal(size=(m, n))
    for i in range(m):
        cols = rng.choice(n, size=min(n, 2), replace=False)
        A[i, cols[0]] = 1e12 * rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2)
        A[i, cols[-1]] = 1e-10 * rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2)
    rhs = np.array([_nudge(rng, float(A[i] @ _point(rng, n))) + rng.choice([0.0, 1.0, 2.0, -1.0])
                    for i in range(m)])
    return Problem.from_arrays(A, list(rng.choice(_SENSES, m)), rhs, objective=_objective(rng, n))


def decimal(rng: np.random.Generator) -> Problem:
    """Decimal coefficients (0.1 + 0.2 is not 0.3 in binary) against decimal rhs."""
    n, m = _shape(rng)
    A = rng.choice([0.1, 0.2, 0.3, 0.7, 1.1, -0.1, -0.3, 0.6, 0.01], size=(m, n))
    rhs = rng.choice([0.3, 0.6, 0.9, 1.0, 0.0, 0.30000000000000004, 0.7, 1.2, -0.2], size=m)
    return Problem.from_arrays(A, list(rng.choice(_SENSES, m)), rhs, objective=_objective(rng, n))


def homogeneous(rng: np.random.Generator) -> Problem:
    """``a·x > 0`` (and <, >=) with mixed signs: the zero vector never satisfies a strict one."""
    n, m = _shape(rng)
    A = rng.normal(size=(m, n)) * rng.choice([1.0, 1e-8, 1e6], size=(m, 1))
    A[rng.random((m, n)) < 0.2] = 0.0
    return Problem.from_arrays(A, list(rng.choice(np.array([">", "<", ">=", ">"]), m)), np.zeros(m),
                               objective=_objective(rng, n))


def empty_duplicate(rng: np.random.Generator) -> Problem:
    """Empty rows (``0 >= b``) and duplicated rows, one strict copy beside a non-strict one."""
    n, m = _shape(rng)
    A = np.round(rng.normal(size=(m, n)) * 4) / 4
    rhs = A @ _point(rng, n) - rng.choice([0.0, 0.5], size=m)
    senses = list(rng.choice(_SENSES[:4], m))
    i = int(rng.integers(0, m))
    A = np.vstack([A, A[i:i + 1], np.zeros((1, n))])
    senses += [rng.choice([">", ">="]) if senses[i] in (">", ">=") else rng.choice(["<", "<="]),
               rng.choice(_SENSES)]
    rhs = np.concatenate([rhs, [rhs[i], rng.choice([0.0, -1.0, 1.0, 5e-324])]])
    return Problem.from_arrays(A, senses, rhs, objective=_objective(rng, n))


def infeasible(rng: np.random.Generator) -> Problem:
    """Systems built to be infeasible (a row and its strict negation, or an unreachable
    sum), sometimes by a hair, sometimes feasible after all by a hair."""
    n, _ = _shape(rng)
    a = rng.normal(size=n)
    b = float(a @ _point(rng, n))
    kind = rng.integers(0, 3)
    if kind == 0:
        A, senses, rhs = np.vstack([a, a]), [">=", "<"], [b, _nudge(rng, b)]
    elif kind == 1:
        A, senses, rhs = np.ones((1, n)), [rng.choice([">", ">="])], [float(n) - rng.choice([0.0, 1e-9])]
    else:
        A = np.vstack([a, -a])
        senses, rhs = [">", ">"], [b, -_nudge(rng, b)]
    return Problem.from_arrays(A, senses, rhs, objective=_objective(rng, n))


def real_objective(rng: np.random.Generator) -> Problem:
    """Real-weighted objectives with mixed signs and magnitudes over random rows."""
    n, m = _shape(rng)
    A = rng.normal(size=(m, n))
    rhs = A @ _point(rng, n) - rng.uniform(0, 0.5, m)
    objective = rng.normal(size=n) * rng.choice([1.0, 1e-3, 1e4], size=n)
    return Problem.from_arrays(A, list(rng.choice(np.array([">", ">=", "<=", "<"]), m)), rhs,
                               objective=objective)


def continuous(rng: np.random.Generator) -> Problem:
    """Binaries plus one continuous ``t`` that strict rows bind; the objective pushes ``t``
    against them (an infimum that may not be attained)."""
    n, m = _shape(rng)
    b = ProblemBuilder()
    x = b.add_binaries(n)
    lo, hi = sorted(rng.choice([0.0, -1.0, 4.0, 1.0, 0.5, -2.5], size=2, replace=False))
    t = b.add_continuous(1, lo, hi)
    A = np.round(rng.normal(size=(m, n)) * 4) / 4
    at = rng.choice([1.0, -1.0, 0.5, 2.0, 1e-3], size=m)
    rhs = A @ _point(rng, n) + at * rng.uniform(lo, hi, m)
    rhs = np.round(rhs * 8) / 8
    full = np.hstack([A, at[:, None]])
    b.add_constraints(full, np.concatenate([x, t]), list(rng.choice(_SENSES[:4], m)), rhs)
    cost = np.concatenate([rng.integers(-2, 3, n).astype(np.float64), [rng.choice([1.0, -1.0, 0.5])]])
    b.set_objective(np.concatenate([x, t]), cost)
    return b.build()


def relu(rng: np.random.Generator) -> Problem:
    """A tiny ReLU network (the stress-case encoding): keep the label with the fewest inputs."""
    n_in, hidden, classes = int(rng.integers(2, 7)), int(rng.integers(1, 4)), 2
    x = rng.uniform(0.5, 1.5, n_in)
    W1, b1 = rng.normal(size=(hidden, n_in)), rng.normal(size=hidden) * 0.5
    W2, b2 = rng.normal(size=(classes, hidden)), rng.normal(size=classes) * 0.5
    logits = W2 @ np.maximum(W1 @ x + b1, 0) + b2
    label = int(np.argmax(logits))
    b = ProblemBuilder()
    masks = b.add_binaries(n_in)
    pre = W1 * x
    h = b.add_continuous(hidden, 0.0, np.maximum(pre, 0).sum(axis=1) + np.abs(b1) + 1.0)
    b.add_relus(h, pre, masks, b1)
    other = 1 - label
    gamma = float(rng.choice([0.0, 0.5, 1.0, 0.9]))
    b.add_constraints(W2[label] - W2[other], h, rng.choice([">", ">="]),
                      b2[other] - b2[label] + gamma * (logits[label] - logits[other]))
    b.set_objective(masks, 1.0)
    return b.build()


def extreme(rng: np.random.Generator) -> Problem:
    """Coefficients and costs from 1e300 down to subnormals (outside the float solvers'
    documented range: answers may be weak, never wrong)."""
    n, m = _shape(rng)
    mags = 10.0 ** rng.integers(-320, 300, size=(m, n)).astype(np.float64)
    A = rng.choice([-1.0, 1.0], size=(m, n)) * mags * rng.uniform(0.5, 2, (m, n))
    A[rng.random((m, n)) < 0.3] = 0.0
    rhs = np.array([_nudge(rng, float(np.clip(A[i] @ _point(rng, n), -1e308, 1e308))) for i in range(m)])
    objective = None if rng.random() < 0.5 else rng.choice([1.0, -1.0], n) * 10.0 ** rng.integers(-300, 20, n)
    return Problem.from_arrays(A, list(rng.choice(_SENSES, m)), rhs, objective=objective)


FAMILIES: dict[str, Callable[[np.random.Generator], Problem]] = {
    "near-tie": near_tie, "wide-range": wide_range, "decimal": decimal,
    "homogeneous": homogeneous, "empty-duplicate": empty_duplicate, "infeasible": infeasible,
    "real-objective": real_objective, "continuous": continuous, "relu": relu, "extreme": extreme,
}
