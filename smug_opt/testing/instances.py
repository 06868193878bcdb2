"""The conformance suite's instance catalogue: each with its exact answer and why floats
get it wrong."""

from __future__ import annotations

import numpy as np

from smug_opt.ir import Problem, ProblemBuilder

__all__ = [
    "ALL_ZERO",
    "EQUALITY",
    "FIRST_LAYER",
    "INFEASIBLE",
    "NEAR_TIES",
    "STRICT",
    "STRICT_CONTINUOUS",
    "binary",
    "hard_instance",
    "huge_bounds",
    "market_split_deviation",
    "mixed",
    "relu_network",
]


def binary(A: list[list[float]], senses: str | list[str], rhs: list[float] | float,
            objective: list[float] | None = None) -> Problem:
    return Problem.from_arrays(np.array(A, dtype=np.float64), senses, rhs, objective=objective)


# name -> (problem, exact optimum or None when infeasible, what float intuition says)
STRICT = {
    "x1+x2 > 1": (binary([[1, 1]], ">", 1), 2, "strict: both needed"),
    "x1+x2 >= 1": (binary([[1, 1]], ">=", 1), 1, "non-strict: one suffices"),
    "x1+x2 < 1, max": (binary([[1, 1]], "<", 1, [-1, -1]), 0, "strict: none allowed"),
    "x1+x2 <= 1, max": (binary([[1, 1]], "<=", 1, [-1, -1]), -1, "non-strict: one allowed"),
    "0.5x1+0.25x2+0.25x3 > 0.5": (binary([[0.5, 0.25, 0.25]], ">", 0.5), 2, "x1 alone ties"),
    "0.5x1+0.25x2+0.25x3 >= 0.5": (binary([[0.5, 0.25, 0.25]], ">=", 0.5), 1, "x1 alone"),
    "x1+x2 > 2": (binary([[1, 1]], ">", 2), None, "relaxation feasible, strict infeasible"),
}

NEAR_TIES = {
    # exact 0.1 + 0.2 = 0.3000000000000000166... < 0.30000000000000004 = 0.3000000000000000444...
    "0.1x1+0.2x2 >= 0.30000000000000004": (
        binary([[0.1, 0.2]], ">=", 0.30000000000000004), None,
        "floats say 0.1+0.2 == 0.30000000000000004: feasible"),
    "0.1x1+0.2x2 > 0.3": (binary([[0.1, 0.2]], ">", 0.3), 2, "agrees with floats"),
    "0.1x1+0.2x2+0.3x3 == 0.6": (
        binary([[0.1, 0.2, 0.3]], "==", 0.6), None,
        "floats summed right to left give exactly 0.6"),
    "2^-60 x1 + x2 > 1": (
        binary([[2.0**-60, 1.0]], ">", 1.0), 2, "floats say 1 + 2^-60 == 1: infeasible"),
    "1e16 x1 + x2 - 1e16 x3 >= 1, all three": (
        binary([[1e16, 1.0, -1e16], [1, 1, 1]], [">=", ">="], [1.0, 3.0]), 3,
        "floats summed left to right give 0: infeasible"),
}

INFEASIBLE = {
    "x1+x2 >= 3": binary([[1, 1]], ">=", 3),
    "x1 >= 1 and x1 <= 0": binary([[1, 0], [1, 0]], [">=", "<="], [1, 0]),
    "x1+x2 > 2": binary([[1, 1]], ">", 2),
    "odd cycle of equalities": binary([[1, 1, 0], [0, 1, 1], [1, 0, 1]], "==", 1),
    "0 >= 1 (empty row)": binary([[0.0, 0.0]], ">=", 1),
    "x1+x2 == 2^-40 (no integer activity)": binary([[1, 1]], "==", 2.0**-40),
}

ALL_ZERO = {
    "slack rows": binary([[1, -1, 0], [1, 1, 1], [0, 0, -1]], [">=", ">=", "<="], [-1, 0, 0.5]),
    "empty row 0 <= 1": binary([[0.0, 0.0, 0.0]], "<=", 1),
    "strict slack": binary([[-1, -2, -3]], "<", 0.25),
}

EQUALITY = {
    "two choices": (binary([[1, 1, 0, 0], [0, 0, 1, 1]], "==", 1, [3, 1, 1, 2]), 2),
    "real coefficients": (binary([[0.5, 0.25, 0.25]], "==", 0.5), 1),
    "equality with strict": (binary([[1, 1, 1, 0], [0.75, -0.5, 0, 1]], ["==", ">"], [2, 0.5]), 2),
}


