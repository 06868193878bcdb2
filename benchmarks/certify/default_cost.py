"""The default certification's CPU per call, and of the first call in a process, on every
claim the default rule takes (no ReLUs, 1-100 rows, at most 2,500 nonzeros) on the text,
synthetic and MNIST first-layer suites: each claim's
:func:`smug_opt.certify.certify_within_budget` timed three times after its HiGHS solve, the
best kept. Run it twice to compare two versions of the code side by side:

    PYTHONPATH=/tmp/old python benchmarks/certify/default_cost.py   # the code before (git archive)
    python benchmarks/certify/default_cost.py
"""

from __future__ import annotations

import statistics
import time

import smug_opt
from smug_opt import load_problem, solve
from smug_opt.bench.suites import load_suite
from smug_opt.certify import certify_within_budget
from smug_opt.deadline import Deadline


def main() -> None:
    first = None
    cpu, wall = [], []
    for suite in ("text", "synthetic", "mnist-first-layer"):
        for inst in load_suite(suite, progress=False):
            p = load_problem(inst.problem_path)
            if p.num_relus or not 0 < p.num_rows <= 100 or p.A.nnz > 2500:  # the rule, spelled out:
                continue  # the same claims whichever version's smug_opt.certify_rule is imported
            r = solve(p, "highs", time_limit=10, certify=False)
            if r.status.name not in ("OPTIMAL", "INFEASIBLE") or r.proof == "exact":
                continue
            best_cpu = best_wall = float("inf")
            for _ in range(3):
                c, w = time.process_time(), time.perf_counter()
                certify_within_budget(p, r, Deadline.after(10))
                c, w = time.process_time() - c, time.perf_counter() - w
                first = c if first is None else first
                best_cpu, best_wall = min(best_cpu, c), min(best_wall, w)
            cpu.append(best_cpu)
            wall.append(best_wall)
    print(f"{smug_opt.__file__}: {len(cpu)} claims; first call {first:.3f} s of CPU; per call a median "
          f"{1e3 * statistics.median(cpu):.2f} ms of CPU (max {1e3 * max(cpu):.2f}), "
          f"{1e3 * statistics.median(wall):.2f} ms of wall")


if __name__ == "__main__":
    main()
