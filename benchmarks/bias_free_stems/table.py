"""The bias-free stems ablation table from the run folders ``run.sh`` writes.

usage: python table.py results/on results/off

One line per instance and setting (the folder's name): backend, status, objective, proven
bound, gap (objective − bound) / objective, seconds; the strengthening's integer rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from smug_opt.bench.records import RESULTS_FILE, read_records


def _number(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table(roots: list[Path]) -> str:
    runs = {root.name: {r.instance: r for r in read_records(root / RESULTS_FILE)} for root in roots}
    instances = sorted({name for records in runs.values() for name in records})
    lines = ["| instance | setting | backend | status | objective | bound | gap | seconds | integer rows |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in instances:
        for setting, records in runs.items():
            r = records.get(name)
            if r is None:
                continue
            gap = "–" if r.gap is None else f"{100 * r.gap:.1f} %"
            rows = (r.strengthening or {}).get("integer_rows", 0)
            lines.append(f"| {name} | {setting} | {r.backend} | {r.status.name} | {_number(r.objective)} "
                         f"| {_number(r.bound)} | {gap} | {r.seconds:.1f} | {rows} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(table([Path(a) for a in sys.argv[1:]]))
