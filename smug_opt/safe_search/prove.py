"""The exact optimum of a problem without ReLUs by the safe search, over strengthening's parts.

Strengthening (:func:`smug_opt.strengthen.strengthen`) keeps the optimum and splits a 0/1
problem into independent parts with exact cuts: the optimum is the cost of the cells it
fixes on plus each part's optimum, and each part's search runs on its own, smaller LP with
the cuts in it. A part starts from the incumbent's values on its cells when they satisfy
it (verified exactly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from smug_opt.deadline import Deadline
from smug_opt.exact import float_down
from smug_opt.ir import Problem
from smug_opt.safe_search.parallel import search
from smug_opt.safe_search.search import Settings
from smug_opt.verification import Verification, verify

__all__ = ["Proof", "applies", "prove_optimum"]


@dataclass(frozen=True)
class Proof:
    """``proven``: ``best`` is the exact optimum (None: infeasible); otherwise ``why``
    says what stopped the search, and ``bound`` (when known) is a rigorous lower bound on
    every solution better than the incumbent. Counts summed over the parts."""

    proven: bool
    best: Verification | None
    nodes: int
    lps: int
    fixed_by_reduced_costs: int
    parts: int
    seconds: float
    why: str = ""
    bound: float | None = None
    closed_by_propagation: int = 0
    fixed_by_propagation: int = 0

    def summary(self) -> str:
        propagation = self.closed_by_propagation or self.fixed_by_propagation
        return (f"{self.nodes} node{'s' * (self.nodes != 1)}, {self.lps} LPs, "
                f"{self.fixed_by_reduced_costs} reduced-cost fixings"
                + (f", propagation closed {self.closed_by_propagation} nodes and fixed "
                   f"{self.fixed_by_propagation} binaries" if propagation else "")
                + (f", {self.parts} parts" if self.parts > 1 else "")
                + (f", lowest open bound {self.bound:.4g}" if self.bound is not None else "")
                + f", {self.seconds:.2f}s")


def applies(problem: Problem) -> bool:
    """Whether the safe search takes ``problem``: no ReLUs, at least one row."""
    return problem.num_relus == 0 and problem.num_rows > 0


def prove_optimum(problem: Problem, incumbent: Verification | None, deadline: Deadline,
                  settings: Settings | None = None, *, strengthened: bool = True) -> Proof:
    """The exact optimum of ``problem`` proven by the safe search by ``deadline``, or
    why not; ``incumbent`` (verified) is the solution to beat. ``settings``' node and LP
    limits bound the parts' searches together."""
    from smug_opt.strengthen.reuse import strengthen_reused

    start = time.monotonic()
    s = strengthen_reused(problem) if strengthened else None
    if s is None or not s.applied:
        o = search(problem, incumbent, deadline, settings)
        return Proof(o.proven, o.best, o.nodes, o.lps, o.fixed_by_reduced_costs, 1, time.monotonic() - start,
                     o.why, o.bound, o.closed_by_propagation, o.fixed_by_propagation)
    nodes = lps = fixings = closed = narrowed = 0
    solutions = []
    optimum = s.offset
    for position, part in enumerate(s.parts):
        part_incumbent = None
        if incumbent is not None:
            x = np.concatenate([incumbent.x[part.columns], np.ones(part.carried.size)])
            candidate = verify(part.problem, x)
            part_incumbent = candidate if candidate.ok else None
        o = search(part.problem, part_incumbent, deadline, _left(settings or Settings(), nodes, lps))
        nodes, lps, fixings = nodes + o.nodes, lps + o.lps, fixings + o.fixed_by_reduced_costs
        closed, narrowed = closed + o.closed_by_propagation, narrowed + o.fixed_by_propagation
        if not o.proven or o.best is None:
            why = o.why if not o.proven else "a part of the strengthened problem is infeasible"
            last = position == len(s.parts) - 1  # the other parts' optima known: a bound on the whole
            bound = float_down(optimum + Fraction(o.bound)) if last and o.bound is not None else None
            return Proof(False, None, nodes, lps, fixings, len(s.parts), time.monotonic() - start, why,
                         bound, closed, narrowed)
        solutions.append(o.best.x)
        optimum += o.best.objective
    best = verify(problem, s.expand(solutions))
    seconds = time.monotonic() - start
    if not best.ok or best.objective != optimum:  # the map back disagrees: claim nothing
        return Proof(False, None, nodes, lps, fixings, len(s.parts), seconds,
                     f"the parts' optima ({float(optimum)!r}) do not give a solution of the problem "
                     f"of that objective ({best.summary()}, objective {float(best.objective)!r})",
                     None, closed, narrowed)
    return Proof(True, best, nodes, lps, fixings, len(s.parts), seconds, "", None, closed, narrowed)


def _left(settings: Settings, nodes: int, lps: int) -> Settings:
    """``settings`` with the nodes and LPs the earlier parts used taken off its limits."""
    return replace(settings, max_nodes=max(settings.max_nodes - nodes, 0),
                   max_lps=max(settings.max_lps - lps, 0))
