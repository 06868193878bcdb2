"""A certified branch-and-bound: every node's LP answer becomes an exact VIPR derivation.

At a node (binaries fixed by ``asm`` constraints) HiGHS's row duals ``y`` (or its Farkas
ray) are read as exact rationals, signs clipped to what each row allows; the residual
``c − Σ y_i a_i`` is absorbed exactly by the node's bound rows (lower bound where it is
positive, upper where negative), so the combination's left side is exactly ``c`` (or 0)
and its right side an exact bound: Neumaier and Shcherbina (2004) evaluated in rationals.
A node whose bound reaches the target (``rnd`` lifts it to an integer for an integral
objective) or whose relaxation is infeasible is closed by one ``lin``/``rnd`` line;
otherwise it branches on a fractional binary and the two sides are joined by ``uns``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from smug_opt.certificate.fixings import propagate
from smug_opt.certificate.milp import CertificateError, ExactMilp, ExactRow
from smug_opt.certificate.node_lp import NodeLp
from smug_opt.certificate.vipr import OBJECTIVE, Derivations

__all__ = ["SearchStats", "prove"]

_NEGLIGIBLE = 1e-14
"""Multipliers this small (relative to the largest) are dropped: they only lengthen the
rationals, and the residual they leave is absorbed exactly like any other."""

_STRONG_CANDIDATES = 8
"""Fractional binaries whose two children's LPs are solved to choose the branch."""

_FRACTIONAL = 1e-6
"""A binary's LP value this far from 0 and 1 counts as fractional when choosing a branch."""


@dataclass(frozen=True)
class SearchStats:
    """What proving took: branch-and-bound ``nodes`` (1: the root closed it), LPs solved."""

    nodes: int
    seconds: float


