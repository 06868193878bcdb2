"""Where tasks run: in this process, N worker processes on this machine, or a Dask cluster.

The one executor layer of smug-opt: ``bench run``, ``evaluate`` and batch ``explain`` all
hand their tasks to an :class:`Executor` (``--workers N --executor local|dask --scheduler
ADDR``); nothing else starts a pool. A task is a picklable module-level function applied
to one picklable item; results come back in completion order as ``(position, result)``.

* :class:`SequentialExecutor` (``--workers 1``, the default): one task at a time in this
  process, the cleanest timings.
* :class:`LocalPoolExecutor`: ``workers`` tasks at once in spawned worker processes that
  live as long as the executor, so what a task caches with :func:`worker_cache` (a model,
  say) is loaded once per worker. A *light* task (a benchmark job, which only starts and
  watches a process of its own) is driven from a thread instead.
* :class:`DaskExecutor`: each task runs on a ``distributed`` cluster's worker; files a task
  names must be readable at the same path there, and smug-opt installed. Start workers
  with ``--nthreads 1`` for one task per worker at a time.

At most ``2 × workers`` tasks are in flight, so items may be produced lazily (a million
inputs are never all in memory). Solvers keep running in their own isolated processes
inside whichever worker runs the task.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import multiprocessing
import os
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from smug_opt.errors import ParameterError
from smug_opt.spawn import end_descendants, exit_with_parent

__all__ = [
    "EXECUTORS",
    "DaskExecutor",
    "Executor",
    "ExecutorKind",
    "LocalPoolExecutor",
    "SequentialExecutor",
    "check_executor_args",
    "make_executor",
    "worker_cache",
]



@enum.unique
class ExecutorKind(str, enum.Enum):
    """Where tasks run (``--executor``): this machine (in this process, or a pool of
    ``--workers`` processes) or a Dask cluster. A ``str`` enum (compares equal to its value)."""

    LOCAL = "local"
    DASK = "dask"

    def __str__(self) -> str:
        return self.value


EXECUTORS = tuple(kind.value for kind in ExecutorKind)
"""The ``--executor`` choices."""

T = TypeVar("T")
R = TypeVar("R")
OnError = Callable[[Any, BaseException], Any]
"""``(item, exception) -> result`` for a task that failed (in the pool or on Dask: its
worker may have died); without it, the exception propagates."""

_cache: dict[Hashable, Any] = {}
_cache_lock = threading.RLock()  # a factory may itself use the cache


def worker_cache(key: Hashable, factory: Callable[[], R]) -> R:
    """``factory()`` computed once per worker process for ``key`` (a model, say), then reused."""
    with _cache_lock:
        if key not in _cache:
            _cache[key] = factory()
        return _cache[key]


class Executor(ABC):
    """Runs tasks and yields their results as they finish; a context manager."""

    name: str = ""
    workers: int = 1

    @abstractmethod
    def map(self, fn: Callable[..., R], items: Iterable[Any], *, light: bool = False,
            on_error: OnError | None = None) -> Generator[tuple[int, R], None, None]:
        """``(position, fn(item))`` for every item, in completion order.

        ``light``: ``fn`` only starts and waits on a process of its own and takes a
        ``cancel`` keyword (a :class:`threading.Event`); a local pool drives it from a
        thread. Closing the generator early cancels what has not started and stops what runs.
        """

    def close(self) -> None:  # noqa: B027 - an optional hook: the sequential executor holds nothing
        """Release the executor's workers."""

    def abort(self) -> None:
        """Release the executor's workers at once, killing what they run (an interrupt)."""
        self.close()

    def describe(self) -> str:
        """What a run's metadata records about the executor."""
        return self.name

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.abort()
        else:
            self.close()


class SequentialExecutor(Executor):
    """One task at a time in the calling process."""

    name = "sequential"

    def map(self, fn: Callable[..., R], items: Iterable[Any], *, light: bool = False,
            on_error: OnError | None = None) -> Generator[tuple[int, R], None, None]:
        for i, item in enumerate(items):
            try:
                result = fn(item)
            except Exception as exc:
                if on_error is None:
                    raise
                result = on_error(item, exc)
            yield i, result


def _bounded(submit: Callable[[Any], Any], items: Iterable[Any], window: int,
             wait_one: Callable[[set[Any]], Iterable[Any]]) -> Iterator[tuple[Any, int, Any]]:
    """Keep ``window`` futures in flight; yield ``(future, position, item)`` as each finishes."""
    pending: dict[Any, tuple[int, Any]] = {}
    source = iter(enumerate(items))
    exhausted = False
    while True:
        while not exhausted and len(pending) < window:
            try:
                i, item = next(source)
            except StopIteration:
                exhausted = True
                break
            pending[submit(item)] = (i, item)
        if not pending:
            return
        for future in wait_one(set(pending)):
            i, item = pending.pop(future)
            yield future, i, item


