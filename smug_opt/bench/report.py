"""Benchmark reports: a markdown page, a JSON summary and PNG figures for one run directory.

:func:`write_report` reads ``run.json`` and ``results.jsonl``, summarises every suite with
:mod:`smug_opt.bench.summary` (one table column per metric declared there) and writes
``report.md``, ``summary.json`` and, per suite, ``profile-<suite>.png`` (performance
profile) and ``time-vs-size-<suite>.png`` (time against ``k`` when the instances have
several, else against the number of variables).
Given an earlier run, it adds per-backend deltas on the instances both runs share.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

from smug_opt.bench import metrics
from smug_opt.bench.harness import RUN_FILE
from smug_opt.bench.metrics import InstanceResult, JobOutcome, instance_results
from smug_opt.bench.records import RESULTS_FILE, RunRecord, read_records
from smug_opt.bench.summary import (
    BACKEND_METRICS,
    BackendSummary,
    SuiteSummary,
    format_number,
    summarize_suites,
)

__all__ = ["Delta", "ReportFiles", "Run", "compare_runs", "load_run", "write_report"]

_MAX_LISTED = 20


@dataclass(frozen=True)
class Run:
    """A run directory's ``run.json`` contents and its records."""

    directory: Path
    info: dict[str, Any]
    records: list[RunRecord]


def load_run(directory: str | Path) -> Run:
    """Read the run in ``directory``; errors say what is missing."""
    root = Path(directory)
    if not (root / RESULTS_FILE).is_file():
        raise FileNotFoundError(f"{root} is not a benchmark run directory (no {RESULTS_FILE})")
    info = json.loads((root / RUN_FILE).read_text()) if (root / RUN_FILE).is_file() else {}
    records = read_records(root / RESULTS_FILE)
    if not records:
        raise ValueError(f"{root / RESULTS_FILE} holds no results yet")
    return Run(root, info, records)


@dataclass(frozen=True)
class Delta:
    """One backend on one suite, now against before, over the instances both runs have."""

    suite: str
    backend: str
    common_instances: int
    solved_before: int
    solved_now: int
    sgm_before: float
    sgm_now: float

    @property
    def solved_delta(self) -> int:
        return self.solved_now - self.solved_before

    @property
    def sgm_ratio(self) -> float:
        """SGM now / SGM before: below 1 is faster."""
        return self.sgm_now / self.sgm_before if self.sgm_before > 0 else math.nan


def compare_runs(now: Run, before: Run) -> list[Delta]:
    """Per (suite, backend) present in both runs: solved counts and SGMs on shared instances."""
    old = {(x.suite, x.instance, x.backend): x for x in instance_results(before.records)}
    new = {(x.suite, x.instance, x.backend): x for x in instance_results(now.records)}
    pairs = dict.fromkeys((s, b) for s, _, b in new if any(k[0] == s and k[2] == b for k in old))
    deltas = []
    for suite, backend in pairs:
        keys = [k for k in new if k[0] == suite and k[2] == backend and k in old]
        deltas.append(Delta(
            suite, backend, len(keys),
            sum(old[k].outcome is JobOutcome.SOLVED for k in keys),
            sum(new[k].outcome is JobOutcome.SOLVED for k in keys),
            metrics.shifted_geometric_mean(old[k].seconds for k in keys),
            metrics.shifted_geometric_mean(new[k].seconds for k in keys),
        ))
    return deltas


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    markdown: Path
    summary: Path
    figures: tuple[Path, ...]


