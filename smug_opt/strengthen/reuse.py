"""The last problem's strengthening, reused: a solve strengthens its problem, then
certification strengthens the same problem for its safe LP bound and again for its safe
search (on cnn-d2-c1-k100-g0.5 ~0.9 s of a 2.1 s certification; on two bias-free stems
about half of it: ``benchmarks/certify/strengthening_reuse.md``). Strengthening is deterministic and a
:class:`~smug_opt.ir.Problem` is not changed after it is built, so the later calls take the
first one's result."""

from __future__ import annotations

import weakref

from smug_opt.ir import Problem
from smug_opt.strengthen.outcome import Pieces, Strengthened
from smug_opt.strengthen.presolve import strengthen

__all__ = ["strengthen_and_remember", "strengthen_reused"]

_last: tuple[weakref.ref[Problem], Strengthened] | None = None


def strengthen_reused(problem: Problem) -> Strengthened:
    """:func:`~smug_opt.strengthen.strengthen` (all pieces) of ``problem``, computed once
    for the same problem object asked twice in a row (or just strengthened by
    :func:`strengthen_and_remember`)."""
    last = _last
    if last is not None and last[0]() is problem:
        return last[1]
    return strengthen_and_remember(problem, Pieces())


def strengthen_and_remember(problem: Problem, pieces: Pieces) -> Strengthened:
    """:func:`~smug_opt.strengthen.strengthen` ``problem`` afresh (its ``stats`` time this
    call) and, with all pieces on, keep the result for :func:`strengthen_reused`."""
    global _last
    s = strengthen(problem, pieces)
    if pieces == Pieces():
        _last = (weakref.ref(problem), s)
    return s
