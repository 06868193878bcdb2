"""The Dask executor on a local cluster: jobs are tasks that still solve in killable processes."""

from __future__ import annotations

import pytest

from smug_opt.backend import Status
from smug_opt.bench.child import FAULT_KEY
from smug_opt.bench.generators import random_strict_problem
from smug_opt.bench.harness import RunConfig, run_benchmark
from smug_opt.bench.records import RESULTS_FILE, read_records
from smug_opt.executors import DaskExecutor
from smug_opt.problem_file import save_problem

distributed = pytest.importorskip("distributed")


def test_dask_executor_runs_jobs_and_survives_a_crash(tmp_path):
    instances = tmp_path / "inst"
    instances.mkdir()
    save_problem(random_strict_problem(20, 10, seed=0), instances / "easy.smug")
    crash = random_strict_problem(20, 10, seed=1).with_metadata(**{FAULT_KEY: "crash"})
    save_problem(crash, instances / "crash.smug")
    config = RunConfig(backends=("highs",), time_limit=5.0, instance_dirs=(str(instances),))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        executor = DaskExecutor(client)
        outcome = run_benchmark(config, tmp_path / "run", executor=executor, quiet=True)
        worker_pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert executor.describe().startswith("dask, scheduler tcp://")
    assert len(outcome.records) == 2
    by_name = {r.instance: r for r in read_records(tmp_path / "run" / RESULTS_FILE)}
    assert by_name["easy"].status is Status.OPTIMAL and by_name["easy"].reverified is True
    assert by_name["crash"].status is Status.ERROR and by_name["crash"].exit_code == -6
    assert worker_pids  # the cluster really ran in separate worker processes
