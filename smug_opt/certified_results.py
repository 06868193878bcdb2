"""How a certification's outcome becomes the :class:`SolveResult` reported: a claim settled
exactly, a solver's claim corrected by a better verified solution, or a claim downgraded
(OPTIMAL -> FEASIBLE, INFEASIBLE -> NO_SOLUTION) when nothing exact settles it. Every one
carries a note saying why and the seconds certification took."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from fractions import Fraction
from typing import Any

from smug_opt.backend import Status
from smug_opt.exact import float_down
from smug_opt.ir import Problem
from smug_opt.result import Proof, SolveResult, relative_gap
from smug_opt.verification import Verification

__all__ = ["corrected", "downgraded", "finished", "settled"]


def settled(problem: Problem, result: SolveResult, best: Verification | None, how: str,
             start: float) -> SolveResult:
    """The exact answer ``best`` (None: infeasible) replaces ``result``'s claim."""
    if best is None:
        wrong = result.status not in (Status.INFEASIBLE, Status.ERROR)
        note = (f"certified INFEASIBLE by {how}" if not wrong else
                f"the solver's claim was wrong: {how} shows the problem is infeasible")
        return finished(result, status=Status.INFEASIBLE, x=None, objective=None, bound=math.inf,
                        gap=None, proof=Proof.EXACT, verified=None,
                        verification="no solution to verify: infeasibility is a proof (see proof)",
                        note=note, start=start)
    same = result.x is not None and result.objective == float(best.objective)
    if result.status is Status.ERROR:
        note = f"the solver failed; optimum {float(best.objective)!r} found by {how}"
    elif same:
        note = f"certified {'OPTIMAL' if result.status is Status.OPTIMAL else 'optimal'} by {how}"
    else:
        note = (f"the solver's {result.status.name} was not optimal: certification found objective "
                f"{float(best.objective)!r} ({how})")
    return corrected(problem, result, best, note, start, proven=True)


def corrected(problem: Problem, result: SolveResult, best: Verification, note: str, start: float,
              *, proven: bool, bound: float | None = None) -> SolveResult:
    """``result`` with the verified solution ``best`` in its place: OPTIMAL and exact when
    ``proven``, else FEASIBLE with ``bound`` (the note says why)."""
    objective = float(best.objective)
    if proven:
        bound = objective if Fraction(objective) == best.objective else float_down(best.objective)
    gap = relative_gap(objective, bound)
    return finished(result, status=Status.OPTIMAL if proven else Status.FEASIBLE, x=best.x,
                    objective=objective, bound=bound, gap=gap,
                    proof=Proof.EXACT if proven else None, verified=True, verification=best.summary(),
                    note=note, start=start)


def downgraded(result: SolveResult, why: str, start: float) -> SolveResult:
    """OPTIMAL -> FEASIBLE, INFEASIBLE -> NO_SOLUTION: the solver's word is not a proof."""
    if result.status is Status.FEASIBLE:
        return finished(result, note=f"not certified optimal: {why}", start=start)
    status = Status.FEASIBLE if result.status is Status.OPTIMAL else Status.NO_SOLUTION
    bound = result.bound if status is Status.FEASIBLE else None
    return finished(result, status=status, bound=bound, proof=None,
                    note=f"the solver's {result.status.name} could not be certified: {why}", start=start)


def finished(result: SolveResult, *, note: str, start: float, **changes: Any) -> SolveResult:
    """``result`` with ``changes``, ``note`` appended and the seconds since ``start`` counted
    as certification overhead."""
    spent = time.monotonic() - start
    times = replace(result.times, total=result.times.total + spent,
                    overhead=result.times.overhead + spent)
    return result.with_note(note, times=times, **changes)

