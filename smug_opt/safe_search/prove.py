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
from smug_opt.safe_search.parallel import Paused, resume, search_pausable
from smug_opt.safe_search.search import SearchOutcome, Settings
from smug_opt.strengthen.outcome import Part
from smug_opt.verification import Verification, verify

__all__ = ["OptimumSearch", "Proof", "applies", "prove_optimum"]


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
    return OptimumSearch(problem, incumbent, strengthened=strengthened).run(deadline, settings)


class OptimumSearch:
    """:func:`prove_optimum` that can be taken up again: a run stopped by a limit (say an
    LP budget) keeps the parts it proved and the open nodes of the part it stopped in, and
    the next :meth:`run` goes on from there instead of solving the same LPs again."""

    def __init__(self, problem: Problem, incumbent: Verification | None, *,
                 strengthened: bool = True) -> None:
        from smug_opt.strengthen.reuse import strengthen_reused

        self.problem, self.incumbent = problem, incumbent
        self.strengthened = strengthen_reused(problem) if strengthened else None
        self.position = 0  # the part searched now (the parts before it are proven)
        self.optimum = Fraction(0) if self.strengthened is None else self.strengthened.offset
        self.solutions: list[np.ndarray] = []
        self.done = _Counts()  # the proven parts' work
        self.paused: Paused | None = None
        self.seconds = 0.0
        self.finished: Proof | None = None  # the answer once the search ended (not by a limit)

    def run(self, deadline: Deadline, settings: Settings | None = None) -> Proof:
        """Go on by ``deadline`` with ``settings`` (their node and LP limits count every run's work)."""
        if self.finished is not None:
            return self.finished
        start = time.monotonic()
        settings = settings or Settings()
        s = self.strengthened
        if s is None or not s.applied:
            o = self._search(self.problem, self.incumbent, deadline, settings)
            proof = Proof(o.proven, o.best, o.nodes, o.lps, o.fixed_by_reduced_costs, 1,
                          self._took(start), o.why, o.bound, o.closed_by_propagation, o.fixed_by_propagation)
            return self._ended(proof, o.proven)
        while self.position < len(s.parts):
            part = s.parts[self.position]
            o = self._search(part.problem, self._part_incumbent(part), deadline,
                             _left(settings, self.done.nodes, self.done.lps))
            total = self.done.plus(o)
            if not o.proven or o.best is None:
                why = o.why if not o.proven else "a part of the strengthened problem is infeasible"
                last = self.position == len(s.parts) - 1  # the other parts known: a bound on the whole
                bound = float_down(self.optimum + Fraction(o.bound)) if last and o.bound is not None else None
                proof = Proof(False, None, total.nodes, total.lps, total.fixings, len(s.parts),
                              self._took(start), why, bound, total.closed, total.narrowed)
                return self._ended(proof, o.proven)
            self.done, self.position = total, self.position + 1
            self.solutions.append(o.best.x)
            self.optimum += o.best.objective
        best = verify(self.problem, s.expand(self.solutions))
        d = self.done
        if not best.ok or best.objective != self.optimum:  # the map back disagrees: claim nothing
            return self._ended(Proof(False, None, d.nodes, d.lps, d.fixings, len(s.parts), self._took(start),
                                     f"the parts' optima ({float(self.optimum)!r}) do not give a solution "
                                     f"of the problem of that objective ({best.summary()}, objective "
                                     f"{float(best.objective)!r})", None, d.closed, d.narrowed), True)
        return self._ended(Proof(True, best, d.nodes, d.lps, d.fixings, len(s.parts), self._took(start), "",
                                 None, d.closed, d.narrowed), True)

    def _search(self, problem: Problem, incumbent: Verification | None, deadline: Deadline,
                settings: Settings) -> SearchOutcome:
        """The current part's search: taken up where it paused, else started."""
        if self.paused is not None:
            outcome, self.paused = resume(self.paused, deadline, settings)
        else:
            outcome, self.paused = search_pausable(problem, incumbent, deadline, settings)
        return outcome

    def _part_incumbent(self, part: Part) -> Verification | None:
        """The incumbent's values on ``part``'s cells, when they satisfy it (verified exactly)."""
        if self.incumbent is None:
            return None
        x = np.concatenate([self.incumbent.x[part.columns], np.ones(part.carried.size)])
        candidate = verify(part.problem, x)
        return candidate if candidate.ok else None

    def _took(self, start: float) -> float:
        self.seconds += time.monotonic() - start
        return self.seconds

    def _ended(self, proof: Proof, final: bool) -> Proof:
        """``proof``, kept as the answer to every later :meth:`run` when ``final`` (a
        search stopped by a limit is not: the next run goes on from its open nodes, or
        searches the part afresh when it stopped before its root was queued)."""
        if final:
            self.finished = proof
        return proof


@dataclass(frozen=True)
class _Counts:
    """Work summed over searches."""

    nodes: int = 0
    lps: int = 0
    fixings: int = 0
    closed: int = 0
    narrowed: int = 0

    def plus(self, o: SearchOutcome) -> _Counts:
        return _Counts(self.nodes + o.nodes, self.lps + o.lps, self.fixings + o.fixed_by_reduced_costs,
                       self.closed + o.closed_by_propagation, self.narrowed + o.fixed_by_propagation)


def _left(settings: Settings, nodes: int, lps: int) -> Settings:
    """``settings`` with the nodes and LPs the earlier parts used taken off its limits."""
    return replace(settings, max_nodes=max(settings.max_nodes - nodes, 0),
                   max_lps=max(settings.max_lps - lps, 0))
