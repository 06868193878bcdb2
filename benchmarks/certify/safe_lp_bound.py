"""How many HiGHS optima the safe LP bound certifies, and at what cost against the solve.

For each instance of a bench suite: HiGHS (isolated worker, uncertified) within the time
limit, then :func:`smug_opt.safe_lp_bound.strengthened_safe_lp_bound` (strengthening plus
the safe LP bound of each part: what certify tries first; its seconds include
strengthening). An OPTIMAL with an integral objective ``v`` is certified when the bound
exceeds ``v - 1``.

    python benchmarks/certify/safe_lp_bound.py mnist-first-layer --time-limit 10 > table.md
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from smug_opt import Status, load_problem, solve
from smug_opt.bench.suites import load_suite
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import strengthened_safe_lp_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--time-limit", type=float, default=10.0)
    args = parser.parse_args()
    rows = []
    print("| instance | HiGHS | objective | solve s | safe LP bound | LP s | LP/solve | certified |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for inst in load_suite(args.suite):
        p = load_problem(inst.problem_path)
        r = solve(p, "highs", time_limit=args.time_limit, certify=False)
        t = time.perf_counter()
        bound = strengthened_safe_lp_bound(p, deadline=Deadline.after(args.time_limit))
        lp_s = time.perf_counter() - t
        optimal = r.status is Status.OPTIMAL and p.integral_objective
        certified = optimal and bound is not None and bound > r.objective - 1
        rows.append((optimal, certified, lp_s, r.times.total, r.proof))
        shown = "-" if bound is None else f"{bound:.4f}"
        print(f"| {inst.name} | {r.status.name} ({r.proof}) | {r.objective} | {r.times.total:.2f} | "
              f"{shown} | {lp_s:.3f} | {lp_s / r.times.total:.2f} | {'yes' if certified else 'no'} |",
              flush=True)
    optimal = [row for row in rows if row[0]]
    solver = [row for row in optimal if row[4] != "exact"]
    ratios = np.array([row[2] / row[3] for row in optimal])
    print(f"\n{len(optimal)} OPTIMAL of {len(rows)}; {sum(r[4] == 'exact' for r in optimal)} already exact "
          f"(by construction); of the {len(solver)} resting on HiGHS, the safe LP bound certifies "
          f"{sum(r[1] for r in solver)}. LP time / solve time over the OPTIMAL: median "
          f"{np.median(ratios):.3f}, max {ratios.max():.3f}; LP seconds median "
          f"{np.median([r[2] for r in optimal]):.3f}, max {max(r[2] for r in optimal):.3f}. "
          f"Load at the end: {os.getloadavg()[0]:.2f} (2 cores).")


if __name__ == "__main__":
    main()