def write_report(run_dir: str | Path, *, compare_with: str | Path | None = None,
                 out_dir: str | Path | None = None) -> ReportFiles:
    """Write the report of ``run_dir`` into ``out_dir`` (default ``run_dir/report``)."""
    run = load_run(run_dir)
    before = load_run(compare_with) if compare_with is not None else None
    out = Path(out_dir) if out_dir is not None else run.directory / "report"
    out.mkdir(parents=True, exist_ok=True)
    suites = summarize_suites(run.records)
    deltas = compare_runs(run, before) if before is not None else None
    figures: list[Path] = []
    for summary in suites:
        figures.append(_plot_profile(summary, out / f"profile-{summary.suite}.png"))
        figures.append(_plot_time_vs_size(summary, out / f"time-vs-size-{summary.suite}.png"))
    markdown = out / "report.md"
    markdown.write_text(_markdown(run, suites, deltas, before))
    summary_path = out / "summary.json"
    summary_path.write_text(json.dumps(_jsonable({
        "run": str(run.directory), "info": run.info, "suites": suites,
        "compare": None if before is None else {"before": str(before.directory), "deltas": [
            {**asdict(d), "solved_delta": d.solved_delta, "sgm_ratio": d.sgm_ratio} for d in deltas or []]},
    }), indent=1, allow_nan=False))
    return ReportFiles(markdown, summary_path, tuple(figures))


# ------------------------------------------------------------------- markdown
def _num(value: float | None, digits: int = 3) -> str:
    return format_number(value, digits)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _markdown(run: Run, suites: list[SuiteSummary], deltas: list[Delta] | None,
              before: Run | None) -> str:
    config = run.info.get("config", {})
    machine = run.info.get("machine", {})
    lines = [f"# Benchmark report: `{run.directory}`", ""]
    lines += _table(["setting", "value"], [
        ["backends", ", ".join(config.get("backends", []))],
        ["time limit", f"{config.get('time_limit', '?')} s (+ {config.get('grace', '?')} s grace "
                       "before the kill)"],
        ["threads / seed / repeats",
         f"{config.get('threads', '?')} / {config.get('seed', '?')} / {config.get('repeats', '?')}"],
        ["memory limit", f"{config.get('memory_limit_mb') or 'none'}" + (
            " MB" if config.get("memory_limit_mb") else "")],
        ["executor", str(run.info.get("executor", "?"))],
        ["machine", f"{machine.get('cpu_model', '?')}, {machine.get('cpu_count', '?')} CPUs, "
                    f"{machine.get('memory_gb', '?')} GB, Python {machine.get('python', '?')}, "
                    f"{machine.get('platform', '?')}"],
        ["solvers", ", ".join(sorted({f"{r.backend}: {r.solver}" for r in run.records if r.solver}))],
        ["jobs recorded", str(len(run.records))],
    ])
    for summary in suites:
        lines += ["", *_suite_section(summary)]
    if deltas is not None and before is not None:
        lines += ["", f"## Compared with `{before.directory}`", ""]
        old = before.info.get("config", {})
        changed = [k for k in ("time_limit", "threads", "seed") if old.get(k) != config.get(k)]
        if changed:
            what = ", ".join(f"{k}: {old.get(k)} → {config.get(k)}" for k in changed)
            lines += [f"Settings differ ({what}); the comparison is not like for like.", ""]
        lines += _table(
            ["suite", "backend", "shared instances", "solved before", "solved now", "Δ solved",
             "SGM before [s]", "SGM now [s]", "SGM ratio (now / before)"],
            [[d.suite, d.backend, str(d.common_instances), str(d.solved_before), str(d.solved_now),
              f"{d.solved_delta:+d}", _num(d.sgm_before), _num(d.sgm_now), _num(d.sgm_ratio)]
             for d in deltas] or [["–"] * 9])
    doc = inspect.getdoc(metrics) or ""
    lines += ["", "## How the metrics are defined", "", doc.split("\n", 1)[1].strip()]
    lines += [f"- **{m.header or m.name}.** {m.definition}" for m in BACKEND_METRICS if m.definition]
    lines.append("")
    return "\n".join(lines)


