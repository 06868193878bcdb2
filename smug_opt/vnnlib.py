"""VNN-LIB properties as the verification competitions write them: an input box and an
unsafe output region (a disjunction of conjunctions of linear comparisons of the outputs),
or several such *cases* where input bounds stand inside an ``or``.

A property is *violated* (``sat``) when some input in a case's box gives outputs in that
case's unsafe region. Read with :func:`read_vnnlib_cases` (plain or gzipped file,
size-limited before and while decompressing) or :func:`parse_vnnlib_cases` (text);
:func:`read_vnnlib` and :func:`parse_vnnlib` read a property of one box. Supported:
``(declare-const X_i Real)`` and ``(declare-const Y_j Real)``; asserts of ``<=``, ``>=``,
``<``, ``>`` (and ``=``) between linear terms (numbers, variables, ``+``, ``-``, ``*`` by a
number) combined with ``and``/``or``, where a comparison over inputs bounds one ``X`` by a
number. Anything else (an input constraint over several inputs, a comparison mixing inputs
and outputs, other sorts or commands) is refused with one line naming the construct and line.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from smug_opt.vnnlib_syntax import MAX_DISJUNCTS, Case, Row, VnnlibError, read_cases

__all__ = ["MAX_DISJUNCTS", "MAX_FILE_BYTES", "Conjunct", "VnnlibError", "VnnlibSpec",
           "parse_vnnlib", "parse_vnnlib_cases", "read_vnnlib", "read_vnnlib_cases",
           "read_vnnlib_text", "resolve_vnnlib_path"]

MAX_FILE_BYTES = 256 * 2**20
"""The largest file (compressed or not) and the largest decompressed text read."""


@dataclass(frozen=True, eq=False)
class Conjunct:
    """Rows ``matrix @ y <= rhs`` (``<`` where ``strict``) over the outputs ``y``."""

    matrix: np.ndarray
    rhs: np.ndarray
    strict: np.ndarray

    def holds(self, y: np.ndarray) -> bool:
        """Whether float64 outputs ``y`` satisfy every row."""
        lhs = self.matrix @ np.asarray(y, dtype=np.float64)
        return bool(np.all(np.where(self.strict, lhs < self.rhs, lhs <= self.rhs)))


@dataclass(frozen=True, eq=False)
class VnnlibSpec:
    """An input box ``lo <= x <= hi`` (flat, model input order) and the unsafe region:
    outputs satisfying any one of ``disjuncts``.

    ``lo``/``hi`` bound the float64 inputs in the box; ``closed_lo``/``closed_hi``, where
    given, its closure over the reals (:attr:`closure`). They differ where a bound is strict: ``x < v``
    holds for the floats ``x <= below(v)`` and has the closure ``x <= v``. Bounds are
    computed over the closure, so an ``unsat`` covers every real input; a counterexample
    is a float64 point of ``lo``..``hi``."""

    lo: np.ndarray
    hi: np.ndarray
    disjuncts: tuple[Conjunct, ...]
    num_outputs: int
    closed_lo: np.ndarray | None = None
    closed_hi: np.ndarray | None = None

    @property
    def closure(self) -> tuple[np.ndarray, np.ndarray]:
        """The box's closure over the reals (``lo``, ``hi`` where no bound is strict)."""
        return (self.lo if self.closed_lo is None else self.closed_lo,
                self.hi if self.closed_hi is None else self.closed_hi)

    @property
    def num_inputs(self) -> int:
        return int(self.lo.size)

    def unsafe(self, y: np.ndarray) -> bool:
        """Whether float64 outputs ``y`` lie in the unsafe region."""
        return any(d.holds(y) for d in self.disjuncts)


