"""The safe search on one hard instance, variant by variant: whether each closes, its work,
wall and CPU seconds, and the lowest open bound it leaves.

HiGHS solves the instance (isolated worker, uncertified); then, for each variant of the
search's settings, certify's search path (:func:`smug_opt.safe_search.prove.prove_optimum`
from HiGHS's solution, the problem strengthened afresh) runs for at most ``--seconds`` and
the table gives whether it closed, its nodes and LPs, the lowest safe bound left open (an
integral objective ``v`` is proven once that exceeds ``v − 1``), wall and CPU seconds (the
workers' included) and the machine's load (wall time on a shared machine follows the load;
nodes and CPU seconds do not).

    python benchmarks/certify/headline_search.py mnist-first-layer cnn-d0-c1-k100-g0.5 --seconds 60
"""

from __future__ import annotations

import argparse
import os
import time

from smug_opt import load_problem, solve, verify
from smug_opt.bench.suites import load_suite
from smug_opt.deadline import Deadline
from smug_opt.safe_search import Settings
from smug_opt.safe_search.prove import prove_optimum

VARIANTS = {
    "cover cuts only": Settings(highs_cuts_after=-1),
    "default (HiGHS cuts after 1,000 nodes)": Settings(),
    "HiGHS cuts at the root": Settings(highs_cuts_after=0),
    "HiGHS cuts at the root, propagation": Settings(highs_cuts_after=0, propagation=True),
    "HiGHS cuts at the root, reliability 4": Settings(highs_cuts_after=0, reliability=4),
    "HiGHS cuts at the root, cover cuts at every node": Settings(highs_cuts_after=0, node_cut_rounds=1),
    "HiGHS cuts at the root, 2 workers": Settings(highs_cuts_after=0, workers=2),
    "HiGHS cuts at the root, 2 workers, depth first":
        Settings(highs_cuts_after=0, workers=2, depth_first=True),
    "HiGHS cuts at the root, depth first": Settings(highs_cuts_after=0, depth_first=True),
    "HiGHS cuts at the root (5 rounds), depth first":
        Settings(highs_cuts_after=0, highs_cut_rounds=5, depth_first=True),
    "HiGHS cuts at the root (5 rounds), 2 workers, depth first":
        Settings(highs_cuts_after=0, highs_cut_rounds=5, workers=2, depth_first=True),
    "HiGHS cuts at the root (10 rounds), 2 workers, depth first":
        Settings(highs_cuts_after=0, highs_cut_rounds=10, workers=2, depth_first=True),
}


def cpu_seconds() -> float:
    """This process's CPU seconds and those of its children that have ended (the workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("instance")
    parser.add_argument("--seconds", type=float, default=60.0, help="each variant's search")
    parser.add_argument("--solve-time", type=float, default=120.0)
    parser.add_argument("--variants", nargs="*", choices=sorted(VARIANTS), default=list(VARIANTS),
                        help="the variants to run (default: all)")
    args = parser.parse_args()
    path = next(i.problem_path for i in load_suite(args.suite) if i.name == args.instance)
    r = solve(load_problem(path), "highs", time_limit=args.solve_time, certify=False)
    print(f"HiGHS: {r.status.name}, objective {r.objective}, {r.times.total:.1f} s "
          f"(load {os.getloadavg()[0]:.1f})\n")
    print("| variant | closed | nodes | LPs | lowest open bound | s | CPU s | load |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in args.variants:
        problem = load_problem(path)
        start, cpu = time.perf_counter(), cpu_seconds()
        proof = prove_optimum(problem, verify(problem, r.x), Deadline.after(args.seconds), VARIANTS[name])
        bound = "-" if proof.bound is None else f"{proof.bound:.3f}"
        print(f"| {name} | {'yes' if proof.proven else 'no'} | {proof.nodes} | {proof.lps} | {bound} | "
              f"{time.perf_counter() - start:.1f} | {cpu_seconds() - cpu:.1f} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
