"""Small problems with known answers and small random ReLU networks, shared by the tests."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from smug_opt import Problem, ProblemBuilder
from smug_opt.testing import brute_force

MLP_INPUTS = 16


def random_mlp(seed: int, hidden: tuple[int, ...] = (8,), n_in: int = MLP_INPUTS, n_out: int = 3
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """A random dense ReLU network as ``[(W, b), ...]`` with ``W`` of shape (inputs, outputs)."""
    rng = np.random.default_rng(seed)
    sizes = [n_in, *hidden, n_out]
    return [(rng.normal(size=(a, b)), rng.normal(scale=0.5, size=b)) for a, b in itertools.pairwise(sizes)]


def random_input(seed: int, n_in: int = MLP_INPUTS) -> np.ndarray:
    """A random input in [0.1, 1) with three pixels at zero (a zero pixel gets no mask variable)."""
    rng = np.random.default_rng(1000 + seed)
    x = rng.uniform(0.1, 1.0, size=n_in)
    x[rng.choice(n_in, size=3, replace=False)] = 0.0
    return x


def exact_optimum(problem: Problem) -> Fraction | None:
    """The exact optimum over every binary assignment (None: infeasible)."""
    result = brute_force(problem)
    return result.objective if result.feasible else None


def tiny_net(seed: int, n_in: int = 8, hidden: int = 6, classes: int = 3, gamma: float = 0.7) -> Problem:
    """Mask the inputs of a random 2-layer ReLU net; keep every logit margin above γ·original."""
    rng = np.random.default_rng(seed)
    x = rng.random(n_in)
    W1, b1 = rng.normal(0, 1, (hidden, n_in)), rng.normal(0, 0.3, hidden)
    W2, b2 = rng.normal(0, 1, (classes, hidden)), rng.normal(0, 0.3, classes)
    h = np.maximum(W1 @ x + b1, 0)
    label = int(np.argmax(W2 @ h + b2))
    b = ProblemBuilder()
    m = b.add_binaries(n_in)
    y = b.add_continuous(hidden, 0.0, 100.0)
    b.add_relus(y, W1 * x[None, :], m, b1)
    rows = np.array([W2[label] - W2[k] for k in range(classes) if k != label])
    rhs = np.array([b2[k] - b2[label] for k in range(classes) if k != label])
    b.add_constraints(rows, y, ">", rhs + gamma * (rows @ h - rhs))
    b.set_objective(m, 1.0)
    return b.build()


def two_cell_relu() -> Problem:
    """y = relu(m0 + m1 - 0.5) must exceed 0.7: both cells are needed (optimum 2, y = 1.5)."""
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 10.0)
    b.add_relus(y, np.array([[1.0, 1.0]]), m, np.array([-0.5]), lo=-0.5, hi=1.5)
    b.add_constraints(np.array([[1.0]]), y, ">", 0.7)
    b.set_objective(m, 1.0)
    return b.build()


def campaign_40297() -> Problem:
    """Adversarial campaign instance 40297 (continuous family): 10 binaries and t in [0, 4]
    bound by strict rows; the infimum -5/4 is not attained."""
    A = [[0.25, 0.75, 1, -1.25, 1.5, 0, 0.5, -0.25, -0.5, 1, 0.5],
         [0.75, 0.75, -1, 0.5, 0, 0.25, -0.75, 0.25, 1, 0.75, -1],
         [0.25, -0.5, 0.25, 0.5, -0.75, 0, -0.5, -1.5, 0.75, -0.75, float.fromhex("0x1.0624dd2f1a9fcp-10")],
         [1, -1.75, 0, 1, 0.75, -0.75, -1.5, -0.25, 1, 0, float.fromhex("0x1.0624dd2f1a9fcp-10")]]
    b = ProblemBuilder()
    x = b.add_binaries(10)
    t = b.add_continuous(1, 0.0, 4.0)
    b.add_constraints(np.array(A), np.concatenate([x, t]), [">", ">=", "<=", ">"], [3.5, -2.125, -0.5, -2.0])
    b.set_objective(np.concatenate([x, t]), [2, 1, 2, -1, 1, 2, 0, -2, 2, -1, 0.5])
    return b.build()


def early_stop_results(backend, problem: Problem, limits: list[float]):
    """A backend's raw answers (lowered at level 0, in this process) at each time limit of
    ``limits``: a solver stopped before it set its bounds up must claim none."""
    from smug_opt.backend import SolveOptions

    results = []
    for limit in limits:
        options = SolveOptions(time_limit=limit)
        results.append(backend.optimize(backend.lower(problem, options, 0), problem, options,
                                        lambda x, objective: None))
    return results
