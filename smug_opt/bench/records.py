"""One benchmark run's record: what a (backend, instance, repeat) job measured, and its JSONL file.

Records are appended to ``results.jsonl`` as each job finishes (one JSON object per line,
flushed and synced), so an interrupted run loses at most the jobs that were running.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import socket
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from smug_opt.backend import Status
from smug_opt.result import Timings

__all__ = ["RESULTS_FILE", "Machine", "RecordKey", "RunRecord", "append_record", "backend_name",
           "machine_info",
           "read_records"]

RESULTS_FILE = "results.jsonl"

RecordKey = tuple[str, str, str, int]
"""``(suite, instance, backend, repeat)``: what a resumed run skips when it is recorded."""


@dataclass(frozen=True)
class Machine:
    """Where a job ran. ``memory_gb`` is None when psutil is not installed."""

    hostname: str
    cpu_count: int | None
    cpu_model: str
    python: str
    platform: str
    memory_gb: float | None


@functools.cache
def machine_info() -> Machine:
    """The current machine (cached: it does not change during a run)."""
    memory = None
    try:
        import psutil

        memory = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return Machine(
        hostname=socket.gethostname(), cpu_count=os.cpu_count(), cpu_model=_cpu_model(),
        python=platform.python_version(), platform=platform.platform(), memory_gb=memory,
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def backend_name(label: str) -> str:
    """The registry name in a run's backend label: ``"z3"`` for ``"z3"`` and ``"z3:pb"``."""
    return label.split(":", 1)[0]


@dataclass(frozen=True)
class RunRecord:
    """The outcome of one job.

    ``status`` is the core's verified status (ERROR also when the job process crashed, hung
    past ``time_limit + grace`` and was killed (``killed``), or exceeded the memory limit).
    ``times`` are the solve's phases as measured inside the job process (None when no
    result came back); ``wall_seconds`` is measured by the harness from the start of the
    solve to the answer or the kill, and ``overshoot = wall_seconds - time_limit``.
    ``verified`` is the core's verification outcome (False: the solver's answer was
    rejected and no valid one was found); ``reverified`` the harness's own re-check of the
    returned solution against the problem file (None without a solution); ``checks`` the
    findings of the suite's own check of that solution (e.g. the mask in the real model).
    ``peak_memory_mb`` is the job process's maximum resident set size. ``incumbents`` are
    ``(seconds since the solve started, objective)`` pairs the backend reported.
    """

    suite: str
    instance: str
    backend: str
    repeat: int
    status: Status
    time_limit: float
    threads: int
    seed: int
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    times: Timings | None = None
    wall_seconds: float | None = None
    overshoot: float | None = None
    peak_memory_mb: float | None = None
    verified: bool | None = None
    proof: str | None = None  # SolveResult.proof: "exact", "solver" or None
    verification: str = ""
    reverified: bool | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    killed: bool = False
    exit_code: int | None = None
    attempts: int = 0
    incumbents: tuple[tuple[float, float], ...] = ()
    strengthening: dict[str, Any] | None = None  # SolveResult.strengthening
    solver: str = ""
    message: str = ""
    features: dict[str, Any] = field(default_factory=dict)
    machine: Machine | None = None
    started_at: str = ""
    smug_opt_version: str = ""

    @property
    def key(self) -> RecordKey:
        return (self.suite, self.instance, self.backend, self.repeat)

    @property
    def certified(self) -> bool | None:
        """Whether an OPTIMAL or INFEASIBLE claim is exact (``proof`` "exact": by
        construction, an exact backend, or certification, whose seconds are
        ``times.certify``); None for the other statuses."""
        if self.status not in (Status.OPTIMAL, Status.INFEASIBLE):
            return None
        return self.proof == "exact"

    @property
    def seconds(self) -> float:
        """The solve's own end-to-end time, else the harness's wall time, else the limit."""
        if self.times is not None:
            return self.times.total
        return self.wall_seconds if self.wall_seconds is not None else self.time_limit

    def to_json(self) -> str:
        """One line of ``results.jsonl`` (non-finite numbers become null)."""
        data = asdict(self)
        data["status"] = self.status.name
        return json.dumps(_finite(data), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> RunRecord:
        """Read one line written by :meth:`to_json`; unknown keys are ignored."""
        data = json.loads(line)
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["status"] = Status[data["status"]]
        if data.get("times") is not None:
            data["times"] = Timings(**data["times"])
        if data.get("machine") is not None:
            data["machine"] = Machine(**data["machine"])
        data["incumbents"] = tuple((float(t), float(v)) for t, v in data.get("incumbents", ()))
        return cls(**data)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def append_record(path: Path, record: RunRecord) -> None:
    """Append ``record`` to the JSONL file ``path`` and sync it to disk."""
    with open(path, "a+b") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:  # a torn last line (killed mid-write) must not swallow this one
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(record.to_json().encode() + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_records(path: Path) -> list[RunRecord]:
    """The records of a ``results.jsonl`` file, the last one per key winning (a retried job
    replaces its earlier record). A torn or unreadable line is skipped with a warning."""
    if not path.is_file():
        return []
    latest: dict[RecordKey, RunRecord] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = RunRecord.from_json(line)
        except (ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"{path}, line {number}: skipped an unreadable record ({exc})",
                          RuntimeWarning, stacklevel=2)
            continue
        latest.pop(record.key, None)
        latest[record.key] = record
    return list(latest.values())
