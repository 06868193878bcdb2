"""How far from pruning the safe search's lowest open bound is after ``certify``'s
``SEARCH_LPS`` LPs, on the claims whose search needs more: the data behind
:data:`smug_opt.certify.CLOSE_GAP`.

For each ``suite:instance``: HiGHS solves it (uncertified, isolated worker); the
strengthened safe LP bound (the root's); then the safe search from HiGHS's solution with
``Settings(max_lps=SEARCH_LPS)``: whether it closed, its lowest open bound, and the gap to
what prunes (``v − 1``).

    python benchmarks/certify/close_gap.py mnist-first-layer:cnn-d0-c1-k100-g0.5 ...
"""

from __future__ import annotations

import argparse
import os
import time

from smug_opt import load_problem, solve, verify
from smug_opt.bench.suites import load_suite
from smug_opt.certify import SEARCH_LPS
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import strengthened_safe_lp_bound
from smug_opt.safe_search import Settings
from smug_opt.safe_search.prove import prove_optimum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", nargs="+", help="suite:instance")
    parser.add_argument("--solve-time", type=float, default=120.0)
    args = parser.parse_args()
    print("| instance | optimum | root bound | closed | lowest open bound | gap to v - 1 | s | load |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for spec in args.instances:
        suite, name = spec.split(":")
        p = load_problem(next(i.problem_path for i in load_suite(suite) if i.name == name))
        r = solve(p, "highs", time_limit=args.solve_time, certify=False)
        root = strengthened_safe_lp_bound(p, deadline=Deadline.after(30))
        start = time.perf_counter()
        proof = prove_optimum(p, verify(p, r.x), Deadline.after(120), Settings(max_lps=SEARCH_LPS))
        gap = "-" if proof.bound is None else f"{r.objective - 1 - proof.bound:.2f}"
        bound = "-" if proof.bound is None else f"{proof.bound:.2f}"
        print(f"| {name} | {r.objective:g} | {root} | {'yes' if proof.proven else 'no'} | {bound} | {gap} | "
              f"{time.perf_counter() - start:.1f} | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
