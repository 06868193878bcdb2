"""Inter-process locks: a blocking one for caches that several processes may fill, and a
refusing one for run folders, which one writer at a time may extend."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, ClassVar

__all__ = ["FOLDER_LOCK_FILE", "FolderInUseError", "FolderLock", "LockHolder", "exclusive_lock"]

FOLDER_LOCK_FILE = ".lock"


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (POSIX ``flock``; elsewhere rely on the
    callers' atomic renames alone)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class FolderInUseError(RuntimeError):
    """Another live process holds the folder's lock."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a folder's lock."""

    host: str
    pid: int
    started: str

    def __str__(self) -> str:
        return f"host {self.host}, pid {self.pid}, started {self.started}"


class FolderLock:
    """An exclusive, non-blocking lock on a folder (``FOLDER_LOCK_FILE`` inside it), held
    until :meth:`release` or until the holding process ends, however it ends: the kernel
    drops a dead holder's ``flock``, so a stale lock is simply taken over (``stale`` then
    names the holder that died with it). The lock file names the holder while it is held,
    for the refusal's message. Re-entrant within a process (a stress run holds the folder
    its benchmark run locks again). ``flock`` works across hosts on NFSv4 and most cluster
    file systems."""

    _held: ClassVar[dict[Path, FolderLock]] = {}

    def __init__(self, folder: Path, handle: IO[str], stale: LockHolder | None) -> None:
        self.folder = folder
        self.stale = stale
        self._handle: IO[str] | None = handle
        self._depth = 1

    @classmethod
    def acquire(cls, folder: str | os.PathLike[str]) -> FolderLock:
        """Lock ``folder`` (created if missing) or raise :class:`FolderInUseError` naming
        the holder."""
        import fcntl

        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        held = cls._held.get(path.resolve())
        if held is not None:
            held._depth += 1
            return held
        handle = open(path / FOLDER_LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            handle.close()
            who = str(holder) if holder else "it is starting"
            raise FolderInUseError(f"{path} is in use by another smug-opt run ({who}); wait for "
                                   "it to end or choose another --out") from None
        stale = _read_holder(handle)
        me = LockHolder(socket.gethostname(), os.getpid(),
                        datetime.now(timezone.utc).isoformat(timespec="seconds"))
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(me.__dict__) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        lock = cls._held[path.resolve()] = cls(path, handle, stale)
        return lock

    def release(self) -> None:
        """Give the lock up. The lock file is emptied (so a holder's name found there later
        means it died holding it) but stays: removing it would race a new holder."""
        self._depth -= 1
        if self._depth > 0 or self._handle is None:
            return
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.close()
        self._handle = None
        self._held.pop(self.folder.resolve(), None)

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(handle: IO[str]) -> LockHolder | None:
    handle.seek(0)
    try:
        return LockHolder(**json.loads(handle.read()))
    except (ValueError, TypeError):
        return None
