"""Where jobs run: one at a time, N at a time on this machine, or on a Dask cluster.

Every executor runs the same :func:`~smug_opt.bench.job.run_job`, so every job is its own
killable process wherever it runs; records come back in completion order.

* :class:`SequentialExecutor` (the default): one job at a time, the cleanest timings.
* :class:`LocalPoolExecutor`: ``workers`` jobs at once (threads that each drive one job
  process; the solving happens in those processes, not in the threads).
* :class:`DaskExecutor`: each job is a task on a ``distributed`` cluster; the task starts
  the job process on its worker. The instances must be readable at the same path on the
  workers (a shared file system) and smug-opt installed there. Start workers with
  ``--nthreads 1`` for one job per worker at a time.
"""

from __future__ import annotations

import concurrent.futures
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

from smug_opt.bench.job import Job, failed_record, run_job
from smug_opt.bench.records import RunRecord

__all__ = ["DaskExecutor", "Executor", "LocalPoolExecutor", "SequentialExecutor", "make_executor"]


class Executor(ABC):
    """Runs jobs and yields their records as they finish; a context manager."""

    name: str = ""

    @abstractmethod
    def run(self, jobs: Sequence[Job]) -> Iterator[RunRecord]:
        """Run every job; closing the iterator early stops (and kills) what is running."""

    def close(self) -> None:  # noqa: B027 - an optional hook: most executors hold nothing
        """Release the executor's resources."""

    def describe(self) -> str:
        """What ``run.json`` records about the executor."""
        return self.name

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


class SequentialExecutor(Executor):
    """One job at a time in the calling thread."""

    name = "sequential"

    def run(self, jobs: Sequence[Job]) -> Iterator[RunRecord]:
        for job in jobs:
            yield run_job(job)


class LocalPoolExecutor(Executor):
    """``workers`` jobs at a time on this machine, each in its own process."""

    name = "local"

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers

    def describe(self) -> str:
        return f"local, {self.workers} workers"

    def run(self, jobs: Sequence[Job]) -> Iterator[RunRecord]:
        cancel = threading.Event()
        pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="smug-bench")
        try:
            futures = [pool.submit(run_job, job, cancel=cancel) for job in jobs]
            for future in concurrent.futures.as_completed(futures):
                yield future.result()
        finally:
            cancel.set()  # running jobs kill their processes; queued ones are dropped
            pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """Jobs as tasks on the Dask ``distributed`` cluster at ``scheduler`` (an address such as
    ``tcp://host:8786``, or a ``distributed.Client``)."""

    name = "dask"

    def __init__(self, scheduler: Any) -> None:
        try:
            from distributed import Client
        except ImportError as exc:
            raise RuntimeError('the dask executor needs distributed: pip install "smug-opt[bench]"'
                               ) from exc
        self._own = not isinstance(scheduler, Client)
        self.client = Client(scheduler) if self._own else scheduler
        self.address = self.client.scheduler.address

    def describe(self) -> str:
        return f"dask, scheduler {self.address}"

    def run(self, jobs: Sequence[Job]) -> Iterator[RunRecord]:
        from distributed import as_completed

        futures = {self.client.submit(run_job, job, pure=False): job for job in jobs}
        try:
            for future in as_completed(futures):
                try:
                    record = future.result()
                except Exception as exc:  # the task failed outside run_job (e.g. its worker died)
                    record = _task_failure(futures[future], exc)
                yield record
        finally:
            self.client.cancel(list(futures))

    def close(self) -> None:
        if self._own:
            self.client.close()


def _task_failure(job: Job, exc: BaseException) -> RunRecord:
    return failed_record(job, f"the Dask task failed: {type(exc).__name__}: {exc}", machine=None)


def make_executor(kind: str = "local", *, workers: int = 1, scheduler: str | None = None) -> Executor:
    """``"local"`` (sequential when ``workers`` is 1) or ``"dask"`` (needs ``scheduler``)."""
    if kind == "local":
        return SequentialExecutor() if workers == 1 else LocalPoolExecutor(workers)
    if kind == "dask":
        if not scheduler:
            raise ValueError("the dask executor needs a scheduler address (--scheduler tcp://HOST:PORT)")
        return DaskExecutor(scheduler)
    raise ValueError(f"unknown executor {kind!r}; expected 'local' or 'dask'")
