"""An instance's largest strengthened part as weighted CNF, solved by python-sat's RC2
(core-guided MaxSAT: OLL with core exhaustion, core minimisation and trimming).

    python benchmarks/bias_free_stems/rc2_part.py keras-DenseNet121-china cd19

A measurement, not part of the package: it needs ``python-sat`` (not a dependency of
smug-opt). Each row ``a·M >= b`` (or ``>``) of the part, at most 12 cells, becomes its
minimal covers: the sets T of cells each at its unfavourable value whose weights ``Σ_T |a|``
leave the best completion below ``b``; each such set is a clause "some cell of T favourable".
That is the row's feasible set exactly (integer rows in integers; a real row in exact
rationals). Soft unit clauses ``¬M_j`` carry the costs. The answer is verified exactly
against the part; the last lines give its cost and the wall and CPU seconds.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from fractions import Fraction

import numpy as np

_SUBSETS = {k: np.array(list(itertools.product([0, 1], repeat=k)), dtype=bool) for k in range(1, 13)}


def _clauses(a: tuple[Fraction, ...], b: Fraction, strict: bool) -> list[list[int]]:
    """The minimal covers of ``Σ a_j M_j >= b`` (``> b`` when ``strict``), as 1-based
    positions signed by each cell's favourable value (+: on, -: off); exact (the row scaled
    to integers by its common denominator)."""
    scale = math.lcm(*(x.denominator for x in (*a, b)))
    w = np.array([int(x * scale) for x in a], dtype=object)
    slack = sum(int(x * scale) for x in a if x > 0) - int(b * scale)
    if slack < 0 or (strict and slack <= 0):
        raise SystemExit("a row no mask satisfies: the part is infeasible")
    bits = _SUBSETS[len(a)]
    mag = np.abs(w)
    weight = bits.astype(object) @ mag
    lightest = np.array([min((m for m, t in zip(mag, row, strict=True) if t), default=0) for row in bits],
                        dtype=object)
    lost = weight >= slack if strict else weight > slack
    kept = (weight - lightest) >= slack if strict else (weight - lightest) > slack
    minimal = lost & ~kept
    return [[j + 1 if a[j] > 0 else -(j + 1) for j in np.flatnonzero(row)] for row in bits[minimal]]


def main() -> None:
    from pysat.examples.rc2 import RC2
    from pysat.formula import WCNF

    from smug_opt.bench.suites import load_suite
    from smug_opt.ir import Sense
    from smug_opt.problem_file import load_problem
    from smug_opt.strengthen import strengthen
    from smug_opt.verification import verify

    name, solver = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "cd19"
    began = time.time()
    instance = next(i for i in load_suite("bias-free-stems") if i.name == name)
    part = max(strengthen(load_problem(instance.problem_path)).parts, key=lambda q: q.columns.size).problem
    A = part.A.tocsr()
    formula = WCNF()
    cache: dict[tuple, list[list[int]]] = {}
    for i in range(part.num_rows):
        cols = A.indices[A.indptr[i]:A.indptr[i + 1]]
        a = tuple(Fraction(float(x)) for x in A.data[A.indptr[i]:A.indptr[i + 1]])
        sense, b = Sense(int(part.senses[i])), Fraction(float(part.rhs[i]))
        if sense in (Sense.LE, Sense.LT):
            a, b = tuple(-x for x in a), -b
        if sense is Sense.EQ or len(a) > 12:
            raise SystemExit(f"row {i}: {sense.name} over {len(a)} cells is not handled here")
        key = (tuple(a), b, sense in (Sense.LT, Sense.GT))
        if key not in cache:
            cache[key] = _clauses(*key)
        for clause in cache[key]:
            formula.append([(int(cols[abs(j) - 1]) + 1) * (1 if j > 0 else -1) for j in clause])
    for j in range(part.num_vars):
        formula.append([-(j + 1)], weight=float(part.objective[j]))
    print(f"[{time.time() - began:6.1f}] part {part.num_vars} cells, {part.num_rows} rows -> "
          f"{len(formula.hard)} clauses", flush=True)
    wall, cpu = time.time(), time.process_time()
    with RC2(formula, solver=solver, adapt=True, exhaust=True, minz=True, trim=5) as rc2:
        model = rc2.compute()
    print(f"[{time.time() - began:6.1f}] RC2 ({solver}) optimum {rc2.cost} in {time.time() - wall:.1f} s "
          f"wall, {time.process_time() - cpu:.1f} CPU s", flush=True)
    x = np.array([1.0 if model[j] > 0 else 0.0 for j in range(part.num_vars)])
    check = verify(part, x)
    print(f"verified against the part: {check.ok}, objective {float(check.objective):g}")


if __name__ == "__main__":
    main()