class _Prover:
    def __init__(self, milp: ExactMilp, rows: Sequence[tuple[int, ExactRow]], derivations: Derivations,
                 target: Fraction | None, deadline: float, max_nodes: int, rows_of: list[list[int]]) -> None:
        self.milp, self.der, self.target, self.rows_of = milp, derivations, target, rows_of
        self.row_index = [index for index, _ in rows]
        self.rows = [row for _, row in rows]
        self.row_den = [math.lcm(*(a.denominator for a in row.coefs)) for row in self.rows]
        self.row_num = [[a.numerator * (den // a.denominator) for a in row.coefs]
                        for row, den in zip(self.rows, self.row_den, strict=True)]
        self.lp = NodeLp(milp, self.rows)
        self.deadline, self.max_nodes = deadline, max_nodes
        self.nodes = 0
        self.rounded = target is not None and milp.integral_objective
        n = milp.num_vars
        self.lower = [(2 * j, milp.rows[2 * j].rhs) for j in range(n)]
        self.upper = [(2 * j + 1, milp.rows[2 * j + 1].rhs) for j in range(n)]
        self.bound_den = math.lcm(*(row.rhs.denominator for row in milp.rows[:2 * n]))

    # the constraint every node derives: OBJ >= target, or the absurdity 0 >= 1
    def _goal(self) -> tuple[str, Fraction, str | list[tuple[int, Fraction]]]:
        if self.target is None:
            return "G", Fraction(1), []
        return "G", self.target, OBJECTIVE

    def _combine(self, objective: Mapping[int, Fraction], y: np.ndarray,
                 fixed: Mapping[int, tuple[int, int]]) -> tuple[Callable[[], dict[int, Fraction]], Fraction]:
        """``rhs`` and (made when asked) the exact multipliers by constraint index whose
        combination is ``objective·x >= rhs``.

        The residual is summed in integers over one common denominator (every float is a
        dyadic rational, so it stays a power of two): Fractions term by term cost 10x more.
        """
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        used: list[tuple[int, int, int]] = []  # (row k, numerator, denominator) of each multiplier
        for k in np.flatnonzero(np.abs(y) > _NEGLIGIBLE * scale).tolist():
            value = float(y[k])
            sense = self.rows[k].sense
            if (sense == "G" and value < 0) or (sense == "L" and value > 0):
                continue  # this side of the row does not exist
            p, q = value.as_integer_ratio()
            used.append((k, p, q))
        common = math.lcm(*(q * self.row_den[k] for k, _, q in used),
                          *(c.denominator for c in objective.values()))
        residual = {j: c.numerator * (common // c.denominator) for j, c in objective.items()}
        rhs = Fraction(0)
        for k, p, q in used:
            factor = p * (common // (q * self.row_den[k]))
            for j, a in zip(self.rows[k].cols, self.row_num[k], strict=True):
                residual[j] = residual.get(j, 0) - factor * a
            rhs += Fraction(p, q) * self.rows[k].rhs
        # each residual r_j / common leans on x_j's lower bound (r_j > 0) or upper (r_j < 0):
        # (constraint index, bound numerator over bound_den) per variable
        leaning: list[tuple[int, int, int]] = []  # (index, variable, residual numerator)
        bound_sum = 0
        for j, numerator in residual.items():
            if numerator == 0:
                continue
            index, bound = self.lower[j] if numerator > 0 else self.upper[j]
            if j in fixed:
                value, assumption = fixed[j]
                if numerator > 0 and value == 1:
                    index, bound = assumption, Fraction(1)
                elif numerator < 0 and value == 0:
                    index, bound = assumption, Fraction(0)
            leaning.append((index, j, numerator))
            if bound:
                bound_sum += numerator * bound.numerator * (self.bound_den // bound.denominator)
        rhs += Fraction(bound_sum, common * self.bound_den)

        def multipliers() -> dict[int, Fraction]:
            out = {self.row_index[k]: Fraction(p, q) for k, p, q in used}
            for index, _, numerator in leaning:
                share = Fraction(numerator, common)
                out[index] = out[index] + share if index in out else share
            return out

        return multipliers, rhs

    def _close(self, multipliers: dict[int, Fraction], *, rounded: bool) -> int:
        sense, rhs, lhs = self._goal()
        return self.der.combine(f"n{self.nodes}", sense, rhs, lhs, multipliers, rounded=rounded)

    def _propagated(self, fixed: dict[int, tuple[int, int]], changed: int) -> dict[int, tuple[int, int]]:
        """``fixed`` with the binaries that fixing ``changed`` forces (derived in ``der``)."""
        lower, upper = list(self.lower), list(self.upper)
        for j, (value, index) in fixed.items():
            if value == 1:
                lower[j] = (index, Fraction(1))
            else:
                upper[j] = (index, Fraction(0))
        found = propagate(self.milp, self.der, lower, upper, list(self.rows_of[changed]), self.rows_of)
        if not found:
            return fixed
        return {**fixed, **{row.cols[0]: (1 if row.sense == "G" else 0, index) for index, row in found}}

    def node(self, fixed: dict[int, tuple[int, int]], changed: int | None = None) -> int:
        """Derive the goal under ``fixed`` (binary -> (value, index of the constraint
        ``x_j <= 0`` or ``x_j >= 1``: an asm or a fixing)); its index. ``changed``: the
        binary this node's branch fixed (its rows are propagated)."""
        self.nodes += 1
        if changed is not None:
            fixed = self._propagated(fixed, changed)
        left = self.deadline - time.monotonic()
        if left <= 0 or self.nodes > self.max_nodes:
            raise CertificateError(f"the certified branch-and-bound did not finish "
                                   f"({self.nodes - 1} nodes, time limit reached)")
        if len(fixed) > 900:
            raise CertificateError("the certified branch-and-bound went deeper than 900 levels")
        answer = self.lp.solve({j: v for j, (v, _) in fixed.items()}, left)
        if answer.status == "unknown":
            raise CertificateError("HiGHS did not solve a node's LP relaxation (time limit or failure)")
        if answer.status == "infeasible":
            values = {j: v for j, (v, _) in fixed.items()}
            rays: list[np.ndarray | None] = [] if answer.ray is None else [answer.ray, -answer.ray]
            rays.append(self.lp.elastic_duals(values, self.deadline - time.monotonic()))
            for ray in rays:
                if ray is None:
                    continue
                multipliers, rhs = self._combine({}, ray, fixed)
                if rhs > 0:
                    return self._close(multipliers(), rounded=False)
            raise CertificateError("neither HiGHS's Farkas ray nor its elastic LP proves a node "
                                   "infeasible exactly")
        assert answer.duals is not None and answer.x is not None  # an optimal LP answer
        if self.target is not None and self._may_close(answer.value, self.target):
            multipliers, bound = self._combine(self.milp.objective, answer.duals, fixed)
            if bound >= self.target:
                return self._close(multipliers(), rounded=False)
            if self.rounded and bound > self.target - 1:
                return self._close(multipliers(), rounded=True)
        if all(j in fixed for j in range(self.milp.num_vars) if self.milp.integer[j]):
            return self._close_leaf(fixed)
        j = self._branch_variable(answer.x, fixed, answer.value)
        sense, rhs, lhs = self._goal()
        down = self.der.assume(f"d{self.nodes}", "L", Fraction(0), [(j, Fraction(1))])
        proved_down = self.node({**fixed, j: (0, down)}, j)
        up = self.der.assume(f"u{self.nodes}", "G", Fraction(1), [(j, Fraction(1))])
        proved_up = self.node({**fixed, j: (1, up)}, j)
        return self.der.unsplit(f"s{self.nodes}", sense, rhs, lhs, (proved_down, down), (proved_up, up))

    def _close_leaf(self, fixed: Mapping[int, tuple[int, int]]) -> int:
        """Every binary is fixed, yet the LP's float duals did not close the node: the
        objective leaning on the fixings and bounds alone (exactly ``c·x`` when only fixed
        binaries carry costs: the duals may miss a real-valued target by a rounding); a row
        the point violates exactly, with the bounds, is an absurdity; or the elastic LP's
        duals (HiGHS called an infeasible point optimal within its tolerances)."""
        if self.target is not None:
            multipliers, bound = self._combine(self.milp.objective, np.zeros(len(self.rows)), fixed)
            if bound >= self.target:
                return self._close(multipliers(), rounded=False)
        duals = self.lp.elastic_duals({j: v for j, (v, _) in fixed.items()}, self.deadline - time.monotonic())
        if duals is not None:
            multipliers, rhs = self._combine({}, duals, fixed)
            if rhs > 0:
                return self._close(multipliers(), rounded=False)
        for k, row in enumerate(self.rows):
            for sign in {"G": (1.0,), "L": (-1.0,), "E": (1.0, -1.0)}[row.sense]:
                unit = np.zeros(len(self.rows))
                unit[k] = sign
                multipliers, rhs = self._combine({}, unit, fixed)
                if rhs > 0:
                    return self._close(multipliers(), rounded=False)
        raise CertificateError("a node with every binary fixed is not closed by its LP bound "
                               "(the claim does not hold for the stated MILP)")

    def _may_close(self, lp_value: float, target: Fraction) -> bool:
        """Whether the LP's float value comes near enough ``target`` for its exact bound
        to be worth evaluating (a margin well above the LP solver's tolerances)."""
        if self.rounded:  # the exact bound must pass target − 1: an LP value on it will not
            needed = float(target) - 1
            return lp_value > needed + 1e-9 * max(1.0, abs(needed))
        needed = float(target)
        return lp_value >= needed - 1e-6 * max(1.0, abs(needed))

    def _branch_variable(self, x: np.ndarray, fixed: Mapping[int, tuple[int, int]], value: float) -> int:
        """Strong branching over the most fractional free binaries of the LP solution: the
        one whose two children's LP values rise most (product score); without fractional
        ones (an integral LP optimum with too weak a bound) the free binary of largest
        objective coefficient."""
        free = np.array([j for j in range(self.milp.num_vars)
                         if self.milp.integer[j] and j not in fixed], dtype=np.int64)
        distance = np.minimum(x[free], 1.0 - x[free])
        fractional = free[distance > _FRACTIONAL]
        if fractional.size == 0:
            weight = np.array([abs(float(self.milp.objective.get(int(j), 0))) for j in free])
            return int(free[int(np.argmax(weight))])
        order = np.argsort(-distance[distance > _FRACTIONAL], kind="stable")
        candidates = fractional[order[:_STRONG_CANDIDATES]].tolist()
        if len(candidates) == 1 or self.target is None:
            return int(candidates[0])
        base = {j: v for j, (v, _) in fixed.items()}
        best, best_score = candidates[0], -1.0
        for j in candidates:
            gains = []
            for side in (0, 1):
                left = self.deadline - time.monotonic()
                child = self.lp.solve({**base, j: side}, left)
                gain = np.inf if child.status == "infeasible" else (
                    child.value - value if child.status == "optimal" else 0.0)
                gains.append(max(gain, 1e-6))
            score = min(gains[0], 1e9) * min(gains[1], 1e9)
            if score > best_score:
                best, best_score = j, score
        return int(best)


def prove(milp: ExactMilp, rows: Sequence[tuple[int, ExactRow]], derivations: Derivations,
          target: Fraction | None, *, seconds: float, fixed: dict[int, tuple[int, int]],
          rows_of: list[list[int]], max_nodes: int = 100_000) -> SearchStats:
    """Append to ``derivations`` a proof that ``min c·x >= target`` (``None``: no feasible
    point) over ``milp``, using ``rows`` (constraint index, row) in the LP relaxations,
    from the root's ``fixed`` binaries (value, index of their fixing row) on; ``rows_of``
    (:func:`~smug_opt.certificate.fixings.rows_of_columns`) for propagation at nodes.

    Raises :class:`CertificateError` when the proof does not finish within ``seconds``
    or ``max_nodes`` nodes, or a node cannot be closed.
    """
    start = time.monotonic()
    prover = _Prover(milp, rows, derivations, target, start + seconds, max_nodes, rows_of)
    prover.node(dict(fixed))
    return SearchStats(prover.nodes, time.monotonic() - start)
