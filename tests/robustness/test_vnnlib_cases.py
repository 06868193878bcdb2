"""Properties with input bounds inside an ``or`` (VNN-COMP 2022's ACAS Xu property 6 style):
one case per input box, each with its own unsafe region; membership checked against a
direct evaluation of the formula."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from smug_opt.vnnlib import VnnlibError, parse_vnnlib, parse_vnnlib_cases
from smug_opt.vnnlib_syntax import _parse_sexprs

DECLARE = "".join(f"(declare-const X_{i} Real)\n" for i in range(2)) + \
    "".join(f"(declare-const Y_{j} Real)\n" for j in range(3))

ACAS_STYLE = DECLARE + """
(assert (or
    (and (>= X_0 -1) (<= X_0 0) (>= X_1 0) (<= X_1 1))
    (and (>= X_0 0.5) (<= X_0 1) (>= X_1 0) (<= X_1 1))
))
(assert (or (and (<= Y_0 Y_1) (<= Y_0 Y_2)) (<= Y_1 0)))
"""

MIXED = DECLARE + """
(assert (>= X_1 -2))
(assert (<= X_1 2))
(assert (or
    (and (>= X_0 0) (<= X_0 1) (>= Y_0 Y_1))
    (and (>= X_0 0) (<= X_0 1) (< Y_2 -0.5))
    (and (>= X_0 2) (<= X_0 3) (= Y_1 1))
    (and (>= X_0 5) (<= X_0 4) (>= Y_1 0))
    (and (>= X_0 -3) (<= X_0 -2) (>= X_1 1) (> Y_0 0.25))
))
"""


def _holds(node, x, y):
    """The VNN-LIB formula ``node`` evaluated directly at inputs ``x`` and outputs ``y``."""
    head = node.head
    if head == "and":
        return all(_holds(c, x, y) for c in node.items[1:])
    if head == "or":
        return any(_holds(c, x, y) for c in node.items[1:])
    a, b = (_value(c, x, y) for c in node.items[1:])
    return {"<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b, "=": a == b}[head]


def _value(node, x, y):
    if isinstance(node.value, str):
        name = node.value
        if name[:2] in ("X_", "Y_"):
            return (x if name[0] == "X" else y)[int(name[2:])]
        return float(name)
    head, args = node.head, [_value(c, x, y) for c in node.items[1:]]
    return {"+": sum(args), "-": args[0] - sum(args[1:]) if len(args) > 1 else -args[0],
            "*": float(np.prod(args))}[head]


def _in_property(asserts, x, y):
    return all(_holds(a, x, y) for a in asserts)


def _in_cases(cases, x, y):
    return any(np.all(c.lo <= x) and np.all(x <= c.hi) and c.unsafe(y) for c in cases)


@pytest.mark.parametrize("text", [ACAS_STYLE, MIXED], ids=["acas-style", "mixed"])
def test_cases_agree_with_the_formula(text):
    cases = parse_vnnlib_cases(text)
    asserts = [n.items[1] for n in _parse_sexprs(text) if n.head == "assert"]
    rng = np.random.default_rng(0)
    grid = [-3.5, -3, -2.5, -2, -1, -0.5, 0, 0.25, 0.5, 0.75, 1, 2, 2.5, 3, 4.5, 5]
    ys = [np.array(v, dtype=float) for v in itertools.product([-1, 0.25, 1], repeat=3)]
    ys += [rng.normal(size=3) for _ in range(10)]
    hits = 0
    for x0, x1 in itertools.product(grid, [-2.5, -2, 0, 0.5, 1, 2]):
        x = np.array([x0, x1])
        for y in ys:
            expected = _in_property(asserts, x, y)
            assert _in_cases(cases, x, y) == expected, (x, y)
            hits += expected
    assert hits > 50  # the grid reaches into every case


def test_acas_style_two_boxes_one_region():
    first, second = parse_vnnlib_cases(ACAS_STYLE)
    assert first.lo.tolist() == [-1, 0] and first.hi.tolist() == [0, 1]
    assert second.lo.tolist() == [0.5, 0] and second.hi.tolist() == [1, 1]
    assert len(first.disjuncts) == len(second.disjuncts) == 2


def test_same_box_grouped_and_empty_box_dropped():
    cases = parse_vnnlib_cases(MIXED)
    assert [c.lo.tolist() for c in cases] == [[0, -2], [2, -2], [-3, 1]]
    assert [len(c.disjuncts) for c in cases] == [2, 1, 1]
    assert cases[0].disjuncts[1].strict.tolist() == [True]


def test_a_box_empty_over_the_reals_is_dropped_even_when_strict():
    text = DECLARE + ("(assert (>= X_1 0))\n(assert (<= X_1 1))\n(assert (or "
                      "(and (> X_0 1) (< X_0 1) (>= Y_0 0)) (and (>= X_0 1) (< X_0 1) (>= Y_0 0)) "
                      "(and (>= X_0 0) (<= X_0 1) (>= Y_0 1))))\n")
    (case,) = parse_vnnlib_cases(text)
    assert case.lo.tolist() == [0, 0] and case.hi.tolist() == [1, 1]


def test_one_box_reader_names_the_cases_reader():
    with pytest.raises(VnnlibError, match="2 input boxes.*read_vnnlib_cases"):
        parse_vnnlib(ACAS_STYLE, source="p.vnnlib")


@pytest.mark.parametrize("formula, message", [
    ("(or (and (>= X_0 0) (<= X_0 1)) (>= Y_0 0))", "a disjunct constrains no output"),
    ("(or (and (>= X_0 2) (<= X_0 1) (>= Y_0 0)) (and (>= X_0 3) (<= X_0 1) (>= Y_0 1)))",
     "every input box of the property is empty"),
    ("(or (and (>= X_0 0) (>= Y_0 0)) (and (>= X_0 0) (<= X_0 1) (>= Y_0 1)))",
     "X_0 has no finite lower and upper bound"),
    # 1 < X_0 < the float after 1: reals, no float64 (skipping it would let unsat miss them)
    ("(or (and (> X_0 1) (< X_0 1.0000000000000002) (>= Y_0 0)) (and (>= X_0 3) (<= X_0 4) (>= Y_0 1)))",
     "X_0 has lower bound .* above its upper bound"),
])
def test_case_refusals(formula, message):
    text = DECLARE + "(assert (>= X_1 0))\n(assert (<= X_1 1))\n(assert " + formula + ")\n"
    with pytest.raises(VnnlibError, match=message):
        parse_vnnlib_cases(text)
