"""Profile certification per claim (cProfile on the CPU clock): each matching instance of a
suite solved by HiGHS (``certify=False``), then :func:`smug_opt.certify.certify` on the
result under the profiler; prints the top functions by cumulative time.

    python benchmarks/certify/profile_certify.py SUITE REGEX [TOP]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import sys
import time

from smug_opt import load_problem, solve
from smug_opt.bench.suites import load_suite
from smug_opt.certify import certify, exact_backend
from smug_opt.deadline import Deadline


def ask(problem, choice, deadline, start):
    """Certification's exact questions: an uncertified solve on the exact backend."""
    return solve(problem, choice, time_limit=deadline, certify=False, start=start,
                 extras=dict(exact_backend().exact_extras))


def main() -> None:
    suite, match = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    for inst in load_suite(suite, progress=False):
        if not re.search(match, inst.name):
            continue
        problem = load_problem(inst.problem_path)
        solved = solve(problem, "highs", time_limit=20, certify=False)
        if solved.status.name not in ("OPTIMAL", "INFEASIBLE") or solved.proof == "exact":
            print(f"=== {inst.name}: {solved.status.name} ({solved.proof}): nothing to certify")
            continue
        profile = cProfile.Profile(time.process_time)
        began = time.process_time()
        profile.enable()
        certified = certify(problem, solved, ask=ask, deadline=Deadline.after(60))
        profile.disable()
        print(f"=== {inst.name}: solve {solved.times.total:.3f} s -> {certified.status.name} "
              f"({certified.proof}), certification {time.process_time() - began:.3f} CPU s: "
              f"{certified.message[len(solved.message):][:200]}")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(top)
        print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()
