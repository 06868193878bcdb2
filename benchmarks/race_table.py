"""Per-backend, ``auto`` and virtual-best table of one or more bench runs (merged).

    python benchmarks/race_table.py RUN_DIR [RUN_DIR ...]

Solved and SGM as ``smug_opt.bench.metrics`` defines them (solved = proven OPTIMAL or
INFEASIBLE and not wrong; SGM with s = 10 s, unsolved runs at the limit); the virtual
best takes, per instance, the fastest single backend (``auto`` excluded). Also lists
instances a single backend proved and ``auto`` did not.
"""

from __future__ import annotations

import sys
from pathlib import Path

from smug_opt.bench.metrics import JobOutcome, results_by_instance, shifted_geometric_mean
from smug_opt.bench.records import read_records


def main(runs: list[str]) -> None:
    records = [r for run in runs for r in read_records(Path(run) / "results.jsonl")]
    by_instance = results_by_instance(records)
    backends = sorted({r.backend for r in records} - {"auto"})
    instances = sorted(k for k, v in by_instance.items() if all(b in v for b in [*backends, "auto"]))
    best = [min((by_instance[i][b] for b in backends), key=lambda r: (r.outcome is not JobOutcome.SOLVED,
                                                                         r.seconds))
            for i in instances]
    best_sgm = shifted_geometric_mean(r.seconds for r in best)
    print(f"| backend | solved ({len(instances)}) | SGM (s) | × virtual best |")
    print("|---|---|---|---|")
    for b in [*backends, "auto"]:
        results = [by_instance[i][b] for i in instances]
        sgm = shifted_geometric_mean(r.seconds for r in results)
        solved = sum(r.outcome is JobOutcome.SOLVED for r in results)
        print(f"| {b} | {solved} | {sgm:.3f} | {sgm / best_sgm:.2f} |")
    print(f"| virtual best | {sum(r.outcome is JobOutcome.SOLVED for r in best)} | {best_sgm:.3f} | 1.00 |")
    missed = [i[1] for i, r in zip(instances, best, strict=True)
              if r.outcome is JobOutcome.SOLVED and by_instance[i]["auto"].outcome is not JobOutcome.SOLVED]
    print(f"\ninstances a single backend proved and auto did not: {missed or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
