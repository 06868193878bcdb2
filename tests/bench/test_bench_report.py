"""Benchmark reports (markdown, JSON, PNG), run comparison and the ``smug-opt bench`` CLI."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from smug_opt.backend import Status
from smug_opt.bench.generators import random_strict_problem
from smug_opt.bench.records import RESULTS_FILE, RunRecord, append_record
from smug_opt.bench.report import compare_runs, load_run, write_report
from smug_opt.cli import bench as bench_cli
from smug_opt.problem_file import save_problem
from smug_opt.result import Timings

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rec(backend: str, instance: str, status: Status, seconds: float, objective: float | None = None,
        k: int = 10) -> RunRecord:
    return RunRecord(
        suite="toy", instance=instance, backend=backend, repeat=0, status=status, time_limit=10.0,
        threads=1, seed=0, objective=objective, bound=objective if status is Status.OPTIMAL else None,
        times=Timings(total=seconds), wall_seconds=seconds + 0.01, overshoot=seconds + 0.01 - 10.0,
        verified=objective is not None or None, reverified=objective is not None or None,
        incumbents=((seconds / 2, objective + 1),) if objective is not None else (),
        solver=f"{backend} 1.0", features={"vars": 10 * k, "rows": k, "k": k}, peak_memory_mb=50.0,
    )


def write_run(directory, records):
    directory.mkdir(parents=True)
    (directory / "run.json").write_text(json.dumps({"config": {"backends": ["a", "b"], "time_limit": 10.0}}))
    for r in records:
        append_record(directory / RESULTS_FILE, r)
    return directory


NOW = [
    rec("a", "p1", Status.OPTIMAL, 1.0, 3, k=10), rec("b", "p1", Status.OPTIMAL, 2.0, 3, k=10),
    rec("a", "p2", Status.OPTIMAL, 3.0, 5, k=20), rec("b", "p2", Status.FEASIBLE, 10.0, 6, k=20),
    rec("a", "p3", Status.OPTIMAL, 0.5, 1, k=40), rec("b", "p3", Status.ERROR, 15.0, k=40),
]
BEFORE = [
    rec("a", "p1", Status.OPTIMAL, 2.0, 3), rec("a", "p2", Status.NO_SOLUTION, 10.0),
    rec("b", "p1", Status.OPTIMAL, 2.0, 3), rec("b", "p2", Status.OPTIMAL, 4.0, 5),
]


def test_report_writes_markdown_json_and_figures(tmp_path):
    run_dir = write_run(tmp_path / "now", NOW)
    files = write_report(run_dir, compare_with=write_run(tmp_path / "before", BEFORE))
    assert files.markdown == run_dir / "report" / "report.md"
    assert {f.name for f in files.figures} == {"profile-toy.png", "time-vs-size-toy.png"}
    for figure in files.figures:
        assert figure.read_bytes()[:8] == PNG_MAGIC and figure.stat().st_size > 5000

    text = files.markdown.read_text()
    assert "## Suite `toy` (3 instances)" in text
    assert "| a | 3 | 3 | 3 | 0 | 0 (0) | 0 |" in text  # solved, feasible, timeouts, errors, wrong
    assert "| b | 3 | 1 | 2 | 1 | 1 (0) | 0 |" in text
    assert "certified (median s)" in text and "| 0/3 (0 s) | a 1.0 |" in text  # proof not exact
    assert "## How the metrics are defined" in text and "Shifted geometric mean" in text
    assert "## Compared with" in text

    summary = json.loads(files.summary.read_text())
    (suite,) = summary["suites"]
    a, b = suite["backends"]
    assert a["sgm_scaled"] == pytest.approx(1.0) and b["sgm_scaled"] > 1
    assert suite["best_known"] == {"p1": 3.0, "p2": 5.0, "p3": 1.0}
    assert suite["profile"]["rho"]["a"][0] == pytest.approx(1.0)
    deltas = {d["backend"]: d for d in summary["compare"]["deltas"]}
    assert deltas["a"]["solved_delta"] == 1 and deltas["b"]["solved_delta"] == -1


def test_compare_runs_uses_shared_instances_only(tmp_path):
    now = load_run(write_run(tmp_path / "now", NOW))
    before = load_run(write_run(tmp_path / "before", BEFORE))
    deltas = {d.backend: d for d in compare_runs(now, before)}
    a = deltas["a"]
    assert (a.common_instances, a.solved_before, a.solved_now) == (2, 1, 2)
    old_sgm = math.sqrt(12 * 20) - 10  # 2 s and the 10 s limit
    new_sgm = math.sqrt(11 * 13) - 10  # 1 s and 3 s
    assert a.sgm_ratio == pytest.approx(new_sgm / old_sgm)


def test_load_run_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a benchmark run"):
        load_run(tmp_path)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="smug-opt")
    bench_cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_list_run_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SMUG_OPT_CACHE", str(tmp_path / "cache"))
    assert bench_cli.run(parse(["bench", "list"])) == 0
    listing = capsys.readouterr().out
    for name in ("synthetic", "paper-scale", "mnist-first-layer", "mnist-full-network", "text"):
        assert name in listing

    instances = tmp_path / "mine"
    instances.mkdir()
    save_problem(random_strict_problem(15, 8, seed=1), instances / "one.smug")
    out = tmp_path / "run"
    argv = ["bench", "run", "--instances", str(instances), "--backends", "highs", "--time-limit", "5",
            "--out", str(out), "--quiet"]
    assert bench_cli.run(parse(argv)) == 0
    assert "1 jobs run (0 errors), 0 already done" in capsys.readouterr().out
    assert bench_cli.run(parse(argv)) == 0  # resumed: nothing left to do
    assert "0 jobs run (0 errors), 1 already done" in capsys.readouterr().out

    assert bench_cli.run(parse(["bench", "report", str(out), "--quiet"])) == 0
    assert (out / "report" / "report.md").is_file() and (out / "report" / "summary.json").is_file()

    with pytest.raises(ValueError, match="--suite NAME or --instances DIR"):
        bench_cli.run(parse(["bench", "run", "--backends", "highs"]))
    with pytest.raises(ValueError, match="unknown backend"):
        bench_cli.run(parse(["bench", "run", "--suite", "synthetic", "--backends", "nope"]))


def test_a_metric_declared_once_is_in_the_table_and_the_json(tmp_path):
    from smug_opt.bench import summary

    builtin = list(summary.BACKEND_METRICS)
    try:
        summary.register_metric(summary.BackendMetric(
            "limit_hits", "limit hits",
            lambda runs: sum(r.status is not Status.OPTIMAL for r in runs.records),
            cell=lambda v: f"{v['limit_hits']}!", definition="jobs that ended without a proven optimum."))
        with pytest.raises(ValueError, match="limit_hits"):
            summary.register_metric(summary.BackendMetric("limit_hits", None, lambda runs: 0))
        files = write_report(write_run(tmp_path / "now", NOW))
    finally:
        summary.BACKEND_METRICS[:] = builtin
    text = files.markdown.read_text()
    assert "| solver | limit hits |" in text
    assert "| a 1.0 | 0! |" in text and "| b 1.0 | 2! |" in text  # b: FEASIBLE and ERROR
    assert "- **limit hits.** jobs that ended without a proven optimum." in text
    a, b = json.loads(files.summary.read_text())["suites"][0]["backends"]
    assert (a["limit_hits"], b["limit_hits"], b["backend"], b["solved"]) == (0, 2, "b", 1)