def _hex_instance(A: list[list[str]], rhs: list[str]) -> Problem:
    """A binary ``A x > rhs`` instance from exact (hexadecimal) floats, counting ones."""
    return Problem.from_arrays([[float.fromhex(v) for v in row] for row in A], ">",
                               [float.fromhex(v) for v in rhs])


# SMUG first-layer instances (4 cells, 6 neurons, gamma 0.5) on which CBC 2.10.3's
# preprocessing, given PuLP's 13-digit MPS, claims the relaxation infeasible (first) or
# cuts off the optimum (second): 11 of 450 such instances went wrong before it was disabled
FIRST_LAYER = {
    "first layer, 2x2 cells (a)": (_hex_instance(
        [["0x1.f9de4e71943c8p+1", "-0x1.a4bd2655e5308p-1", "-0x1.0a9b08b354005p+2", "0x1.4aa6238091f05p+1"],
         ["-0x1.f19ec9fadd5f2p+0", "0x1.ce49112c04230p+0", "-0x1.59b47a765c5a4p+0", "0x1.15c521bd39055p+1"],
         ["0x1.38c9c5255f729p+1", "0x1.6395f65c2f4dcp+0", "0x1.a62ed2a5ac479p+1", "0x1.16813fbf0cccdp+2"],
         ["0x1.7ff40178f5ef9p+0", "0x1.f445eaf67e381p+1", "0x1.5628beac3b297p-1", "0x1.df4e2cb72901bp+0"],
         ["-0x1.96b70df5099adp-1", "0x1.c73b635d05d9cp-3", "0x1.d7935b0defbedp+1", "-0x1.24f7057a5dc4bp+0"],
         ["0x1.d9c90cf825085p-1", "0x1.eaf469880d1a0p-5", "0x1.db2df6a7e7322p-1", "0x1.66c537100a3bbp+2"]],
        ["0x1.a4e3a1edc3c64p-1", "0x1.1eade00b25b1cp-2", "0x1.705eaea0e630fp+2", "0x1.fa4b64f771ca2p+1",
         "0x1.fd67740a16de9p-1", "0x1.e27c57712f614p+1"]), 4),
    "first layer, 2x2 cells (b)": (_hex_instance(
        [["-0x1.5c4a87f5d6daep+1", "0x1.b00a8598d1699p+0", "0x1.e54c7391ccb2ap-1", "0x1.3d817b2e28170p-3"],
         ["0x1.9a7df28ced0f4p-1", "-0x1.9c79794ddbe92p-3", "0x1.478ee03389193p+2", "-0x1.67c69140ef7abp-3"],
         ["0x1.a73fe7b96d403p+1", "0x1.c8c7d65724c34p+0", "0x1.100f6557a58e6p+2", "0x1.3abe860a16158p+0"],
         ["0x1.e563bfc4209c0p-5", "0x1.959c62c78507ep+0", "0x1.0158c60096918p+1", "0x1.5e80c6f081b2ap+0"],
         ["0x1.a93016046bc39p+1", "0x1.a4e8ef0dbb38ap+1", "-0x1.694e5ec3b3166p-1", "0x1.fe2c0dd43b65ap+0"],
         ["-0x1.5db5193120906p+0", "-0x1.66da7730fd2e0p-3", "0x1.2454c0a851e23p+0", "0x1.3fb6e2dc2bdd1p+2"]],
        ["0x1.befdcb94780c3p-5", "0x1.628fc209c0dafp+1", "0x1.56821564b0d6cp+2", "0x1.3b79354515cd0p+1",
         "0x1.f4e8e252ab699p+1", "0x1.22ecc63d97b05p+1"]), 3),
}


def mixed(seed: int, n: int = 8, m: int = 5) -> Problem:
    """Random binaries, mixed-sign coefficients and objective, every sense."""
    rng = np.random.default_rng(seed)
    A = np.round(rng.normal(size=(m, n)) * 4) / 4
    A[rng.random((m, n)) < 0.3] = 0.0
    senses = [["<=", ">=", "==", "<", ">"][i % 5] for i in range(m)]
    point = rng.integers(0, 2, n).astype(np.float64)  # feasible: every row holds here
    offset = {"<=": 0.0, ">=": 0.0, "==": 0.0, "<": 0.5, ">": -0.5}
    rhs = A @ point + np.array([offset[s] for s in senses])
    objective = np.round(rng.normal(size=n) * 3)
    return Problem.from_arrays(A, senses, rhs, objective=objective)


