"""Tables of the strengthening ablation from the run folders that ``run.sh`` writes.

usage: python table.py ../results/ablation-nobias-60s [more run roots...]

A run root holds one folder per setting (``off``, ``all``, ``no-cuts``, ...), each a
``smug-opt bench run`` output. For every root it prints (markdown) per backend and setting:
instances proven optimal, the shifted geometric mean of time (s = 10 s, unproven runs at
the limit), and the mean final gap (an instance without a bound counts as gap 1); then the
virtual best (per instance the best backend of that setting: proven fastest, else the
smallest gap) and per instance the best objective/bound found.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from smug_opt.backend import Status
from smug_opt.bench.metrics import shifted_geometric_mean
from smug_opt.bench.records import RESULTS_FILE, RunRecord, read_records

ORDER = ("off", "all", "no-fixings", "no-cuts", "no-tables", "no-implied", "no-components")
BACKENDS = ("highs", "cpsat", "mip-cbc", "pulp-cbc", "z3")


def _gap(r: RunRecord) -> float:
    return 1.0 if r.gap is None else r.gap


def _time(r: RunRecord) -> float:
    return r.seconds if r.status is Status.OPTIMAL else r.time_limit


def _key(r: RunRecord) -> tuple[int, float, float]:
    """Better runs sort first: proven, then faster, then smaller gap."""
    return (r.status is not Status.OPTIMAL, _time(r), _gap(r))


def _cell(records: list[RunRecord]) -> str:
    solved = sum(r.status is Status.OPTIMAL for r in records)
    sgm = shifted_geometric_mean(_time(r) for r in records)
    gap = sum(_gap(r) for r in records) / len(records)
    wrong = sum(r.reverified is False for r in records)
    return f"{solved}/{len(records)}, {sgm:.1f} s, gap {100 * gap:.1f}%" + (
        f" **{wrong} wrong**" if wrong else "")


def table(root: Path) -> str:
    runs = {d.name: read_records(d / RESULTS_FILE) for d in sorted(root.iterdir())
            if (d / RESULTS_FILE).is_file()}
    settings = [s for s in ORDER if s in runs] + sorted(set(runs) - set(ORDER))
    by = defaultdict(list)
    for setting, records in runs.items():
        for r in records:
            by[setting, r.backend].append(r)
    backends = [b for b in BACKENDS if any((s, b) in by for s in settings)]
    lines = [f"### {root.name}", "",
             "proven / instances, shifted geometric mean of time, mean final gap", "",
             "| backend | " + " | ".join(settings) + " |",
             "|---" * (len(settings) + 1) + "|"]
    for b in backends:
        cells = [_cell(by[s, b]) if (s, b) in by else "–" for s in settings]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    best_cells = []
    for s in settings:
        per_instance = defaultdict(list)
        for r in runs[s]:
            per_instance[r.instance].append(r)
        best_cells.append(_cell([min(rs, key=_key) for rs in per_instance.values()]))
    lines.append("| **virtual best** | " + " | ".join(best_cells) + " |")
    lines += ["", "per instance: best objective / best bound over every backend (gap)", "",
              "| instance | " + " | ".join(settings) + " |", "|---" * (len(settings) + 1) + "|"]
    instances = sorted({r.instance for rs in runs.values() for r in rs})
    for name in instances:
        cells = []
        for s in settings:
            rs = [r for r in runs[s] if r.instance == name]
            objs = [r.objective for r in rs if r.objective is not None]
            bounds = [r.bound for r in rs if r.bound is not None]
            if not rs:
                cells.append("–")
                continue
            obj, bound = (min(objs) if objs else None), (max(bounds) if bounds else None)
            gap = "" if obj is None or bound is None else f" ({100 * (obj - bound) / max(obj, 1):.1f}%)"
            cells.append(f"{obj if obj is None else f'{obj:g}'} / "
                         f"{bound if bound is None else f'{bound:g}'}{gap}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(roots: list[str]) -> None:
    for root in roots:
        text = table(Path(root))
        (Path(root) / "table.md").write_text(text)
        print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
