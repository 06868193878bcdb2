"""The benchmark runner on real job processes: kills, crashes, memory limits, resumption."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from smug_opt.backend import Status
from smug_opt.bench.child import FAULT_KEY, SLOW_CHECK, SLOW_CHECK_SECONDS
from smug_opt.bench.generators import random_strict_problem
from smug_opt.bench.harness import RunConfig, RunConfigMismatchError, run_benchmark
from smug_opt.bench.job import Job, run_job
from smug_opt.bench.records import RESULTS_FILE, read_records
from smug_opt.bench.suites import Instance, instances_from_dir
from smug_opt.executors import LocalPoolExecutor
from smug_opt.problem_file import save_problem
from smug_opt.registry import available_backends, refresh


def write_instances(directory: Path, names: list[str]) -> Path:
    """Small random problems; a name 'hang', 'crash' or 'oom' gets that fault injected."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        problem = random_strict_problem(20, 10, seed=i)
        if name in ("hang", "crash", "oom", SLOW_CHECK):
            problem = problem.with_metadata(**{FAULT_KEY: name})
        save_problem(problem, directory / f"{name}.smug")
    return directory


def one_job(directory: Path, name: str, **options) -> Job:
    instance = Instance(name, directory / f"{name}.smug", {})
    return Job("t", instance, "highs", 0, **{"time_limit": 1.0, "grace": 0.5, **options})


def test_hanging_job_is_killed_at_limit_plus_grace(tmp_path):
    directory = write_instances(tmp_path, ["hang"])
    start = time.monotonic()
    record = run_job(one_job(directory, "hang"))
    elapsed = time.monotonic() - start
    assert record.status is Status.ERROR and record.killed
    assert "killed" in record.message and "exact checks" in record.message  # the checks' allowance
    assert 1.5 <= record.wall_seconds < 3.0  # killed at limit + grace (+ 3 checks of a tiny problem)
    assert 0.5 <= record.overshoot < 2.0
    assert record.exit_code == -9
    assert record.peak_memory_mb > 10  # measured from the reaped process, even when killed
    assert elapsed < 30


def test_checks_after_the_solve_are_not_timed_against_the_limit(tmp_path):
    """A solve that ends in time keeps its status even when re-checking its answer takes
    longer than the limit plus grace (it was killed and recorded ERROR before)."""
    directory = write_instances(tmp_path, [SLOW_CHECK])
    record = run_job(one_job(directory, SLOW_CHECK, time_limit=2.0))
    assert SLOW_CHECK_SECONDS > 2.0 + 0.5
    assert record.status in (Status.OPTIMAL, Status.INFEASIBLE) and not record.killed, record.message
    assert record.wall_seconds < 2.5 and record.reverified in (True, None)


def test_memory_limit_kills_the_job(tmp_path):
    directory = write_instances(tmp_path, ["oom"])
    record = run_job(one_job(directory, "oom", time_limit=20.0, memory_limit_mb=300))
    assert record.status is Status.ERROR and record.killed
    assert "memory" in record.message and "300" in record.message
    assert record.peak_memory_mb >= 300
    assert record.wall_seconds < 20


def test_crash_and_hang_are_errors_and_the_run_goes_on(tmp_path):
    directory = write_instances(tmp_path / "inst", ["crash", "easy", "hang"])
    config = RunConfig(backends=("highs",), time_limit=1.0, grace=0.5,
                       instance_dirs=(str(directory),))
    outcome = run_benchmark(config, tmp_path / "run", executor=LocalPoolExecutor(2), quiet=True)
    assert (outcome.planned, outcome.skipped, len(outcome.records)) == (3, 0, 3)
    by_name = {r.instance: r for r in read_records(tmp_path / "run" / RESULTS_FILE)}
    crash, easy, hang = by_name["crash"], by_name["easy"], by_name["hang"]
    assert crash.status is Status.ERROR and not crash.killed
    assert crash.exit_code == -6 and "SIGABRT" in crash.message
    assert hang.status is Status.ERROR and hang.killed
    assert easy.status is Status.OPTIMAL
    assert easy.verified is True and easy.reverified is True
    assert easy.solver.startswith("HiGHS") and easy.objective == easy.bound
    assert easy.times is not None and easy.times.total <= easy.wall_seconds
    assert easy.machine is not None and easy.machine.cpu_count >= 1 and easy.machine.python
    assert (easy.threads, easy.seed, easy.time_limit) == (1, 0, 1.0)
    assert easy.features["vars"] == 20 and easy.features["rows"] == 10
    run_file = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_file["config"]["backends"] == ["highs"] and run_file["executor"] == "local, 2 workers"


