"""A resumable run folder that survives a kill: records appended as JSON lines (one per
input), arrays in ``.npz`` parts written atomically, and ``run.json`` saying what was run.

Order of writes for a batch of finished inputs: the part's arrays (temporary file, fsync,
rename), then the records that point at them (one append, fsync). A kill at any moment
leaves at worst a half-written last line (dropped on reopening) or a part no record points
at (deleted on reopening): every input is recorded once or not at all, and a resumed run
redoes exactly the ones that are not.

One writer at a time: :meth:`RunFolder.open` locks the folder
(:class:`~smug_opt.filelock.FolderLock`) until :meth:`RunFolder.close` or the writer's end;
a second writer is refused with the holder's host, pid and start time.

Reading: ``RunFolder.read(path)`` needs no configuration, takes no lock and writes nothing
(a run still going is read as far as it got); then :meth:`RunFolder.records` and
:meth:`RunFolder.arrays` (numpy), or each part with ``numpy.load`` directly (``index``
names the input of each row).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from smug_opt.filelock import FolderLock

__all__ = ["PARTS_DIR", "RECORDS_FILE", "RUN_FILE", "RunFolder", "RunMismatchError", "model_identity"]

RECORDS_FILE = "records.jsonl"
RUN_FILE = "run.json"
PARTS_DIR = "arrays"
_PART = re.compile(r"part-(\d{6})\.npz")


class RunMismatchError(ValueError):
    """The folder holds a different run (other settings) or something that is not a run."""


def model_identity(model: str) -> dict[str, str]:
    """A model as a run's configuration names it: a file by its resolved path and SHA-256
    digest (the same name in another folder, or the same path rewritten, is another model;
    ``--resume`` refuses it), anything else (an embedded model) by its name."""
    path = Path(model)
    if not path.is_file():
        return {"model": model}
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return {"model": str(path.resolve()), "model_sha256": digest.hexdigest()}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write_bytes(path: Path, write: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class RunFolder:
    """One run's folder (see the module docstring): :meth:`open` it to write a run,
    :meth:`read` it to look at one."""

    def __init__(self, path: Path, config: Mapping[str, Any], records_name: str = RECORDS_FILE) -> None:
        self.path = path
        self.records_file = path / records_name
        self.config = dict(config)
        self._records: list[dict[str, Any]] = []
        self._next_part = 0
        self._lock: FolderLock | None = None
        self.kind: str | None = None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> RunFolder:
        """A run folder, read-only: its ``config`` and ``kind`` from ``run.json``, its
        complete records; nothing is written, repaired or locked, so a folder another
        process is still writing can be read (as far as it got)."""
        out = Path(path)
        try:
            info = json.loads((out / RUN_FILE).read_text())
        except FileNotFoundError:
            raise ValueError(f"{out} is not a smug-opt run folder (no {RUN_FILE})") from None
        except ValueError as exc:
            raise ValueError(f"{out / RUN_FILE} is not valid JSON ({exc})") from None
        folder = cls(out, info.get("config", {}), info.get("records", RECORDS_FILE))
        folder.kind = info.get("kind")
        folder._records = [json.loads(line) for line in _complete_lines(folder.records_file)]
        return folder

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: Mapping[str, Any], *, kind: str,
             resume: bool, overwrite: bool, extra_files: Sequence[str] = (),
             records_name: str = RECORDS_FILE) -> tuple[RunFolder, str]:
        """Open ``path`` for a run of ``kind`` with ``config``; returns the folder and what
        happened to a previous run there (a sentence, '' if there was none).

        A previous run of the same config is continued with ``resume``; with ``overwrite``
        its files (and ``extra_files``) are removed first; otherwise a ValueError says what to do.
        ``records_name``: the records file's name (default ``records.jsonl``). The folder
        stays locked until :meth:`close` (:class:`~smug_opt.filelock.FolderInUseError`
        if another process holds it).
        """
        lock = FolderLock.acquire(path)
        try:
            folder, note = cls._open_locked(Path(path), config, kind=kind, resume=resume,
                                            overwrite=overwrite, extra_files=extra_files,
                                            records_name=records_name)
        except BaseException:
            lock.release()
            raise
        folder._lock = lock
        if lock.stale is not None:
            note = "; ".join(filter(None, [note, f"took over the lock of a run that ended without "
                                                 f"releasing it ({lock.stale})"]))
        return folder, note

    def close(self) -> None:
        """Release the folder's lock (a run folder that ends is closed by its writer)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @classmethod
    def _open_locked(cls, out: Path, config: Mapping[str, Any], *, kind: str, resume: bool,
                     overwrite: bool, extra_files: Sequence[str], records_name: str
                     ) -> tuple[RunFolder, str]:
        run_file, records_file = out / RUN_FILE, out / records_name
        note = ""
        previous = json.loads(run_file.read_text()) if run_file.is_file() else None
        if previous is None and records_file.exists():
            raise RunMismatchError(f"{out} holds {records_name} but no {RUN_FILE}: not a smug-opt "
                                   "run folder; choose another --out")
        if previous is not None and previous.get("kind") != kind:
            raise RunMismatchError(f"{out} holds a {previous.get('kind')!r} run, not {kind!r}; "
                                   "choose another --out")
        if previous is not None and resume:
            unrecorded = sorted(set(config) - set(previous["config"]))
            if unrecorded:
                raise RunMismatchError(
                    f"--resume: {out} was written by an older smug-opt that did not record "
                    f"{', '.join(unrecorded)}, so this run cannot be checked against it; use "
                    "--overwrite to redo it, or another --out")
            differ = sorted(k for k in set(previous["config"]) | set(config)
                            if previous["config"].get(k) != config.get(k))
            if differ:
                raise RunMismatchError(
                    f"--resume: {out} was run with other settings ({', '.join(differ)}: "
                    + "; ".join(f"{k} was {previous['config'].get(k)!r}, now {config.get(k)!r}"
                                for k in differ) + "); use the same flags or another --out")
        elif previous is not None:
            if not overwrite:
                done = sum(1 for _ in _complete_lines(records_file))
                raise RunMismatchError(
                    f"{out} holds a previous {kind} run ({done} inputs done): add --resume to "
                    "continue it, --overwrite to replace it, or choose another --out")
            for name in (RUN_FILE, records_name, PARTS_DIR, *extra_files):
                target = out / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            note = f"replaced the previous {kind} run in {out}"
        out.mkdir(parents=True, exist_ok=True)
        (out / PARTS_DIR).mkdir(exist_ok=True)
        folder = cls(out, config, records_name)
        folder._repair()
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        folder.kind = kind
        info = {"kind": kind, "records": records_name, "config": dict(config),
                "created": previous["created"] if previous and resume else now, "updated": now}
        _atomic_write_bytes(run_file, lambda f: f.write((json.dumps(info, indent=2) + "\n").encode()))
        return folder, note

    def _repair(self) -> None:
        """Drop a half-written last record, temporary files and parts no record points at."""
        records_file = self.records_file
        if records_file.exists():
            data = records_file.read_bytes()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                with open(records_file, "r+b") as f:
                    f.truncate(end)
                    os.fsync(f.fileno())
            self._records = [json.loads(line) for line in data[:end].decode().splitlines() if line]
        used = {r.get("part") for r in self._records}
        parts = self.path / PARTS_DIR
        for item in parts.iterdir():
            match = _PART.fullmatch(item.name)
            if match is None or item.name not in used:
                item.unlink()
            if match is not None:
                self._next_part = max(self._next_part, int(match.group(1)) + 1)

    def records(self) -> list[dict[str, Any]]:
        """Every finished input's record, in the order they finished."""
        return list(self._records)

    def done(self, key: str = "name") -> set[Any]:
        """The ``key`` values of the finished inputs."""
        return {r[key] for r in self._records}

    def add(self, records: Sequence[dict[str, Any]], arrays: Mapping[str, np.ndarray] | None) -> None:
        """Record finished inputs; ``arrays`` go to a new part first, and each record gets
        ``"part"`` (the rows of a part's stacked arrays are the records' ``"row"``)."""
        records = [dict(r) for r in records]
        if arrays:
            name = f"part-{self._next_part:06d}.npz"
            self._next_part += 1
            # numpy's stub takes **arrays as possibly holding allow_pickle (a bool)
            _atomic_write_bytes(self.path / PARTS_DIR / name,
                                lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]
            for r in records:
                r["part"] = name
        text = "".join(json.dumps(r) + "\n" for r in records)
        with open(self.records_file, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        self._records.extend(records)

    def arrays(self, name: str) -> dict[Any, np.ndarray]:
        """Array ``name`` of every finished input that has one, keyed by input index."""
        out: dict[Any, np.ndarray] = {}
        by_part: dict[str, list[dict[str, Any]]] = {}
        for r in self._records:
            if r.get("part") is not None and r.get("row") is not None:
                by_part.setdefault(r["part"], []).append(r)
        for part, rows in by_part.items():
            with np.load(self.path / PARTS_DIR / part, allow_pickle=False) as data:
                values = data[name]
                for r in rows:
                    out[r["index"]] = values[r["row"]]
        return out


def _complete_lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return [line for line in path.read_text().split("\n")[:-1] if line]
