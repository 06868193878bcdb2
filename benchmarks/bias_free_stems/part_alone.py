"""One backend alone on an instance's largest strengthened part, its own log on, each log
line stamped with the seconds since start: how each solver's bound grows over time.

    python benchmarks/bias_free_stems/part_alone.py keras-DenseNet121-china z3 60 \
        '{"maxres.max_core_size": 1000, "core.minimize": true}' > z3.log

Level 0 of the backend (z3: pb rows written outward, a relaxation), no race, no search; the
last lines are the result (status, objective, bound, exact verification against the part)
and the CPU seconds and peak memory of the solving process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time


def _solve(name: str, backend: str, seconds: float, extras: dict) -> None:
    import numpy as np

    from smug_opt.backend import SolveOptions
    from smug_opt.bench.suites import load_suite
    from smug_opt.problem_file import load_problem
    from smug_opt.registry import backend_class
    from smug_opt.strengthen import strengthen
    from smug_opt.verification import verify

    instance = next(i for i in load_suite("bias-free-stems") if i.name == name)
    part = max(strengthen(load_problem(instance.problem_path)).parts, key=lambda p: p.columns.size).problem
    solver = backend_class(backend)()
    options = SolveOptions(time_limit=seconds, verbose=True, extras=extras)
    model = solver.lower(part, options, 0)
    print(f"PART {part.num_vars} cells, {part.num_rows} rows; lowered", flush=True)
    raw = solver.optimize(model, part, options,
                          lambda x, objective: print(f"INCUMBENT {objective}", flush=True))
    ok = None if raw.x is None else verify(part, np.round(raw.x)).ok
    print(f"RESULT {raw.status.name} objective {raw.objective} bound {raw.bound} verified {ok}", flush=True)


def main() -> None:
    if sys.argv[1] == "--child":
        _solve(sys.argv[2], sys.argv[3], float(sys.argv[4]), json.loads(sys.argv[5]))
        return
    extras = sys.argv[4] if len(sys.argv) > 4 else "{}"
    began = time.time()
    child = subprocess.Popen([sys.executable, __file__, "--child", *sys.argv[1:4], extras],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert child.stdout is not None
    for line in child.stdout:
        print(f"[{time.time() - began:7.2f}] {line}", end="", flush=True)
    child.wait()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"[{time.time() - began:7.2f}] CPU {used.ru_utime + used.ru_stime:.1f} s, "
          f"peak {used.ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