def test_interrupted_run_resumes_without_redoing_jobs(tmp_path):
    directory = write_instances(tmp_path / "inst", ["a", "b", "c"])
    config = RunConfig(backends=("highs",), time_limit=5.0, instance_dirs=(str(directory),))
    seen = []

    def interrupt_after_two(record):
        seen.append(record.key)
        if len(seen) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(config, out, quiet=True, on_record=interrupt_after_two)
    first_lines = (out / RESULTS_FILE).read_text().splitlines()
    assert len(first_lines) == 2

    outcome = run_benchmark(config, out, quiet=True)
    assert (outcome.planned, outcome.skipped) == (3, 2)
    assert [r.instance for r in outcome.records] == ["c"]
    lines = (out / RESULTS_FILE).read_text().splitlines()
    assert lines[:2] == first_lines and len(lines) == 3

    again = run_benchmark(config, out, quiet=True)
    assert (again.skipped, again.records) == (3, [])

    with pytest.raises(RunConfigMismatchError, match="time_limit"):
        run_benchmark(RunConfig(backends=("highs",), time_limit=9.0, instance_dirs=(str(directory),)),
                      out, quiet=True)


@pytest.mark.skipif("z3" not in available_backends(), reason="z3 not installed")
def test_backend_variants_carry_their_own_solver_settings(tmp_path):
    """'z3:pb' and 'z3:bad' are two labels of one backend: each job gets its label's extras
    (an unknown encoding reaches z3 and fails there), and a label's settings cannot change
    within a run directory."""
    directory = write_instances(tmp_path / "inst", ["a"])
    extras = {"z3:pb": {"encoding": "pb"}, "z3:bad": {"encoding": "no-such-encoding"}}
    config = RunConfig(backends=("z3:pb", "z3:bad"), time_limit=10.0,
                       instance_dirs=(str(directory),), extras=extras)
    records = {r.backend: r for r in run_benchmark(config, tmp_path / "run", quiet=True).records}
    assert records["z3:pb"].status is Status.OPTIMAL and records["z3:pb"].verified
    assert records["z3:bad"].status is Status.ERROR and "no-such-encoding" in records["z3:bad"].message
    changed = RunConfig(backends=("z3:pb",), time_limit=10.0, instance_dirs=(str(directory),),
                        extras={"z3:pb": {"encoding": "exact"}})
    with pytest.raises(RunConfigMismatchError, match="extras of z3:pb"):
        run_benchmark(changed, tmp_path / "run", quiet=True)


