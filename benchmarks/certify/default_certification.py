"""``solve``'s default certification against no certification, side by side, per instance.

For each instance of a bench suite: HiGHS (isolated worker) with the default
(``certify=None``: :func:`smug_opt.certify.certify_within_budget` where
:func:`smug_opt.certify_rule.certified_by_default` says so) and with ``certify=False``,
one right after the other. Prints a markdown table: the proof each gives, the
certification's own seconds and the whole solve call's, and a summary (claims certified by
default; the certification's share of the uncertified solve, median and max).

    python benchmarks/certify/default_certification.py mnist-first-layer --time-limit 10 > table.md
"""

from __future__ import annotations

import argparse
import os
import re
import time

import numpy as np

from smug_opt import Status, load_problem, solve
from smug_opt.bench.suites import load_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--match", default="", help="only instances whose name matches this regex")
    args = parser.parse_args()
    print("| instance | status | default proof | certify s | default solve s | --no-certify solve s |")
    print("|---|---|---|---:|---:|---:|")
    claims, certified, shares = 0, 0, []
    for inst in load_suite(args.suite):
        if args.match and not re.search(args.match, inst.name):
            continue
        p = load_problem(inst.problem_path)
        default = solve(p, "highs", time_limit=args.time_limit)
        plain = solve(p, "highs", time_limit=args.time_limit, certify=False)
        claim = plain.status in (Status.OPTIMAL, Status.INFEASIBLE) and plain.proof != "exact"
        if claim:
            claims += 1
            certified += default.proof == "exact"
            shares.append(default.times.certify / plain.times.total)
        print(f"| {inst.name} | {default.status.name} | {default.proof} | {default.times.certify:.3f} | "
              f"{default.times.total:.2f} | {plain.times.total:.2f} |", flush=True)
    share = np.array(shares) if shares else np.zeros(1)
    print(f"\n{claims} OPTIMAL/INFEASIBLE claims resting on HiGHS without certification; "
          f"{certified} certified exact by the default ({100 * certified / max(claims, 1):.0f} %). "
          f"Certification seconds / uncertified solve seconds: median {np.median(share):.2f}, "
          f"max {share.max():.2f}. Load at the end: {os.getloadavg()[0]:.2f} (2 cores), "
          f"{time.strftime('%Y-%m-%d %H:%M')}.")


if __name__ == "__main__":
    main()
