"""CPU seconds of :func:`smug_opt.safe_lp_bound.strengthened_safe_lp_bound` (strengthening
plus the parts' safe LP bound) and of :func:`smug_opt.strengthen.strengthen` alone, each on
a freshly loaded problem (no reuse), best of N. Run it with each version of the code first
on ``PYTHONPATH`` to compare them side by side:

    python benchmarks/certify/strengthened_bound_cpu.py paper-scale '^(k500-s[01]|k1000-s[01]|k3000-s0)$' 7
"""

from __future__ import annotations

import re
import sys
import time

from smug_opt import load_problem
from smug_opt.bench.suites import load_suite
from smug_opt.deadline import Deadline
from smug_opt.safe_lp_bound import strengthened_safe_lp_bound
from smug_opt.strengthen.presolve import strengthen


def main() -> None:
    suite, match, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for inst in load_suite(suite, progress=False):
        if not re.search(match, inst.name):
            continue
        bound_cpu, strengthen_cpu, bound = [], [], None
        for _ in range(repeats):
            problem = load_problem(inst.problem_path)
            began = time.process_time()
            bound = strengthened_safe_lp_bound(problem, deadline=Deadline.after(30))
            bound_cpu.append(time.process_time() - began)
            problem = load_problem(inst.problem_path)
            began = time.process_time()
            strengthen(problem)
            strengthen_cpu.append(time.process_time() - began)
        print(f"{inst.name} bound {bound!r} bound-CPU {min(bound_cpu):.4f} "
              f"strengthen-CPU {min(strengthen_cpu):.4f}", flush=True)


if __name__ == "__main__":
    main()
