"""Strengthening: a step between the Problem and the bridges that hands every backend a
stronger, equivalent problem (valid cuts, fixings, implied rows removed, independent
components), plus the map back to the original variables. It knows no solver.

Use it through :func:`smug_opt.solve` (``strengthen=True``) or directly::

    s = strengthen(problem)            # Strengthened: parts + fixings + stats
    x = s.expand([solution of each part])
"""

from smug_opt.strengthen.presolve import (
    AUTO_SHARE,
    MAX_CLAUSES,
    Part,
    Pieces,
    Strengthened,
    strengthen,
    worth_strengthening,
)

__all__ = ["AUTO_SHARE", "MAX_CLAUSES", "Part", "Pieces", "Strengthened", "strengthen",
           "worth_strengthening"]
