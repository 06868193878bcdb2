"""Whether ``solve``'s default (``certify=None``) certifies a floating-point claim: a rule on
cheap, deterministic features of the problem, chosen from measurements of what certification
costs against the solve (``benchmarks/certify/default_rule.md``).

The rule reads the problem only (never the clock or the machine's load), so a batch run
and a single run, on a quiet or a busy machine, make the same choice; what the default
certification then does is one LP (:func:`smug_opt.certify.certify_within_budget`), a
budget in work.
"""

from __future__ import annotations

from dataclasses import dataclass

from smug_opt.ir import Problem

__all__ = ["DEFAULT_MAX_NONZEROS", "DEFAULT_MAX_ROWS", "ProblemFeatures", "certified_by_default",
           "features"]

DEFAULT_MAX_ROWS = 100
"""The most rows the default certifies: the LP's cost grows with them. Measured on the text,
synthetic, MNIST first-layer and paper-scale suites (141 claims without ReLUs, HiGHS's
solve in its warm worker, ``benchmarks/certify/default_rule.md``): the 500-row problems
cost 0.02-1.6x their solve (a median 0.26x, none certified); up to 100 rows (and
:data:`DEFAULT_MAX_NONZEROS`) a median 0.076x, 88 of 121 claims under 10 %."""

DEFAULT_MAX_NONZEROS = 2500
"""The largest matrix (nonzeros) the default certifies, with at most
:data:`DEFAULT_MAX_ROWS` rows: the largest measured within them (the 784-cell MLP
first layers of 13-15 rows, 2,460-2,496 nonzeros: 0.002-0.074x). Past it nothing was
measured but the 500-row problems."""


@dataclass(frozen=True)
class ProblemFeatures:
    """What the rule reads: ReLUs, rows and the matrix's nonzeros."""

    relus: int
    rows: int
    nonzeros: int


def features(problem: Problem) -> ProblemFeatures:
    """``problem``'s :class:`ProblemFeatures` (its sizes: no pass over the matrix)."""
    return ProblemFeatures(relus=problem.num_relus, rows=problem.num_rows, nonzeros=int(problem.A.nnz))


def certified_by_default(f: ProblemFeatures) -> bool:
    """Whether the default certification runs on a problem with features ``f``: no ReLUs
    (their LP relaxation drops them), 1 to :data:`DEFAULT_MAX_ROWS` rows, at most
    :data:`DEFAULT_MAX_NONZEROS` nonzeros."""
    return f.relus == 0 and 0 < f.rows <= DEFAULT_MAX_ROWS and f.nonzeros <= DEFAULT_MAX_NONZEROS