def read_vnnlib(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> VnnlibSpec:
    """Read a ``.vnnlib`` file of one input box, gzipped or not (recognised by content). If
    ``path`` does not exist but ``path.gz`` does, that is read (the competitions' csv files
    name the decompressed file)."""
    path = resolve_vnnlib_path(path)
    return parse_vnnlib(read_vnnlib_text(path, max_bytes=max_bytes), source=path)


def read_vnnlib_cases(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> tuple[VnnlibSpec, ...]:
    """Read a ``.vnnlib`` file as :func:`read_vnnlib` does: one :class:`VnnlibSpec` per input
    box of the property (one, unless input bounds stand inside an ``or``)."""
    path = resolve_vnnlib_path(path)
    return parse_vnnlib_cases(read_vnnlib_text(path, max_bytes=max_bytes), source=path)


def resolve_vnnlib_path(path: str | Path) -> Path:
    """``path``, or ``path.gz`` where only that exists; FileNotFoundError if neither does."""
    path = Path(path)
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    if not path.is_file():
        raise FileNotFoundError(f"no VNN-LIB file {str(path)!r}")
    return path


def read_vnnlib_text(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of a plain or gzipped (recognised by content) file of at most ``max_bytes``
    bytes on disk and decompressed. It is decompressed a megabyte at a time, so a gzip bomb
    costs at most ``max_bytes`` of memory before it is refused."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise VnnlibError(f"{path}: {size} bytes, more than the {max_bytes} this reader accepts")
    with open(path, "rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    data = bytearray()
    try:
        with (gzip.open if gzipped else open)(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                data += chunk
                if len(data) > max_bytes:
                    raise VnnlibError(f"{path}: decompresses to more than {max_bytes} bytes")
    except (OSError, EOFError, zlib.error) as exc:
        raise VnnlibError(f"{path}: not a readable {'gzip' if gzipped else 'text'} file ({exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VnnlibError(f"{path}: not UTF-8 text ({exc})") from None


_CHUNK = 2**20


def parse_vnnlib_cases(text: str, *, source: str | Path | None = None) -> tuple[VnnlibSpec, ...]:
    """The property written in VNN-LIB ``text`` (see the module docstring), one
    :class:`VnnlibSpec` per input box; errors name ``source`` where given."""
    try:
        cases, n_out = read_cases(text)
    except VnnlibError as exc:
        if source is None:
            raise
        raise VnnlibError(f"{source}: {exc}") from None
    return tuple(_spec(case, n_out) for case in cases)


def parse_vnnlib(text: str, *, source: str | Path | None = None) -> VnnlibSpec:
    """The property of one input box written in VNN-LIB ``text``; a property with several
    boxes (input bounds inside an ``or``) is refused, naming :func:`parse_vnnlib_cases`."""
    cases = parse_vnnlib_cases(text, source=source)
    if len(cases) > 1:
        where = f"{source}: " if source is not None else ""
        raise VnnlibError(f"{where}the property has {len(cases)} input boxes (input bounds inside "
                          f"an 'or'): read it with parse_vnnlib_cases / read_vnnlib_cases")
    return cases[0]


def _spec(case: Case, n_out: int) -> VnnlibSpec:
    strict = not (np.array_equal(case.lo, case.closed_lo) and np.array_equal(case.hi, case.closed_hi))
    return VnnlibSpec(lo=_frozen(case.lo), hi=_frozen(case.hi),
                      disjuncts=tuple(_conjunct(rows, n_out) for rows in case.disjuncts),
                      num_outputs=n_out, closed_lo=_frozen(case.closed_lo) if strict else None,
                      closed_hi=_frozen(case.closed_hi) if strict else None)


def _conjunct(rows: tuple[Row, ...], n_out: int) -> Conjunct:
    matrix = np.zeros((len(rows), n_out))
    for r, (coefs, _, _) in enumerate(rows):
        for index, c in coefs.items():
            matrix[r, index] = c
    return Conjunct(matrix=_frozen(matrix), rhs=_frozen(np.array([r[1] for r in rows])),
                    strict=_frozen(np.array([r[2] for r in rows], dtype=bool)))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.setflags(write=False)
    return a
