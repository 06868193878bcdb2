"""Benchmark harness: suites of saved problems, isolated and resumable runs, metrics and reports.

``import smug_opt.bench`` loads no solver, model or plotting library; suites import their
encoders and models only when they are built, reports import matplotlib only when they
draw.
"""

from smug_opt.bench import builtin_suites  # noqa: F401  (registers the built-in suites)
from smug_opt.bench.harness import RunConfig, RunOutcome, resolve_backends, run_benchmark
from smug_opt.bench.job import JOB_GRACE, Job, run_job
from smug_opt.bench.metrics import JobOutcome, PerformanceProfile
from smug_opt.bench.records import Machine, RunRecord, read_records
from smug_opt.bench.report import compare_runs, load_run, write_report
from smug_opt.bench.suites import (
    Instance,
    InstanceSpec,
    Suite,
    SuiteBuildError,
    SuiteUnavailableError,
    get_suite,
    instances_from_dir,
    list_suites,
    load_suite,
    register_builder,
    register_suite,
)
from smug_opt.bench.summary import (
    BackendMetric,
    BackendSummary,
    SuiteSummary,
    register_metric,
    summarize_suites,
)

__all__ = [
    "JOB_GRACE",
    "BackendMetric",
    "BackendSummary",
    "Instance",
    "InstanceSpec",
    "Job",
    "JobOutcome",
    "Machine",
    "PerformanceProfile",
    "RunConfig",
    "RunOutcome",
    "RunRecord",
    "Suite",
    "SuiteBuildError",
    "SuiteSummary",
    "SuiteUnavailableError",
    "compare_runs",
    "get_suite",
    "instances_from_dir",
    "list_suites",
    "load_run",
    "load_suite",
    "read_records",
    "register_builder",
    "register_metric",
    "register_suite",
    "resolve_backends",
    "run_benchmark",
    "run_job",
    "summarize_suites",
    "write_report",
]
