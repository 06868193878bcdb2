"""HiGHS's root cuts that no single row proves, proven by probing their support against all
the rows at once.

A cut ``π·x >= π₀`` over a few binaries holds at every solution when every assignment of
its support with ``π·x < π₀`` (decided exactly, in rationals) leaves a box that node
propagation (:class:`~smug_opt.safe_search.propagation.RowPropagator`, every deduction
rigorous) proves empty. HiGHS's implication and clique cuts on the pattern encoding
(:mod:`smug_opt.encode.pattern_milp`: ``x_c ≤ y_S + y_T``, ``x_a + x_b + y_S + y_T >= 1``)
follow from a one-hot row and a marginal or output row together, never from one alone; on
VeriVital's avg-pool CNN (stress d00018) probing proves 65 of HiGHS's 67 root cuts, which
lift the safe root bound from 3.0 to 3.55 and so prove the optimum 4
(benchmarks/certify/probed_cuts_avgpool.md).
"""

from __future__ import annotations

import itertools
import time
from fractions import Fraction

import numpy as np

from smug_opt.safe_search.covers import Cut
from smug_opt.safe_search.propagation import RowPropagator, propagate

__all__ = ["MAX_PROBED", "MAX_PROBES", "probed_cuts", "refuted"]

MAX_PROBED = 10
"""Support size up to which a cut is probed (``2^size`` assignments at most)."""

MAX_PROBES = 256
"""Assignments probed per cut at most (a cut needing more is dropped)."""


def refuted(propagator: RowPropagator, lb: np.ndarray, ub: np.ndarray, cols: np.ndarray,
            values: np.ndarray) -> bool:
    """Whether no point of the box ``lb``, ``ub`` with ``x[cols] = values`` satisfies the
    propagator's rows (proven; False may also mean propagation could not tell)."""
    if np.any(values < lb[cols]) or np.any(values > ub[cols]):
        return True
    lo, hi = lb.copy(), ub.copy()
    lo[cols] = hi[cols] = values
    return not propagate(lo, hi, [propagator.deduce])


def probed_cuts(candidates: list[Cut], propagator: RowPropagator, lb: np.ndarray, ub: np.ndarray,
                deadline: float | None = None) -> list[Cut]:
    """The ``candidates`` (binary columns, distinct) whose every support assignment below
    their right-hand side is :func:`refuted` within the box ``lb``, ``ub``; probing stops
    at ``deadline`` (``time.monotonic()``)."""
    kept = []
    for cut in candidates:
        if deadline is not None and time.monotonic() > deadline:
            break
        if cut.cols.size <= MAX_PROBED and _holds(cut, propagator, lb, ub):
            kept.append(cut)
    return kept


def _holds(cut: Cut, propagator: RowPropagator, lb: np.ndarray, ub: np.ndarray) -> bool:
    coefs = [Fraction(float(a)) for a in cut.coefs]
    rhs = Fraction(float(cut.rhs))
    probes = 0
    for bits in itertools.product((0, 1), repeat=cut.cols.size):
        if sum((a for a, b in zip(coefs, bits, strict=True) if b), Fraction(0)) >= rhs:
            continue
        probes += 1
        if probes > MAX_PROBES or not refuted(propagator, lb, ub, cut.cols, np.array(bits, dtype=np.float64)):
            return False
    return True
