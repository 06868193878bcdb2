"""Certification by the safe LP bound and the safe search against the uncertified solve, side by side.

For each instance of a bench suite: HiGHS (isolated worker, uncertified) within the time
limit; for an OPTIMAL or INFEASIBLE claim resting on HiGHS, certify's path without z3 (the
strengthened safe LP bound, then :func:`smug_opt.safe_search.prove.prove_optimum` from
HiGHS's solution) within ``--certify-time``, with its default settings, and (where the search
ran) with cover cuts, reduced-cost fixing or warm starts switched off, node propagation
switched on, or HiGHS's verified root cuts taken at the root instead of after 1,000 nodes.

    python benchmarks/certify/safe_search.py mnist-first-layer --time-limit 10 --certify-time 10 > table.md
"""

from __future__ import annotations

import argparse
import os
import re
import time

import numpy as np

from smug_opt import Status, load_problem, solve, verify
from smug_opt.bench.suites import load_suite
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import strengthened_safe_lp_bound
from smug_opt.safe_search import Settings
from smug_opt.safe_search.prove import applies, prove_optimum

ABLATION = {"no cover cuts": Settings(cut_rounds=0), "no rc-fixing": Settings(reduced_cost_fixing=False),
            "cold LPs": Settings(warm_start=False), "propagation": Settings(propagation=True),
            "HiGHS cuts at root": Settings(highs_cuts_after=0)}


def certify_time(problem, incumbent, seconds: float, settings: Settings) -> tuple[str, float, str]:
    """(how it was certified or 'no', seconds, search summary)."""
    start = time.perf_counter()
    if incumbent is not None and problem.integral_objective:
        bound = strengthened_safe_lp_bound(problem, deadline=Deadline.after(seconds))
        if bound is not None and bound > incumbent.objective - 1:
            return "LP bound", time.perf_counter() - start, ""
    if not applies(problem):
        return "no (ReLUs)", time.perf_counter() - start, ""
    left = seconds - (time.perf_counter() - start)
    proof = prove_optimum(problem, incumbent, Deadline.after(left), settings)
    spent = time.perf_counter() - start
    ok = proof.proven and (proof.best is None if incumbent is None
                           else proof.best is not None and proof.best.objective == incumbent.objective)
    return ("search" if ok else "no"), spent, f"{proof.nodes} nodes, {proof.fixed_by_reduced_costs} fixed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--certify-time", type=float, default=10.0)
    parser.add_argument("--match", default="", help="only instances whose name matches this regex")
    args = parser.parse_args()
    print("| instance | HiGHS | objective | solve s | certified by | cert s | cert/solve | search | "
          + " | ".join(f"{name} s" for name in ABLATION) + " |")
    print("|---|---|---:|---:|---|---:|---:|---|" + "---:|" * len(ABLATION))
    rows = []
    for inst in load_suite(args.suite):
        if args.match and not re.search(args.match, inst.name):
            continue
        p = load_problem(inst.problem_path)
        r = solve(p, "highs", time_limit=args.time_limit, certify=False)
        claim = r.status in (Status.OPTIMAL, Status.INFEASIBLE)
        if not claim or r.proof == "exact":
            print(f"| {inst.name} | {r.status.name} ({r.proof}) | {r.objective} | {r.times.total:.2f} | "
                  f"- | - | - | - |" + " - |" * len(ABLATION), flush=True)
            rows.append((claim, True, None, r.times.total))
            continue
        incumbent = None if r.x is None else verify(p, r.x)
        how, spent, summary = certify_time(p, incumbent, args.certify_time, Settings())
        ablated = []
        for settings in ABLATION.values():
            if how == "search":
                fresh = load_problem(inst.problem_path)  # strengthened afresh, as in the default's column
                a_how, a_spent, _ = certify_time(fresh, verify(fresh, r.x), args.certify_time, settings)
                ablated.append(f"{a_spent:.2f}" + ("" if a_how == "search" else " (no)"))
            else:
                ablated.append("-")
        rows.append((claim, how in ("LP bound", "search"), spent / r.times.total, r.times.total))
        cells = [inst.name, r.status.name, str(r.objective), f"{r.times.total:.2f}", how, f"{spent:.2f}",
                 f"{spent / r.times.total:.2f}", summary, *ablated]
        print("| " + " | ".join(cells) + " |", flush=True)
    claims = [row for row in rows if row[0]]
    certified = sum(row[1] for row in claims)
    ratios = np.array([row[2] for row in claims if row[2] is not None])
    summary = (f"\n{len(claims)} OPTIMAL/INFEASIBLE claims of {len(rows)} instances; {certified} certified "
               f"exact ({100 * certified / max(len(claims), 1):.0f} %, exact-by-construction included).")
    if ratios.size:
        summary += (f" Certification time / solve time over the {ratios.size} claims resting on HiGHS: "
                    f"median {np.median(ratios):.2f}, max {ratios.max():.2f}.")
    print(summary + f" Load at the end: {os.getloadavg()[0]:.2f} (2 cores).")


if __name__ == "__main__":
    main()