def relu_network(seed: int, n_in: int = 8, hidden: int = 5, classes: int = 3,
                  gamma: float = 0.5) -> Problem:
    """The stress-case encoding on a tiny dense network: keep the predicted label with the
    fewest inputs (mask M, h = relu(W1 (M*x) + b1), logit margins > gamma * full margins)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 1.5, n_in)
    W1 = rng.normal(size=(hidden, n_in))
    b1 = rng.normal(size=hidden) * 0.5
    W2 = rng.normal(size=(classes, hidden))
    b2 = rng.normal(size=classes) * 0.5
    logits = W2 @ np.maximum(W1 @ x + b1, 0) + b2
    label = int(np.argmax(logits))
    b = ProblemBuilder(metadata={"instance": f"relu network seed {seed}"})
    masks = b.add_binaries(n_in)
    pre = W1 * x  # coefficient of M_j in neuron t
    h = b.add_continuous(hidden, 0.0, np.maximum(pre, 0).sum(axis=1) + np.abs(b1) + 1.0)
    b.add_relus(h, pre, masks, b1)  # pre-activation bounds: the core's interval arithmetic
    others = [c for c in range(classes) if c != label]
    margins = logits[label] - logits[others]
    b.add_constraints(W2[label] - W2[others], h, ">", b2[others] - b2[label] + gamma * margins)
    b.set_objective(masks, 1.0)
    return b.build()


def hard_instance() -> Problem:
    """Market split (Cornuéjols & Dawande): 6 equality rows over 50 binaries, minimise the
    count. Decided by no exact solver in seconds."""
    rng = np.random.default_rng(12)
    A = rng.integers(0, 100, size=(6, 50)).astype(np.float64)
    return Problem.from_arrays(A, "==", np.floor(A.sum(axis=1) / 2))




def market_split_deviation() -> Problem:
    """The market split of :func:`hard_instance` as least deviation: minimise
    ``Σ (s⁺ + s⁻)`` with ``A x + s⁺ - s⁻ = b``. Every x has a solution (an incumbent at
    once); proving the optimum takes any exact solver far longer than seconds (the
    relaxation's bound is 0)."""
    rng = np.random.default_rng(12)
    A = rng.integers(0, 100, size=(6, 50)).astype(np.float64)
    rhs = np.floor(A.sum(axis=1) / 2)
    b = ProblemBuilder(metadata={"instance": "market split 6x50, least deviation"})
    x = b.add_binaries(50)
    plus = b.add_continuous(6, 0.0, A.sum(axis=1))
    minus = b.add_continuous(6, 0.0, A.sum(axis=1))
    b.add_constraints(np.hstack([A, np.eye(6), -np.eye(6)]), np.concatenate([x, plus, minus]), "==", rhs)
    b.set_objective(np.concatenate([plus, minus]), 1.0)
    return b.build()


def _strict_continuous(lb: float, ub: float, row: float, sense: str, rhs: float,
                       binary_cost: float | None) -> Problem:
    b = ProblemBuilder()
    z = b.add_continuous(1, lb, ub)
    if binary_cost is None:
        b.add_constraints([[row]], z, sense, [rhs])
        b.set_objective(z, [1.0])
        return b.build()
    m = b.add_binaries(1)
    b.add_constraints([[row, 0.0]], np.concatenate([z, m]), sense, [rhs])
    b.set_objective(np.concatenate([z, m]), [1.0, binary_cost])
    return b.build()


# name -> problem: a strict row binds a continuous variable the objective pushes against
# it, so the infimum (second item) is not attained: no OPTIMAL, a verified FEASIBLE point
STRICT_CONTINUOUS = {
    "z > 1, min z, z in [0, 4]": (_strict_continuous(0.0, 4.0, 1.0, ">", 1.0, None), 1),
    "t > 0, min t + m (R6)": (_strict_continuous(0.0, 1.0, 1.0, ">", 0.0, 1.0), 0),
    "-2z < 3, min z, z in [-4, 4]": (_strict_continuous(-4.0, 4.0, -2.0, "<", 3.0, None), -1.5),
}


def huge_bounds() -> Problem:
    """A continuous variable bounded by ±1e30, past float solvers' notion of infinity
    (HiGHS and CBC read 1e20 as unbounded): an ending a backend must not call INFEASIBLE.
    The exact optimum is ``2 - 1e30`` (both binaries, the variable at its lower bound)."""
    b = ProblemBuilder(metadata={"instance": "bounds past a solver's infinity"})
    m = b.add_binaries(2)
    z = b.add_continuous(1, -1e30, 1e30)
    b.add_constraints([[1.0, 1.0, 1e-30]], np.concatenate([m, z]), ">=", [0.5])
    b.set_objective(np.concatenate([m, z]), [1.0, 1.0, 1.0])
    return b.build()