def test_instances_from_dir_reads_features(tmp_path):
    directory = write_instances(tmp_path, ["x", "y"])
    instances = instances_from_dir(directory)
    assert [i.name for i in instances] == ["x", "y"]
    assert instances[0].features["strict_rows"] == 10 and instances[0].features["threshold"] == 0.5
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .smug"):
        instances_from_dir(tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        instances_from_dir(tmp_path / "missing")


def test_hanging_and_crashing_backends_are_errors_and_the_run_goes_on(tmp_path):
    refresh()  # another process may have (un)installed the plugin since collection
    if not {"toy-bruteforce", "toy-hang", "toy-crash"} <= set(available_backends()):
        pytest.skip("the toy test plugin (tests/toy_plugin) is not installed")
    directory = tmp_path / "inst"
    directory.mkdir()
    # the toys take <= 16 binaries
    save_problem(random_strict_problem(10, 5, seed=3), directory / "small.smug")
    config = RunConfig(backends=("toy-hang", "toy-crash", "toy-bruteforce"), time_limit=1.0, grace=0.5,
                       instance_dirs=(str(directory),))
    outcome = run_benchmark(config, tmp_path / "run", executor=LocalPoolExecutor(3), quiet=True)
    by_backend = {r.backend: r for r in outcome.records}
    hang, crash, brute = by_backend["toy-hang"], by_backend["toy-crash"], by_backend["toy-bruteforce"]
    assert hang.status is Status.ERROR and hang.killed and hang.wall_seconds < 3.0
    assert crash.status is Status.ERROR and not crash.killed and crash.exit_code == 1
    assert "died during the solve" in crash.message
    assert brute.status is Status.OPTIMAL and brute.reverified is True


@pytest.mark.skipif("cpsat" not in available_backends(), reason="OR-Tools not installed")
def test_cpsat_job_lowering_does_not_pay_the_ortools_import(tmp_path):
    """The job process runs the backend's own warm_up (CP-SAT's imports cp_model, ~0.5 s)
    before the clock starts, so a tiny instance's timed lowering is milliseconds."""
    directory = write_instances(tmp_path, ["tiny"])
    instance = Instance("tiny", directory / "tiny.smug", {})
    record = run_job(Job("t", instance, "cpsat", 0, time_limit=10.0, grace=5.0))
    assert record.status is Status.OPTIMAL, record.message
    assert record.times is not None
    assert record.times.lower < 0.1, record.times


def test_a_strengthened_run_records_what_was_done(tmp_path):
    directory = write_instances(tmp_path / "inst", ["a"])
    config = RunConfig(backends=("highs",), time_limit=10.0, instance_dirs=(str(directory),),
                       strengthen="cuts,tables")
    (record,) = run_benchmark(config, tmp_path / "run", quiet=True).records
    assert record.status is Status.OPTIMAL and record.reverified
    assert record.strengthening["pieces"] == ["cuts", "tables"] and record.times.strengthen > 0
    (again,) = read_records(tmp_path / "run" / RESULTS_FILE)
    assert again.strengthening == record.strengthening
    with pytest.raises(RunConfigMismatchError, match="strengthen"):
        run_benchmark(RunConfig(backends=("highs",), time_limit=10.0,
                                instance_dirs=(str(directory),)), tmp_path / "run", quiet=True)
    with pytest.raises(ValueError, match="unknown strengthening piece"):
        RunConfig(backends=("highs",), time_limit=1.0, suites=("synthetic",), strengthen="cut")


def test_a_certified_run_proves_its_claims_and_says_so(tmp_path):
    """``certify="on"`` (``bench run --certify``) runs every job with ``certify=True``: the
    claim is exact and the certification's seconds are recorded (the report's 'certified'
    column); ``"off"`` leaves the same claim on HiGHS's word. The setting is part of the
    measurement: a run directory does not mix them."""
    directory = write_instances(tmp_path / "inst", ["a"])
    runs = {}
    for setting in ("on", "off"):
        config = RunConfig(backends=("highs",), time_limit=20.0, instance_dirs=(str(directory),),
                           certify=setting)
        (runs[setting],) = run_benchmark(config, tmp_path / setting, quiet=True).records
    on, off = runs["on"], runs["off"]
    assert on.status is off.status is Status.OPTIMAL and on.objective == off.objective
    assert on.proof == "exact" and on.certified and on.times.certify > 0, on.message
    assert off.proof == "solver" and not off.certified and off.times.certify == 0
    with pytest.raises(RunConfigMismatchError, match="certify"):
        run_benchmark(RunConfig(backends=("highs",), time_limit=20.0, instance_dirs=(str(directory),)),
                      tmp_path / "on", quiet=True)
    with pytest.raises(ValueError, match="certify must be one of auto, on, off"):
        RunConfig(backends=("highs",), time_limit=1.0, suites=("synthetic",), certify="yes")
