"""What smug-opt writes where: results on stdout, one-line messages on stderr, no noise.

Native libraries print banners and log lines straight to the file descriptors (TensorFlow's
absl/oneDNN lines, HiGHS's banner): :func:`silenced_stderr` swallows them around an import,
and :func:`results_only_stdout` points descriptor 1 at stderr so that only what the command
prints through ``sys.stdout`` reaches a pipe such as ``> table.md``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["one_line_warnings", "results_only_stdout", "silenced_stderr", "silenced_stdout", "use_colour"]


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Swallow what native code writes to descriptor 2; replayed if the block raises."""
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (e.g. a daemon): nothing to silence
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            os.write(2, sink.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@contextlib.contextmanager
def silenced_stdout() -> Iterator[None]:
    """Send what native code writes to descriptor 1 to the null device (a solver's banner)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1: nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
              line: str | None = None) -> str:
    return f"smug-opt: warning: {message}\n"


def one_line_warnings() -> None:
    """Print Python warnings as ``smug-opt: warning: ...`` without source file and line."""
    warnings.formatwarning = _one_line  # type: ignore[assignment]


@contextlib.contextmanager
def results_only_stdout() -> Iterator[None]:
    """Within the block, ``sys.stdout`` still reaches the real stdout, while anything else
    writing to descriptor 1 (native libraries, child processes) goes to stderr."""
    try:
        real = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):  # e.g. captured by a test harness
        real = False
    if not real:
        yield
        return
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    original = sys.stdout
    stream: IO[Any] = io.TextIOWrapper(os.fdopen(saved, "wb", buffering=0), encoding="utf-8",
                                       line_buffering=True, write_through=True)
    os.dup2(2, 1)
    sys.stdout = stream
    try:
        yield
    finally:
        stream.flush()
        os.dup2(saved, 1)
        sys.stdout = original
        stream.close()


def use_colour(stream: IO[Any] | None = None) -> bool:
    """Whether ``stream`` (default stdout) is a terminal that wants ANSI colours (NO_COLOR unset)."""
    stream = stream if stream is not None else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ
