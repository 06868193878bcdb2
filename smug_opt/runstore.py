"""A resumable run folder that survives a kill: records appended as JSON lines (one per
input), arrays in ``.npz`` parts written atomically, and ``run.json`` saying what was run.

Order of writes for a batch of finished inputs: the part's arrays (temporary file, fsync,
rename), then the records that point at them (one append, fsync). A kill at any moment
leaves at worst a half-written last line (dropped on reopening) or a part no record points
at (deleted on reopening): every input is recorded once or not at all, and a resumed run
redoes exactly the ones that are not.

Reading: :meth:`RunFolder.records` and :meth:`RunFolder.arrays` (numpy), or each part with
``numpy.load`` directly (``index`` names the input of each row).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PARTS_DIR", "RECORDS_FILE", "RUN_FILE", "RunFolder", "RunMismatchError"]

RECORDS_FILE = "records.jsonl"
RUN_FILE = "run.json"
PARTS_DIR = "arrays"
_PART = re.compile(r"part-(\d{6})\.npz")


class RunMismatchError(ValueError):
    """The folder holds a different run (other settings) or something that is not a run."""


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
    """One run's folder (see the module docstring). Open it with :meth:`open`."""

    def __init__(self, path: Path, config: Mapping[str, Any], records_name: str = RECORDS_FILE) -> None:
        self.path = path
        self.records_file = path / records_name
        self.config = dict(config)
        self._records: list[dict[str, Any]] = []
        self._next_part = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str], config: Mapping[str, Any], *, kind: str,
             resume: bool, overwrite: bool, extra_files: Sequence[str] = (),
             records_name: str = RECORDS_FILE) -> tuple[RunFolder, str]:
        """Open ``path`` for a run of ``kind`` with ``config``; returns the folder and what
        happened to a previous run there (a sentence, '' if there was none).

        A previous run of the same config is continued with ``resume``; with ``overwrite``
        its files (and ``extra_files``) are removed first; otherwise a ValueError says what to do.
        ``records_name``: the records file's name (default ``records.jsonl``).
        """
        out = Path(path)
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
        info = {"kind": kind, "config": dict(config),
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
            _atomic_write_bytes(self.path / PARTS_DIR / name, lambda f: np.savez(f, **arrays))
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
