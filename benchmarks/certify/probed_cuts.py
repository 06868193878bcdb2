"""Safe root bounds of the stress runs' claims with HiGHS's root cuts proven by single rows
only, and by single rows then probing (:mod:`smug_opt.safe_search.probed_cuts`): one round
of HiGHS's root per strengthened part, the bound the strengthened problem gets (the parts'
safe LP bounds with the proven cuts, each rounded up for an integral objective, plus the
cells fixed on) against the claimed optimum ``v`` (proven when above ``v − 1``).

    python benchmarks/certify/probed_cuts.py RESULTS.jsonl CACHE_DIR
"""

from __future__ import annotations

import json
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from smug_opt import load_problem
from smug_opt.safe_search.covers import knapsack_rows
from smug_opt.safe_search.probed_cuts import probed_cuts
from smug_opt.safe_search.propagation import RowPropagator
from smug_opt.safe_search.relaxation import Relaxation
from smug_opt.safe_search.verified_cuts import highs_root_pool, verified_cuts
from smug_opt.strengthen.reuse import strengthen_reused


def _bound(problem, cuts) -> float:  # type: ignore[no-untyped-def]
    lb, ub = np.asarray(problem.lb, dtype=np.float64), np.asarray(problem.ub, dtype=np.float64)
    lp = Relaxation(problem)
    lp.add_cuts(cuts)
    answer = lp.solve(lb, ub, 120.0)
    if answer.duals is None:
        return -math.inf
    bound = lp.safe_bound(answer.duals, lb, ub)[0]
    return math.ceil(bound) if problem.integral_objective and math.isfinite(bound) else bound


def main(results: str, cache: str) -> None:
    print("| instance | claim | proof (run) | parts | pool | by rows | + probed | bound rows | bound probed "
          "| proven (rows / probed) | CPU s (pool, probing) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for line in Path(results).read_text().splitlines():
        r = json.loads(line)
        if r.get("status") != "OPTIMAL":
            continue
        p = load_problem(Path(cache) / f"{r['instance']}.smug")
        s = strengthen_reused(p)
        parts = [part.problem for part in s.parts] if s.applied else [p]
        offset = Fraction(s.offset) if s.applied else Fraction(0)
        rows_total, probed_total = offset, offset
        pool_n = by_rows = by_probe = 0
        t_pool = t_probe = 0.0
        for q in parts:
            t = time.process_time()
            pool, _ = highs_root_pool(q, 120.0)
            t_pool += time.process_time() - t
            rows = knapsack_rows(q)
            proven = verified_cuts(pool, rows)
            keys = {(c.cols.tobytes(), c.coefs.tobytes()) for c in proven}
            t = time.process_time()
            rest = [c for c in pool if (c.cols.tobytes(), c.coefs.tobytes()) not in keys]
            box = np.asarray(q.lb, dtype=np.float64), np.asarray(q.ub, dtype=np.float64)
            more = probed_cuts(rest, RowPropagator(rows), *box)
            t_probe += time.process_time() - t
            pool_n, by_rows, by_probe = pool_n + len(pool), by_rows + len(proven), by_probe + len(more)
            rows_total += Fraction(_bound(q, proven))
            probed_total += Fraction(_bound(q, proven + more))
        v = Fraction(r["objective"])
        proven_by = " / ".join("yes" if total > v - 1 else "no" for total in (rows_total, probed_total))
        print(f"| {r['instance']} | {float(v):g} | {r.get('proof')} | {len(parts)} | {pool_n} | {by_rows} "
              f"| {by_probe} | {float(rows_total):.3f} | {float(probed_total):.3f} | {proven_by} "
              f"| {t_pool:.1f}, {t_probe:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
