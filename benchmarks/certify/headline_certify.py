"""``smug-opt solve p.smug --backend highs --certify`` on one instance, timed: HiGHS's solve
and the certification after it, wall and CPU seconds (this process and the safe search's
workers, and the helper computing the search's cuts while HiGHS solves, which end with it;
HiGHS's warm worker is not counted), the load before and after, and the cuts computed ahead
(``--no-cuts-ahead``: none, as before :mod:`smug_opt.safe_search.ahead`).

    python benchmarks/certify/headline_certify.py mnist-first-layer cnn-d0-c1-k100-g0.5 --time-limit 600
"""

from __future__ import annotations

import argparse
import os
import time

from headline_search import cpu_seconds

from smug_opt import load_problem, solve
from smug_opt.bench.suites import load_suite
from smug_opt.safe_search import ahead, verified_cuts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("instance")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--no-cuts-ahead", action="store_true", help="no cuts computed while HiGHS solves")
    args = parser.parse_args()
    if args.no_cuts_ahead:
        ahead.MIN_BINARIES = 1 << 62  # no problem qualifies
    path = next(i.problem_path for i in load_suite(args.suite) if i.name == args.instance)
    problem = load_problem(path)
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), cpu_seconds()
    r = solve(problem, "highs", time_limit=args.time_limit, certify=True)
    print(f"{args.instance}: {r.status.name} {r.objective} proof {r.proof}; whole call "
          f"{time.perf_counter() - start:.1f} s, HiGHS {r.times.solve:.1f} s, certification "
          f"{r.times.certify:.1f} s wall, {cpu_seconds() - cpu:.1f} CPU s (this process and the "
          f"search's workers); load {load:.1f} -> {os.getloadavg()[0]:.1f}\n{r.message}")
    for rounds, cuts, early in verified_cuts._known.values():
        if early:
            print(f"cuts computed ahead: {len(cuts)} after {rounds} rounds")


if __name__ == "__main__":
    main()
