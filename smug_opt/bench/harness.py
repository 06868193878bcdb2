"""A benchmark run: every (backend, instance, repeat) job of a configuration, resumable.

The run directory holds ``run.json`` (the :class:`RunConfig` and where it ran) and
``results.jsonl`` (one :class:`~smug_opt.bench.records.RunRecord` per finished job,
appended as it finishes). Running the same configuration into the same directory again
skips every job already recorded, so an interrupted run resumes where it stopped; a run
with more backends, suites or repeats adds only the new jobs. Settings that change what
a measurement means (time limit, threads, seed, grace, memory limit) must match.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from smug_opt import __version__
from smug_opt.backend import Status
from smug_opt.bench.child import CERTIFY_SETTINGS
from smug_opt.bench.job import JOB_GRACE, Job, failed_record, run_job
from smug_opt.bench.records import (
    RESULTS_FILE,
    RunRecord,
    append_record,
    backend_name,
    machine_info,
    read_records,
)
from smug_opt.bench.suites import Instance, get_suite, instances_from_dir, load_suite
from smug_opt.errors import ParameterError
from smug_opt.executors import Executor, SequentialExecutor
from smug_opt.filelock import FolderLock
from smug_opt.spawn import default_memory_limit_mb
from smug_opt.strengthen import Pieces

__all__ = ["RUN_FILE", "RunConfig", "RunConfigMismatchError", "RunOutcome", "collect_instances",
           "plan_jobs", "resolve_backends", "run_benchmark"]

RUN_FILE = "run.json"
_RUN_FORMAT = "smug-opt-bench-run"


class RunConfigMismatchError(ValueError):
    """A run directory holds results measured with other settings."""


@dataclass(frozen=True)
class RunConfig:
    """What to run: ``backends`` on the instances of ``suites`` (registered names) and of
    ``instance_dirs`` (folders of ``.smug`` files), ``repeats`` times each.

    Each job gets ``time_limit`` seconds, ``threads`` solver threads and solver seed
    ``seed`` (the same for every repeat: repeats measure timing noise); a job process with
    no answer ``grace`` seconds after the limit is killed, as is one whose resident memory
    passes ``memory_limit_mb`` (by default a solve's default budget,
    :func:`smug_opt.spawn.default_memory_limit_mb`; None: no limit). A backend is named
    by a label, ``name`` or ``name:variant`` (e.g. ``z3:pb``); ``extras`` maps a label to
    its solver settings (:attr:`SolveOptions.extras`, e.g. ``{"z3:pb": {"encoding": "pb"}}``),
    so one run can compare settings of one solver. ``instance_filter`` is a glob on
    instance names (None: all); ``run.json`` keeps the latest invocation's.
    ``strengthen`` is ``"auto"`` (``solve``'s default), ``"off"`` or the strengthening
    pieces every job runs (``"all"`` or names separated by commas; see
    :class:`smug_opt.strengthen.Pieces`). ``certify`` is ``"auto"`` (``solve``'s default),
    ``"on"`` (``certify=True``: every floating-point OPTIMAL/INFEASIBLE proven exactly
    within the job's time limit, else downgraded) or ``"off"``.
    """

    backends: tuple[str, ...]
    time_limit: float
    suites: tuple[str, ...] = ()
    instance_dirs: tuple[str, ...] = ()
    repeats: int = 1
    threads: int = 1
    seed: int = 0
    grace: float = JOB_GRACE
    memory_limit_mb: float | None = field(default_factory=default_memory_limit_mb)
    instance_filter: str | None = None
    strengthen: str = "auto"
    extras: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    certify: str = "auto"

    MEASUREMENT: ClassVar[tuple[str, ...]] = ("time_limit", "threads", "seed", "grace", "memory_limit_mb",
                                              "strengthen", "certify")

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("a run needs at least one backend")
        if not (self.suites or self.instance_dirs):
            raise ValueError("a run needs a suite or an instance directory")
        if not self.time_limit > 0:
            raise ParameterError("time_limit", f"must be positive seconds, got {self.time_limit!r}")
        if self.repeats < 1 or self.threads < 1:
            raise ValueError(f"repeats and threads must be at least 1, got {self.repeats}, {self.threads}")
        if self.grace < 0:
            raise ValueError(f"grace must be non-negative seconds, got {self.grace!r}")
        if self.memory_limit_mb is not None and not self.memory_limit_mb > 0:
            raise ValueError(f"memory_limit_mb must be positive, got {self.memory_limit_mb!r}")
        if self.strengthen not in ("auto", "off"):
            Pieces.parse(self.strengthen)
        if self.certify not in CERTIFY_SETTINGS:
            raise ParameterError("certify", f"must be one of {', '.join(CERTIFY_SETTINGS)}, "
                                            f"got {self.certify!r}")

    def merged_with(self, earlier: RunConfig) -> RunConfig:
        """This configuration extended by ``earlier``'s backends, suites, folders and repeats;
        raises :class:`RunConfigMismatchError` when a measurement setting differs."""
        differ = [f"{name}: {getattr(earlier, name)!r} before, {getattr(self, name)!r} now"
                  for name in self.MEASUREMENT if getattr(earlier, name) != getattr(self, name)]
        differ += [f"extras of {label}: {dict(earlier.extras[label])!r} before, "
                   f"{dict(self.extras[label])!r} now"
                   for label in set(earlier.extras) & set(self.extras)
                   if dict(earlier.extras[label]) != dict(self.extras[label])]
        if differ:
            raise RunConfigMismatchError(
                "the run directory holds results measured with other settings ("
                + "; ".join(differ) + "); use another output directory or the same settings")

        def union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        return replace(earlier, backends=union(earlier.backends, self.backends),
                       suites=union(earlier.suites, self.suites),
                       instance_dirs=union(earlier.instance_dirs, self.instance_dirs),
                       repeats=max(earlier.repeats, self.repeats),
                       instance_filter=self.instance_filter,
                       extras={**earlier.extras, **self.extras})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v  # JSON: checked on construction
                                  for k, v in data.items() if k in known}
        return cls(**values)


@dataclass(frozen=True)
class RunOutcome:
    """What :func:`run_benchmark` did: ``planned`` jobs, of which ``skipped`` were already
    recorded; ``records`` are the ones run now, in completion order."""

    out_dir: Path
    planned: int
    skipped: int
    records: list[RunRecord]


def resolve_backends(spec: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Backend labels from ``"all"`` (every usable backend), ``"a,b"`` or a list; each
    label's backend (``name`` of ``name:variant``) is checked to be usable here. ``auto``
    is the racing portfolio, run as one pseudo-backend."""
    from smug_opt.backend_choice import BackendChoice
    from smug_opt.registry import available_backends

    names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec) if n.strip()]
    if names == ["all"]:
        usable = available_backends()
        if not usable:
            raise RuntimeError("no backend is usable here; see `smug-opt backends`")
        return tuple(usable)
    for name in names:
        # 'auto' is the racing portfolio; any other name must be a usable backend
        BackendChoice.parse(backend_name(name))
    if not names:
        raise ValueError("no backend given; pass names separated by commas, or 'all'")
    return tuple(dict.fromkeys(names))


def collect_instances(config: RunConfig, *, progress: bool = False) -> dict[str, list[Instance]]:
    """Suite label → its instances (suites are built and cached first if needed); a
    folder's label is its name."""
    out: dict[str, list[Instance]] = {}
    for name in config.suites:
        get_suite(name)
        out[name] = load_suite(name, progress=progress)
    for directory in config.instance_dirs:
        label = Path(directory).resolve().name
        if label in out:
            raise ValueError(f"two instance sources are both called {label!r}; rename a folder")
        out[label] = instances_from_dir(directory)
    if config.instance_filter:
        out = {label: [i for i in items if fnmatch.fnmatchcase(i.name, config.instance_filter)]
               for label, items in out.items()}
        if not any(out.values()):
            raise ValueError(f"no instance name matches the filter {config.instance_filter!r}")
    return out


def plan_jobs(config: RunConfig, instances: dict[str, list[Instance]]) -> list[Job]:
    """Every job, repeat by repeat, then instance by instance, the backends interleaved (so
    a partial run covers every backend on the same instances)."""
    checks = {suite: get_suite(suite).check for suite in config.suites}
    return [
        Job(suite, instance, backend, repeat, config.time_limit, config.threads, config.seed,
            config.grace, config.memory_limit_mb, config.strengthen,
            extras=dict(config.extras.get(backend, {})), check=checks.get(suite), certify=config.certify)
        for repeat in range(config.repeats)
        for suite, items in instances.items()
        for instance in items
        for backend in config.backends
    ]


def run_benchmark(
    config: RunConfig,
    out_dir: str | os.PathLike[str],
    *,
    executor: Executor | None = None,
    quiet: bool = False,
    retry_errors: bool = False,
    on_record: Callable[[RunRecord], None] | None = None,
) -> RunOutcome:
    """Run every job of ``config`` not yet recorded in ``out_dir`` (see the module docstring).

    ``executor`` defaults to one job at a time. ``retry_errors`` also re-runs jobs recorded
    as ERROR (their new record replaces the old one). ``on_record`` is called with each
    record once it is on disk. A progress bar goes to stderr unless ``quiet``. ``out_dir``
    is locked for the run (:class:`~smug_opt.filelock.FolderInUseError` if another holds it).
    """
    out = Path(out_dir)
    resolve_backends(config.backends)
    with FolderLock.acquire(out):  # one writer per run directory (the holder is named)
        return _run_locked(config, out, executor, quiet=quiet, retry_errors=retry_errors,
                           on_record=on_record)


def _run_locked(config: RunConfig, out: Path, executor: Executor | None, *, quiet: bool,
                retry_errors: bool, on_record: Callable[[RunRecord], None] | None) -> RunOutcome:
    from tqdm import tqdm

    stored = _read_run_file(out)
    merged = config.merged_with(stored) if stored is not None else config
    instances = collect_instances(config, progress=not quiet)
    executor = executor or SequentialExecutor()
    _write_run_file(out, merged, executor)

    results = out / RESULTS_FILE
    done = {r.key for r in read_records(results) if not (retry_errors and r.status is Status.ERROR)}
    jobs = plan_jobs(config, instances)
    pending = [job for job in jobs if job.key not in done]
    finished: list[RunRecord] = []
    bar = tqdm(total=len(pending), desc=f"bench {out.name}", unit="job", file=sys.stderr,
               disable=quiet, dynamic_ncols=True)
    outcomes = executor.map(run_job, pending, light=True, on_error=_task_failure)
    with bar, contextlib.closing(outcomes) as records:
        for _, record in records:
            append_record(results, record)
            finished.append(record)
            bar.set_postfix_str(f"{record.backend} {record.instance}: {record.status.name}")
            bar.update()
            if on_record is not None:
                on_record(record)
    return RunOutcome(out, len(jobs), len(jobs) - len(pending), finished)


def _read_run_file(out: Path) -> RunConfig | None:
    path = out / RUN_FILE
    if not path.is_file():
        if (out / RESULTS_FILE).is_file():
            raise RunConfigMismatchError(f"{out} has {RESULTS_FILE} but no {RUN_FILE}; not a run directory")
        return None
    data = json.loads(path.read_text())
    if data.get("format") != _RUN_FORMAT:
        raise RunConfigMismatchError(f"{path} is not a smug-opt benchmark run file")
    return RunConfig.from_dict(data["config"])


def _write_run_file(out: Path, config: RunConfig, executor: Executor) -> None:
    path = out / RUN_FILE
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    created = json.loads(path.read_text()).get("created", now) if path.is_file() else now
    data = {
        "format": _RUN_FORMAT, "config": asdict(config), "created": created, "updated": now,
        "executor": executor.describe(), "smug_opt_version": __version__,
        "machine": asdict(machine_info()),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def _task_failure(job: Job, exc: BaseException) -> RunRecord:
    """The record of a job whose task failed outside :func:`run_job` (e.g. its Dask worker died)."""
    return failed_record(job, f"the task failed: {type(exc).__name__}: {exc}", machine=None)
