"""The wrong-claim reproductions of issue 9 (R1-R14 and siblings), each with its exact answer.

Every case is a small problem whose optimum was established by exact brute force (or by
hand, for the ones with continuous variables); ``optimum`` None means infeasible, and
``infimum`` marks an unattained infimum (no minimiser exists).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from smug_opt import Problem, ProblemBuilder


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], Problem]
    optimum: float | None  # None: infeasible
    attained: bool = True  # False: ``optimum`` is an infimum no solution reaches
    z3_extras: dict | None = None  # the z3 encoding that showed the bug


def _arrays(A: list, senses: list, rhs: list, objective: list | None = None) -> Callable[[], Problem]:
    return lambda: Problem.from_arrays(A, senses, rhs, objective=objective)


def _r4() -> Problem:
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 100.0)
    b.add_relus(y, [[-0.2, 64.0]], m, [1e-9])
    b.add_constraints([[-0.05, 1.0]], [int(m[1]), int(y[0])], ">=", [1e-9])
    b.set_objective(m, [1.0, 1.0])
    return b.build()


def _r14() -> Problem:
    b = ProblemBuilder()
    (bin_,) = b.add_binaries(1)
    y = b.add_continuous(4, 0.0, 100.0)
    b.add_relus(y[:1], [[4.0]], [bin_])
    b.add_relus(y[1:2], [[0.2]], y[:1], [0.5], lo=-12.4, hi=12.4)
    b.add_relus(y[2:3], [[1.776, 0.15, -0.35]], [bin_, y[0], y[1]], [1e-9])
    b.add_relus(y[3:4], [[0.0]], [bin_], [-1e-9], lo=-4.000000004, hi=4.000000004)
    b.add_constraints([[1.3, 0.8, 2.4]], y[1:], "<=", [0.65])
    b.set_objective([bin_], [1.0])
    return b.build()


def _f2() -> Problem:
    """Campaign finding F2: a ReLU at exactly its upper bound when every binary is 0."""
    W = [[-0.8958292816806916, -0.42771680170535054, -0.44139924311159173, -0.7776828346234909],
         [-0.47233446964791465, 0.4138195180660434, 0.06401644919618855, -0.304591177912687],
         [-1.1236711751533892, 0.07214598352336729, -1.9897981546802976, 0.6265926831530595]]
    b = ProblemBuilder()
    m = b.add_binaries(4)
    h = b.add_continuous(3, 0.0, [1.3427615580083176, 1.595977394845985, 2.398421448482712])
    b.add_relus(h, W, m, [0.34276155800831776, -0.11814142758375304, 0.6996827818062856])
    b.add_constraints([[-0.0010733253698117506, -0.619196869430443, 1.4058723404493298]], h, ">=",
                      [-0.07280314237021634])
    b.set_objective(m, 1.0)
    return b.build()


def _r6() -> Problem:
    b = ProblemBuilder()
    (m,) = b.add_binaries(1)
    (t,) = b.add_continuous(1, 0.0, 1.0)
    b.add_constraints([[1.0]], [t], ">", [0.0])
    b.set_objective([t, m], [1.0, 1.0])
    return b.build()


def _unattained() -> Problem:
    b = ProblemBuilder()
    z = b.add_continuous(1, 0.0, 4.0)
    b.add_constraints([[1.0]], z, ">", [1.0])
    b.set_objective(z, [1.0])
    return b.build()


_F1 = [1.3386712128125078, 0.3370940513008937, -0.21719297481316494, 0.9145032132311318,
       -0.400776037718685, 0.051377629820123824, 0.8600143256042385, 1.881854098728,
       -0.40371826768390157, -0.9086689752315421]  # campaign finding F1: a 3.7e-9 window

CASES: tuple[Case, ...] = (
    Case("R1", _arrays([[0, 0, -87960930222080.0], [0, 2.0, 0]], [">=", ">"],
                       [-87960921425985.0, 0.0]), 1.0),
    Case("R2", _arrays([[-1, 1, 0, 0, -33554432.0], [-1, -1, 0, -3, 1]], ["<", "<"],
                       [-33554432.3, 0.0]), 3.0),
    Case("R3", _arrays([[2048.0, 824633720832.0]], [">="], [2048.3180000020484]), 1.0),
    Case("R4", _r4, 0.0),
    Case("R5a", _arrays([[1e13]], [">"], [-5e-324]), 0.0, z3_extras={"encoding": "pb"}),
    Case("R5b", _arrays([[1e13]], ["<"], [5e-324], [-1.0]), 0.0, z3_extras={"encoding": "pb"}),
    Case("R6", _r6, 0.0, attained=False),
    Case("R7", _arrays([[1.0, 1.0]], [">="], [1.0], [1e13 + 1, 1e13]), 1e13),
    Case("R8", _arrays([[1.0, 1.0]], [">="], [1.0], [1e15 + 1, 1e15]), 1e15),
    Case("R9", _arrays([[1.0, 1.0]], [">="], [1.0], [1e17, 2e17]), 1e17),
    Case("R11", _arrays([[2.2e-308, 0, 2]], ["<="], [0.0], [-1e20, 1, 1]), 0.0),
    Case("R12", _arrays([[1e16, 1e16, -123456789.0]], [">="], [1.0000001e16]), 2.0),
    Case("R13", _arrays([[1e-310, 1e-310]], [">="], [1.5e-310]), 2.0),
    Case("R14", _r14, 0.0),
    Case("F1", _arrays([_F1, [-v for v in _F1]], [">", ">"], [3.667628270669946, -3.6676282743375745]), 6.0),
    Case("F2", _f2, 0.0),
    Case("subnormal-empty", _arrays([[5e-324, 0.0], [0.0, 1e-320]], [">", ">="], [0.0, 0.0]), 1.0),
    Case("unattained", _unattained, 1.0, attained=False),
)
