"""Linear rows over 0/1 variables as CNF, exactly: the hard part of the MaxSAT backend.

Each float is the exact rational it represents (a dyadic fraction), so a row scaled by its
largest denominator is an integer row with the same 0/1 solutions; divided by the gcd of
its coefficients (the bound rounded up), a strict ``> K`` becomes ``>= K + 1``. Every row
is then ``Σ w_i·l_i >= K`` over literals ``l_i`` (``x`` or ``¬x``) with positive Python
integers (no overflow, however far apart the magnitudes), and becomes clauses:

* a row any one literal satisfies (every ``w_i >= K``): one clause;
* a row with at most :data:`MAX_COVERS` minimal covers (sets ``T`` of literals that cannot
  all be false: ``Σ_T w > Σ w - K``, none of them superfluous): one clause per cover, no
  new variable. Short rows (a convolution's window) have a few; on ResNet50's stem part
  RC2 took 5.4 CPU s on them against 34.4 on the BDDs below;
* any other: its reduced ordered BDD over intervals of ``K`` (Abío, Nieuwenhuis, Oliveras,
  Rodríguez-Carbonell, Mayer-Eichberger, "A New Look at BDDs for Pseudo-Boolean
  Constraints", JAIR 2012), one variable per node and two clauses each,
  ``¬v ∨ high`` and ``¬v ∨ l_i ∨ low``, the root asserted: exact, and unit propagation
  keeps generalised arc consistency (the BDD of a ``>=`` row is monotone).

A BDD can grow exponentially with the row (long rows of unrelated real coefficients);
past :data:`MAX_NODES` nodes over the whole problem the encoding stops with
:class:`EncodingTooLarge` rather than run out of memory.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction

__all__ = ["MAX_COVERS", "MAX_NODES", "POLL_NODES", "Encoder", "EncodingTooLarge", "at_least_rows",
           "integer_weights", "minimal_covers"]

MAX_COVERS = 64
"""Minimal covers a row may have to be written as clauses (else a BDD)."""

MAX_NODES = 2_000_000
"""BDD nodes (one variable, two clauses each) the encoding of one problem may create."""

POLL_NODES = 4096
"""Steps of a BDD's construction (nodes built or looked up) between two polls of the
encoder's ``expired`` (one row's BDD can take minutes: 93 s for the 2,000,000 nodes of an
80-column knapsack row; polling by nodes built alone let market split 6x50's lookups run
0.8 s past a 1.4 s limit)."""

TRUE, FALSE = 0, -1
"""The BDD's terminals (node variables are positive)."""


class EncodingTooLarge(ValueError):
    """A row's exact encoding would pass the node budget."""


