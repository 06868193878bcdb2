"""Output paths: checked before any work starts, and a run's files never mixed with another's."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["SINGLE_RUN_FILES", "check_out_dir", "check_out_file", "replace_run_files", "write_single_run"]

SINGLE_RUN_FILES = ("record.json", "mask.npy", "saliency.npy", "cell_mask.npy", "overlay.png",
                    "explanation.html", "fixed.npy")
"""What a single explain writes: a rerun into the same folder replaces all of them, and a
batch over a folder never takes them as inputs."""


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def check_out_dir(path: str | os.PathLike[str], *, flag: str = "--out") -> Path:
    """``path`` as an output folder we can create or write, or a ValueError naming the flag."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {out} is a file, not a folder: give a folder path")
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise ValueError(f"{flag} {out} is under {existing}, which is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {out}: cannot write in {existing} (permission denied)")
    return out


def check_out_file(path: str | os.PathLike[str], *, flag: str = "--out") -> Path:
    """``path`` as an output file we can create or replace, or a ValueError naming the flag."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} {out} is a folder: give a file path")
    check_out_dir(out.parent if str(out.parent) else Path("."), flag=f"{flag}'s folder")
    return out


def replace_run_files(staged: Path, out: Path, run_files: Iterable[str]) -> list[str]:
    """Move every file of the folder ``staged`` into ``out``, first removing the previous
    run's ``run_files`` from ``out`` (so no stale mask or picture stays beside new ones).
    Returns the names of the previous run's files that were removed."""
    out.mkdir(parents=True, exist_ok=True)
    removed = []
    for name in run_files:
        old = out / name
        if old.is_file() or old.is_symlink():
            old.unlink()
            removed.append(name)
        elif old.is_dir():
            shutil.rmtree(old)
            removed.append(name)
    for item in sorted(staged.iterdir()):
        os.replace(item, out / item.name)
    staged.rmdir()
    return removed


def write_single_run(out: Path, fill: Callable[[Path], object]) -> list[str]:
    """A single explain's files written by ``fill`` into a staging folder beside ``out``, then
    moved into ``out`` in place of the previous run's (:func:`replace_run_files`), so an
    interrupted write leaves the previous run whole. Returns the names of the files removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fill(staged)
        return replace_run_files(staged, out, SINGLE_RUN_FILES)
    finally:
        if staged.exists():
            shutil.rmtree(staged)
