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

import numpy as np

from smug_opt.ir import Problem, Sense

__all__ = ["DEFAULT_MAX_NONZEROS", "ProblemFeatures", "certified_by_default", "features"]

DEFAULT_MAX_NONZEROS = 2000
"""The largest matrix (nonzeros) the default certifies. Measured on the text, synthetic and
MNIST first-layer suites (135 claims, HiGHS's solve in its warm worker): one safe LP bound
of the problem as stated costs a median 8.3 % of the solve up to 2,000 nonzeros, 79 of 121
claims under 10 %; the 14 larger (the 500-row first layers, 2,943-7,340 nonzeros, solved in
0.2-0.9 s) cost up to 1.8x. The strengthened bound and the safe search, which certify far
more claims, cost a median 47 % (6 of 135 under 10 %): ``certify=True`` runs them."""


@dataclass(frozen=True)
class ProblemFeatures:
    """What the rule may read: sizes, the largest row, strict rows, ReLUs and whether every
    row coefficient is an integer."""

    binaries: int
    continuous: int
    rows: int
    nonzeros: int
    largest_row: int
    strict_rows: int
    relus: int
    integer_coefficients: bool


def features(problem: Problem) -> ProblemFeatures:
    """``problem``'s :class:`ProblemFeatures` (one pass over its matrix)."""
    A = problem.A.tocsr()
    per_row = np.diff(A.indptr)
    binaries = int(np.count_nonzero(problem.binary))
    return ProblemFeatures(
        binaries=binaries, continuous=problem.num_vars - binaries, rows=problem.num_rows,
        nonzeros=int(A.nnz), largest_row=int(per_row.max(initial=0)),
        strict_rows=int(np.count_nonzero(np.isin(problem.senses, (Sense.GT, Sense.LT)))),
        relus=problem.num_relus, integer_coefficients=bool(np.all(A.data == np.round(A.data))))


def certified_by_default(f: ProblemFeatures) -> bool:
    """Whether the default certification runs on a problem with features ``f``: no ReLUs
    (their LP relaxation drops them), at least one row, at most :data:`DEFAULT_MAX_NONZEROS`
    nonzeros."""
    return f.relus == 0 and f.rows > 0 and f.nonzeros <= DEFAULT_MAX_NONZEROS