def _suite_section(s: SuiteSummary) -> list[str]:
    lines = [f"## Suite `{s.suite}` ({len(s.instances)} instances)", ""]
    columns = [m for m in BACKEND_METRICS if m.header is not None]
    lines += _table(["backend", *(str(m.header) for m in columns)],
                    [[b.backend, *(m.text(b.values) for m in columns)] for b in s.backends])
    lines += ["", f"![performance profile](profile-{s.suite}.png) "
                  f"![time vs size](time-vs-size-{s.suite}.png)"]
    if s.wrong:
        lines += ["", "**Wrong answers**", ""]
        lines += [f"- `{inst}` {backend} (repeat {rep}): {reason}" for inst, backend, rep, reason in s.wrong]
    if s.errors:
        shown = s.errors[:_MAX_LISTED]
        lines += ["", f"**Errors** ({len(s.errors)})", ""]
        lines += [f"- `{inst}` {backend} (repeat {rep}): {_one_line(message)}"
                  for inst, backend, rep, message in shown]
        if len(s.errors) > len(shown):
            lines.append(f"- … and {len(s.errors) - len(shown)} more (see summary.json)")
    lines += ["", "<details><summary>Per instance</summary>", "", *_instance_table(s), "", "</details>"]
    return lines


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cell(x: InstanceResult | None) -> str:
    if x is None:
        return "not run"
    if x.outcome is JobOutcome.SOLVED:
        return f"{_num(x.seconds)} s" + (f" ({_num(x.objective, 6)})" if x.objective is not None else "")
    if x.outcome is JobOutcome.FEASIBLE:
        return f"limit ({_num(x.objective, 6)})"
    return {JobOutcome.TIMEOUT: "limit", JobOutcome.WRONG: "**WRONG**"}.get(
        x.outcome, "killed" if x.killed else "error")


def _instance_table(s: SuiteSummary) -> list[str]:
    backends = [b.backend for b in s.backends]
    by_pair = {(x.instance, x.backend): x for x in s.results}
    features = {x.instance: x.features for x in s.results}
    return _table(
        ["instance", "vars", "rows", "k", "best known", *backends],
        [[f"`{i}`", str(features[i].get("vars", "")), str(features[i].get("rows", "")),
          str(features[i].get("k", "")), _num(s.best_known.get(i), 6),
          *[_cell(by_pair.get((i, b))) for b in backends]] for i in s.instances])


# -------------------------------------------------------------------- figures
def _figure() -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _plot_profile(s: SuiteSummary, path: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    taus = list(s.profile.taus)
    right = max(taus[-1] * 1.5, 2.0)
    for backend in s.profile.backends:
        ax.step([*taus, right], [*s.profile.rho[backend], s.profile.rho[backend][-1]], where="post",
                label=backend)
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, right)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("τ (time / fastest backend's time)")
    ax.set_ylabel("ρ(τ): share of instances")
    ax.set_title(f"Performance profile: {s.suite} ({len(s.instances)} instances)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.savefig(path, dpi=120)
    return path


def _size_feature(results: tuple[InstanceResult, ...]) -> str:
    ks = {x.features.get("k") for x in results}
    if None not in ks and len(ks) > 1 and all(isinstance(k, (int, float)) for k in ks):
        return "k"
    return "vars"


def _plot_time_vs_size(s: SuiteSummary, path: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    feature = _size_feature(s.results)
    for backend in (b.backend for b in s.backends):
        mine = [x for x in s.results if x.backend == backend and feature in x.features]
        done = [x for x in mine if x.outcome is JobOutcome.SOLVED]
        rest = [x for x in mine if x.outcome is not JobOutcome.SOLVED]
        line = ax.scatter([x.features[feature] for x in done], [max(x.seconds, 1e-3) for x in done],
                          label=backend, alpha=0.8)
        ax.scatter([x.features[feature] for x in rest], [max(x.seconds, 1e-3) for x in rest],
                   facecolors="none", edgecolors=line.get_facecolor(), marker="o", alpha=0.8)
    ax.set_yscale("log")
    sizes = [x.features[feature] for x in s.results if feature in x.features]
    if sizes and min(sizes) > 0 and max(sizes) / min(sizes) > 10:
        ax.set_xscale("log")
    ax.set_xlabel({"k": "k (rows: selected neurons)", "vars": "variables"}[feature])
    ax.set_ylabel("time [s] (hollow: not solved, at the limit)")
    ax.set_title(f"Time vs size: {s.suite}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best")
    fig.savefig(path, dpi=120)
    return path


# ----------------------------------------------------------------------- json
def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, BackendSummary):
        return _jsonable(value.to_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
