"""Issue 19's false exact claims, rebuilt in code: the structure (and numbers) of the eight
instances in ``../shared/repros`` on which ``certify=True`` (or the numeric-range guard's
default certification) called a wrong answer ``proof: "exact"``, each with its exact
optimum, and :func:`assert_no_false_exact_claim`, the invariant they check.

Causes: the enumeration stopped by the binaries' share of the objective while ReLU
outputs carry the rest (``relu_*``: 1.04 for 0.94, 8.3 for 8.0, 2^53 + 2 for 6.599999999);
the z3 question asked ``c·x < v - tolerance`` (``cont_*``: CP-SAT's 1.0 for 3.3e-10,
3.2000008 for 3.2, 1.0001000004 for 1.0001, and optima no float64 point attains).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from smug_opt import Problem, ProblemBuilder, SolveResult, Status, verify
from smug_opt.testing.brute_force import exact_optimum


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], Problem]
    optimum: Callable[[Problem], Fraction | None]  # exact; None: infeasible
    repro: str  # the instance's file in ../shared/repros


def _by_enumeration(problem: Problem) -> Fraction | None:
    return exact_optimum(problem).value


def _relu_huge_coefficient() -> Problem:
    """A ReLU reading a binary with coefficient 2^53 (its output bounded by 7.2e19, in the
    objective), and the optimum on a row that holds with equality only in exact arithmetic
    (``3.3 · 3.5`` against ``11.549999999999999``)."""
    b = ProblemBuilder()
    m = b.add_binaries(4)
    y = b.add_continuous(2, 0.0, [29680.000001000004, 7.205759403792797e+19])
    b.add_relus(y[:1], [[-1.0000000000000002, -2.485, 0.1]], m[[0, 1, 3]], [-1e-09],
                lo=-118.72000000400001, hi=118.72000000400001)
    b.add_relus(y[1:], [[9007199254740992.0, -1.3, 3.0]], m[1:], [0.5])
    b.add_constraints([[-0.9, 3.3]], [m[1], y[1]], ">=", [11.549999999999999])
    b.add_constraints([[-0.6, 1.1, 1.6, -1.1]], [m[0], m[2], m[3], y[0]], "<", [1.49000000259])
    b.set_objective([*m, *y], [3.0, 2.0, 0.0, 3.0, 1.0, 1.0])
    return b.build()


def _relu_cheap_binaries() -> Problem:
    """The cheapest binaries switch on a ReLU output the objective charges (0.94 vs 1.04)."""
    b = ProblemBuilder()
    m = b.add_binaries(7)
    y = b.add_continuous(1, 0.0, 112.06)
    b.add_relus(y, [[3.0, 4.0, 2.62, -3.0, -1.2]], m[1:6], [0.5])
    b.add_constraints([[-2.95, -0.43, -0.6, -2.8, -0.35, -1.0]], [*m[[0, 1, 4, 5, 6]], y[0]], "<=",
                      [-8.7000000087])
    b.add_constraints([[-0.05, -0.35, 0.6, 1.45, 0.5]], [*m[[0, 1, 3, 6]], y[0]], ">",
                      [1.1600000000000001])
    b.set_objective([*m, *y], [3.0, 3.0, 1.0, 2.0, 3.0, 1.0, 1.0, -0.5])
    return b.build()


def _relu_chain() -> Problem:
    """Three ReLUs, one reading another, the objective on two outputs (8.0 vs 8.3)."""
    b = ProblemBuilder()
    m = b.add_binaries(7)
    y = b.add_continuous(3, 0.0, [86620.00079999998, 31.592, 45400.00800100727])
    b.add_relus(y[:1], [[-5.0, 1.39, 1e-07, 1.1, -3.0, 0.2]], m[[0, 2, 3, 4, 5, 6]], [0.1])
    b.add_relus(y[1:2], [[-0.399, 2.0, 1.3]], m[[0, 1, 4]], [1.0])
    b.add_relus(y[2:], [[0.35, -0.30000000000000004, -2.0, -9.094947017729282e-13, -1e-06, -2.9]],
                [*m[[0, 2, 3, 4, 5]], y[1]], [1e-09])
    b.add_constraints([[-1.15, 0.6, -1.82, 2.2, 2.3]], [*m[[0, 2, 3, 4]], y[0]], ">",
                      [0.3800000000000001])
    b.add_constraints([[-0.81, 0.28, -0.1, 0.01, -1.3]], [*m[[0, 1, 4]], y[0], y[2]], ">",
                      [0.17999999900000002])
    b.add_constraints([[-2.287, -0.07, -3.3, -1.15, -1.22]], [*m[[1, 2, 4, 6]], y[2]], ">=",
                      [-6.737000006737])
    b.set_objective([*m, *y], [1.0, 3.0, 2.0, 2.0, 1.0, 0.0, 2.0, 0.0, 1.0, 0.1])
    return b.build()


def _cont_unattained() -> Problem:
    """A free continuous variable through two ReLUs; the optimum (-2.589285714285714...)
    lies at a point no float64 attains."""
    b = ProblemBuilder()
    (m,) = b.add_binaries(1)
    (t,) = b.add_continuous(1, -5.0, 3.0)
    y = b.add_continuous(2, 0.0, [2.5, 16.25])
    b.add_relus(y[:1], [[0.1]], [t], [-0.5])
    b.add_relus(y[1:], [[-1.0, 0.5]], [t, y[0]], [0.25])
    b.add_constraints([[3.3, 1.0, 0.3]], [m, t, y[1]], ">=", [0.3])
    b.set_objective([m, t, *y], [1.0, 0.5, -0.3, -0.3])
    return b.build()


def _cont_unattained_optimum(_: Problem) -> Fraction:
    """By hand: the second ReLU is off (0.1·t < 0.5), the binary is on, and the row binds
    with ``t < 0.25``: ``t* = (0.3 - 3.3 - 0.3·0.25) / (1 - 0.3)`` (every float exact)."""
    f = Fraction
    t = (f(0.3) - f(3.3) - f(0.3) * f(0.25)) / (1 - f(0.3))
    return 1 + f(0.5) * t - f(0.3) * (f(0.25) - t)


def _cont_tiny_relu_input() -> Problem:
    """A continuous variable with bounds [0, 1e-6] on a row and in a ReLU: optimum 0, where
    CP-SAT returned 1.9e-10 and the tolerance called it optimal."""
    b = ProblemBuilder()
    m = b.add_binaries(6)
    (t,) = b.add_continuous(1, 0.0, 1e-06)
    y = b.add_continuous(1, 0.0, 12.25)
    b.add_relus(y, [[1.1, -2.4, 2.0]], [m[1], m[3], t], [0.25])
    b.add_constraints([[0.6, -1.09, 2.5, 1.021, 3.0]], [*m[[0, 2, 4, 5]], t], "<=", [0.5])
    b.set_objective([*m, t, *y], [0.0, 0.5, 2.0, 0.0, 0.5, 2.0, 0.001, 1.0])
    return b.build()


def _one_continuous(n: int, lb: float, ub: float, rows: list[tuple[dict[int, float], str, float]],
                    objective: list[float]) -> Callable[[], Problem]:
    """``n`` binaries then one continuous variable (index ``n``), rows as {index: coef}."""
    def build() -> Problem:
        b = ProblemBuilder()
        b.add_binaries(n)
        b.add_continuous(1, lb, ub)
        for coefs, sense, rhs in rows:
            b.add_constraints([list(coefs.values())], list(coefs), sense, [rhs])
        b.set_objective(list(range(n + 1)), objective)
        return b.build()
    return build


CASES = [
    Case("relu_huge_coefficient", _relu_huge_coefficient, _by_enumeration, "certify_wrong_exact_relu.smug"),
    Case("relu_cheap_binaries", _relu_cheap_binaries, _by_enumeration, "certify_wrong_relu_813100185.smug"),
    Case("relu_chain", _relu_chain, _by_enumeration, "certify_wrong_relu_1526109283.smug"),
    Case("cont_unattained", _cont_unattained, _cont_unattained_optimum, "certify_wrong_cont_1630439792.smug"),
    Case("cont_tiny_relu_input", _cont_tiny_relu_input, lambda _: Fraction(0),
         "certify_wrong_cont_426820620.smug"),
    Case("cont_signed_range", _one_continuous(
        5, -1.0, 1.0, [({0: -0.19, 1: -1.9, 2: -0.6, 5: 0.5}, ">=", 0.3),
                       ({2: 0.7, 3: 0.048, 4: -1.15, 5: 1e-06}, "<=", 0.0)],
        [1.0, 0.5, 0.0, 1.0, 2.0, 2.0]), _by_enumeration, "certify_wrong_cont_565219256.smug"),
    Case("cont_narrow_box", _one_continuous(
        3, 0.1, 0.3, [({0: 0.6, 1: -2.61, 2: -2.0}, ">=", 1e-09)], [1.0, 0.0, 2.0, 0.001]),
        _by_enumeration, "certify_wrong_cont_636502963.smug"),
    Case("cont_cost_scale", _one_continuous(
        5, -1e6, 1e6, [({2: 2.52, 5: 3.0}, ">=", 1e-09), ({2: 1.4, 3: 1.34}, "<=", 0.5),
                       ({1: -0.25, 2: 2.47, 4: 2.13, 5: 1.0}, ">=", -0.1)],
        [0.0, 2.0, 0.5, 0.5, 1.0, 1.0]), _by_enumeration, "certify_wrong_cont_978172509.smug"),
]


def assert_no_false_exact_claim(problem: Problem, optimum: Fraction | None, r: SolveResult) -> None:
    """Whatever ``r`` says is true, and what it calls exact is exact: an exact OPTIMAL's
    solution attains the exact optimum and its bound is not above it; an exact INFEASIBLE
    is infeasible; no solution is better than the optimum."""
    what = (r, r.message)
    assert r.status is not Status.ERROR, what
    if r.x is not None:
        v = verify(problem, r.x)
        assert v.ok and optimum is not None and v.objective >= optimum, what
    if r.proof != "exact":
        return
    if r.status is Status.INFEASIBLE:
        assert optimum is None, what
        return
    assert r.status is Status.OPTIMAL and optimum is not None, what
    assert verify(problem, r.x).objective == optimum, what
    assert r.bound is not None and Fraction(r.bound) <= optimum, what
