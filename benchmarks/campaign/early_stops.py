"""Early stops: one backend at limits of 0.5-20 ms on the campaign's instances, in this
process (``isolate=False``: the limit reaches the solver as given), judged as the campaign
judges (``judge.py``): a solver stopped before it has set its bounds up must claim nothing
(no bound above the exact optimum, no INFEASIBLE on a feasible instance, no solution on an
infeasible one, no OPTIMAL above the optimum).

    python benchmarks/campaign/early_stops.py --backend cpsat --start 40000 --count 150

Run one backend per process (two CBC builds in one process clash). Exit status 1 when
anything is wrong; each wrong answer is printed.
"""

from __future__ import annotations

import argparse
import collections
import sys

from campaign import instance  # this folder is on sys.path when the script runs
from judge import judge

import smug_opt

LIMITS = (0.0005, 0.001, 0.002, 0.004, 0.02)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", required=True)
    p.add_argument("--start", type=int, default=40_000)
    p.add_argument("--count", type=int, default=150)
    p.add_argument("--certify", action="store_true", help="certify=True on every solve")
    args = p.parse_args()
    statuses: collections.Counter[tuple[str, bool]] = collections.Counter()
    wrong = []
    for i in range(args.start, args.start + args.count):
        try:
            family, problem, best = instance(i)
        except ValueError:  # beyond the brute force (two continuous variables, say)
            continue
        for limit in LIMITS:
            r = smug_opt.solve(problem, args.backend, time_limit=limit, isolate=False, certify=args.certify)
            statuses[(r.status.name, r.bound is not None)] += 1
            verdict = judge(problem, best, r)
            if verdict.kind == "wrong":
                wrong.append((i, family, limit, r.status.name, r.proof, verdict.why))
    solves = sum(statuses.values())
    print(f"{args.backend}: {solves} solves on instances {args.start}-{args.start + args.count - 1}, "
          f"{len(wrong)} wrong; (status, bound given): {dict(sorted(statuses.items()))}")
    for line in wrong:
        print("WRONG", *line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