def integer_weights(values: Sequence[float]) -> tuple[list[int], int]:
    """``values`` (floats, read exactly) times their common denominator ``D``: the integers
    and ``D``."""
    exact = [Fraction(v) for v in values]
    scale = max((f.denominator for f in exact), default=1)
    return [f.numerator * (scale // f.denominator) for f in exact], scale


def at_least_rows(cols: Sequence[int], coefs: Sequence[float], sense: str,
                  rhs: float) -> list[tuple[list[int], list[int], int]]:
    """The row ``Σ coefs·x[cols] SENSE rhs`` (``sense`` one of ``<=, >=, ==, <, >``) as
    rows ``Σ w_i·l_i >= K`` with positive integer ``w``, literals ``l`` (1-based variable
    ids, negative: negated) and integer ``K``; exact. A row no assignment meets comes back
    as ``([], [], 1)``; one every assignment meets as nothing."""
    ints, _ = integer_weights([*coefs, rhs])
    a, b = ints[:-1], ints[-1]
    forms: list[tuple[list[int], int]] = []
    if sense in (">=", "==", ">"):
        forms.append((a, b + 1 if sense == ">" else b))
    if sense in ("<=", "==", "<"):
        forms.append(([-w for w in a], -(b - 1 if sense == "<" else b)))
    rows = []
    for weights, bound in forms:
        lits, pos, k = [], [], bound
        for j, w in zip(cols, weights, strict=True):
            if w > 0:
                lits.append(j + 1)
                pos.append(w)
            elif w < 0:  # w·x = w + |w|·(1 - x)
                lits.append(-(j + 1))
                pos.append(-w)
                k -= w
        if k <= 0:
            continue
        g = math.gcd(*pos) if pos else 1
        k = -(-k // g)
        pos = [min(w // g, k) for w in pos]  # a weight above the bound counts as the bound
        if sum(pos) < k:
            return [([], [], 1)]
        rows.append((lits, pos, k))
    return rows


def minimal_covers(weights: list[int], bound: int) -> list[list[int]] | None:
    """The minimal covers of ``Σ weights·l >= bound`` (positive weights) as index lists, or
    None when there are more than :data:`MAX_COVERS` (or the search for them takes more
    than ``MAX_COVERS`` steps per literal)."""
    order = sorted(range(len(weights)), key=lambda i: -weights[i])
    w = [weights[i] for i in order]
    slack = sum(w) - bound  # a cover's weight exceeds it
    covers: list[list[int]] = []
    steps = [MAX_COVERS * len(w)]
    chosen: list[int] = []

    def extend(first: int, total: int) -> bool:
        """Every cover that extends ``chosen`` (weight ``total``) by literals from
        ``first`` on; False when a budget ran out. Taken heaviest first, a set is a cover
        the moment its weight passes ``slack``, and a minimal one (its lightest literal,
        the last added, was needed)."""
        for i in range(first, len(w)):
            steps[0] -= 1
            if steps[0] < 0:
                return False
            chosen.append(order[i])
            if total + w[i] > slack:
                covers.append(list(chosen))
                if len(covers) > MAX_COVERS:
                    return False
            elif not extend(i + 1, total + w[i]):
                return False
            chosen.pop()
        return True

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2 * len(w) + 100))
    try:
        return covers if extend(0, 0) else None
    finally:
        sys.setrecursionlimit(limit)


class Encoder:
    """Clauses for ``>=`` rows (:func:`at_least_rows`); new variables numbered from
    ``first_free``. ``expired`` is polled between rows and every :data:`POLL_NODES` BDD
    nodes: True stops the encoding with :class:`TimeoutError`."""

    def __init__(self, first_free: int, expired: Callable[[], bool] = lambda: False) -> None:
        self.top = first_free - 1
        self.clauses: list[list[int]] = []
        self.nodes = 0
        self.calls = 0  # steps of the BDD construction, nodes or lookups: the clock is polled by them
        self.expired = expired

    def add(self, lits: list[int], weights: list[int], bound: int, row: int) -> None:
        """Add ``Σ weights·lits >= bound`` (positive weights, each at most ``bound``)."""
        if self.expired():
            raise TimeoutError("the time limit passed while the rows were encoded")
        if not lits:
            self.clauses.append([])  # no assignment meets it
        elif all(w >= bound for w in weights):
            self.clauses.append(list(lits))
        elif (covers := minimal_covers(weights, bound)) is not None:
            self.clauses.extend([lits[i] for i in cover] for cover in covers)
        else:
            root = self._bdd(lits, weights, bound, row)
            if root == FALSE:
                self.clauses.append([])
            elif root != TRUE:
                self.clauses.append([root])

    def _bdd(self, lits: list[int], weights: list[int], bound: int, row: int) -> int:
        order = sorted(range(len(lits)), key=lambda i: -weights[i])
        lit = [lits[i] for i in order]
        w = [weights[i] for i in order]
        rest = [0] * (len(w) + 1)
        for i in range(len(w) - 1, -1, -1):
            rest[i] = rest[i + 1] + w[i]
        starts: list[list[int]] = [[] for _ in w]  # per level: the intervals' lower ends,
        known: list[list[tuple[int, int, int]]] = [[] for _ in w]  # sorted, and nodes
        far = 2 * (rest[0] + abs(bound)) + 2  # past every k the build asks about: an end at
        # ±far stands for ±infinity (exact integers: floats would overflow on huge weights)

        def build(i: int, k: int) -> tuple[int, int, int]:
            """The node for ``Σ_{j>=i} w_j·l_j >= k`` and the interval of ``k`` it serves."""
            self.calls += 1
            if self.calls % POLL_NODES == 0 and self.expired():  # lookups too: they can run long
                raise TimeoutError("the time limit passed while the rows were encoded")
            if k <= 0:
                return TRUE, -far, 0
            if k > rest[i]:
                return FALSE, rest[i] + 1, far
            at = bisect.bisect_right(starts[i], k) - 1
            if at >= 0 and known[i][at][1] >= k:
                lo, hi, node = known[i][at]
                return node, lo, hi
            high, hlo, hhi = build(i + 1, k - w[i])
            low, llo, lhi = build(i + 1, k)
            lo, hi = max(hlo + w[i], llo), min(hhi + w[i], lhi)
            node = high if high == low else self._node(lit[i], high, low, row)
            starts[i].insert(at + 1, lo)
            known[i].insert(at + 1, (lo, hi, node))
            return node, lo, hi

        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 2 * len(w) + 100))
        try:
            return build(0, bound)[0]
        finally:
            sys.setrecursionlimit(limit)

    def _node(self, lit: int, high: int, low: int, row: int) -> int:
        """A node ``v``: ``v → high`` and ``v → lit ∨ low`` (``high`` is never FALSE and
        ``low`` never TRUE where the two differ: the row is monotone)."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise EncodingTooLarge(f"row {row} passes the budget of {MAX_NODES:,} BDD nodes for "
                                   "an exact encoding")
        self.top += 1
        v = self.top
        if high != TRUE:
            self.clauses.append([-v, high])
        self.clauses.append([-v, lit] if low == FALSE else [-v, lit, low])
        return v