def _first_completed(futures: set[Any]) -> Iterable[Any]:
    done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
    return done


def _outcome(future: Any, item: Any, on_error: OnError | None) -> Any:
    try:
        return future.result()
    except Exception as exc:
        if on_error is None:
            raise
        return on_error(item, exc)


class LocalPoolExecutor(Executor):
    """``workers`` tasks at a time on this machine, in spawned worker processes."""

    name = "local"

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ParameterError("workers", f"must be at least 1, got {workers}")
        self.workers = workers
        self._processes: concurrent.futures.ProcessPoolExecutor | None = None

    def describe(self) -> str:
        return f"local, {self.workers} workers"

    def _pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._processes is None:  # spawn: TensorFlow and solver libraries do not survive fork
            self._processes = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent, initargs=(os.getpid(),))
        return self._processes

    def map(self, fn: Callable[..., R], items: Iterable[Any], *, light: bool = False,
            on_error: OnError | None = None) -> Generator[tuple[int, R], None, None]:
        if light:
            yield from self._threads(fn, items, on_error)
            return
        pool = self._pool()
        futures: set[Any] = set()

        def submit(item: Any) -> Any:
            future = pool.submit(fn, item)
            futures.add(future)
            return future

        try:
            for future, i, item in _bounded(submit, items, 2 * self.workers, _first_completed):
                yield i, _outcome(future, item, on_error)
        finally:
            for future in futures:
                future.cancel()

    def _threads(self, fn: Callable[..., R], items: Iterable[Any],
                 on_error: OnError | None) -> Generator[tuple[int, R], None, None]:
        cancel = threading.Event()
        pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="smug-task")
        try:
            submit = lambda item: pool.submit(fn, item, cancel=cancel)  # noqa: E731
            for future, i, item in _bounded(submit, items, 2 * self.workers, _first_completed):
                yield i, _outcome(future, item, on_error)
        finally:
            cancel.set()  # running tasks stop their processes; queued ones are dropped
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        if self._processes is not None:
            self._processes.shutdown(wait=True, cancel_futures=True)
            self._processes = None

    def abort(self) -> None:
        """Kill the pool's processes, and what each started, by pid (they share the
        caller's process group, which is never signalled)."""
        if self._processes is None:
            return
        processes = list(getattr(self._processes, "_processes", None) or {})  # pid -> Process
        for pid in processes:
            end_descendants(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._processes.shutdown(wait=False, cancel_futures=True)
        self._processes = None


class DaskExecutor(Executor):
    """Tasks on the Dask ``distributed`` cluster at ``scheduler`` (an address such as
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
        self.workers = max(1, sum(self.client.nthreads().values()))

    def describe(self) -> str:
        return f"dask, scheduler {self.address}"

    def map(self, fn: Callable[..., R], items: Iterable[Any], *, light: bool = False,
            on_error: OnError | None = None) -> Generator[tuple[int, R], None, None]:
        from distributed import as_completed

        completed = as_completed()
        futures: list[Any] = []

        def submit(item: Any) -> Any:
            future = self.client.submit(fn, item, pure=False)
            futures.append(future)
            completed.add(future)
            return future

        def wait_one(_: set[Any]) -> Iterable[Any]:
            return [next(completed)]

        try:
            for future, i, item in _bounded(submit, items, 2 * self.workers, wait_one):
                yield i, _outcome(future, item, on_error)
        finally:
            self.client.cancel(futures)

    def close(self) -> None:
        if self._own:
            self.client.close()


def check_executor_args(kind: ExecutorKind | str, workers: int, scheduler: str | None) -> ExecutorKind:
    """Reject a bad ``--executor/--workers/--scheduler`` combination before any work;
    returns the executor's kind."""
    try:
        kind = ExecutorKind(kind)
    except ValueError:
        raise ValueError(f"unknown --executor {kind!r}; expected one of {', '.join(EXECUTORS)}") from None
    if workers < 1:
        raise ParameterError("workers", f"must be at least 1, got {workers}")
    if kind is ExecutorKind.DASK and not scheduler:
        raise ValueError("--executor dask needs --scheduler tcp://HOST:PORT (a running Dask scheduler)")
    if kind is ExecutorKind.LOCAL and scheduler:
        raise ValueError("--scheduler needs --executor dask")
    return kind


def make_executor(kind: ExecutorKind | str = ExecutorKind.LOCAL, *, workers: int = 1,
                  scheduler: Any = None) -> Executor:
    """``local`` (sequential when ``workers`` is 1) or ``dask`` (needs ``scheduler``: an
    address or a ``distributed.Client``)."""
    kind = check_executor_args(kind, workers, None if scheduler is None else str(scheduler))
    if kind is ExecutorKind.DASK:
        return DaskExecutor(scheduler)
    return SequentialExecutor() if workers == 1 else LocalPoolExecutor(workers)
