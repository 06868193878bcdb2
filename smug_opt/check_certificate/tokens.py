"""Reading a VIPR file as a stream of whitespace-separated tokens, within a size budget.

The file is read a megabyte at a time (never whole), ``%`` starts a comment that runs to
the end of its line, and a file over the byte budget is refused before anything is read.
Numbers are parsed by strict patterns into Python ints and :class:`~fractions.Fraction`
values, with a cap on their length so no token can cost more than a bounded amount of work.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

__all__ = ["MAX_TOKEN_CHARS", "TokenStream", "parse_ratio", "parse_value"]

MAX_TOKEN_CHARS = 4096
"""The longest number a certificate may write (an exact float64 needs about 1,100 digits)."""

_CHUNK = 1 << 20
_BATCH = 1 << 16
_INT = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def parse_ratio(token: str) -> tuple[int, int] | None:
    """The rational a token writes (``3``, ``-1/2``, ``0.25``, ``1e-3``) as ``(numerator,
    denominator)`` with a positive denominator (not necessarily reduced), or None."""
    if len(token) > MAX_TOKEN_CHARS:
        return None
    if token.isdigit() or (token[:1] in "+-" and token[1:].isdigit()):  # ASCII only: read so
        return int(token), 1
    num, slash, den = token.partition("/")
    if slash:
        if den.isdigit() and (num.isdigit() or (num[:1] in "+-" and num[1:].isdigit())):
            d = int(den)
            return (int(num), d) if d else None
        return None
    decimal = _DECIMAL.fullmatch(token)
    if decimal is None:
        return None
    exponent = decimal.group(2)
    if exponent is not None and abs(int(exponent[1:])) > MAX_TOKEN_CHARS:
        return None
    value = Fraction(token)
    return value.numerator, value.denominator


def parse_value(token: str) -> Fraction | None:
    """The rational a token writes, as a Fraction, or None."""
    ratio = parse_ratio(token)
    return None if ratio is None else Fraction(*ratio)


def _index(token: str, limit: int) -> int | None:
    if token.isdigit() and len(token) <= 18:
        value = int(token)
        if value < limit:
            return value
    return None


def _chunks(path: Path) -> Iterator[str]:
    """The file's text in pieces that end at a line break (comments removed); a long line
    is gathered block by block, never copied once per block."""
    with open(path, "rb") as handle:
        parts: list[bytes] = []
        while block := handle.read(_CHUNK):
            cut = block.rfind(b"\n")
            if cut < 0:
                parts.append(block)
                continue
            yield _text(path, b"".join([*parts, block[: cut + 1]]))
            parts = [block[cut + 1:]]
        if any(parts):
            yield _text(path, b"".join(parts))


def _text(path: Path, data: bytes) -> str:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a VIPR certificate (it has non-ASCII bytes)") from None
    if "%" in text:
        text = "\n".join(line.partition("%")[0] for line in text.split("\n"))
    return text


class TokenStream:
    """The tokens of a VIPR file, read lazily; every read names what it expected."""

    def __init__(self, path: Path, *, max_bytes: int) -> None:
        size = path.stat().st_size
        if size > max_bytes:
            raise ValueError(f"{path}: certificate of {size:,} bytes is over the limit of "
                             f"{max_bytes:,} bytes (raise --max-bytes if it is genuine)")
        self.path = path
        self._tokens = (token for chunk in _chunks(path) for token in chunk.split())
        self._pending: list[str] = []

    def next(self, what: str) -> str:
        """The next token; ``what`` names it in the error when the file ends."""
        if self._pending:
            return self._pending.pop()
        token = next(self._tokens, None)
        if token is None:
            raise ValueError(f"{self.path}: the file ends where {what} was expected")
        return token

    def push_back(self, token: str) -> None:
        """Return ``token`` to the stream: the next read gives it again."""
        self._pending.append(token)

    def at_end(self) -> bool:
        """True when no token is left (a token peeked at stays in the stream)."""
        if self._pending:
            return False
        token = next(self._tokens, None)
        if token is None:
            return True
        self._pending.append(token)
        return False

    def keyword(self, word: str) -> None:
        """Read the keyword ``word`` or fail naming what was found instead."""
        token = self.next(word)
        if token != word:
            raise ValueError(f"{self.path}: expected {word!r}, found {token[:40]!r}")

    def count(self, what: str) -> int:
        """A non-negative integer."""
        token = self.next(what)
        if len(token) > 18 or not _INT.fullmatch(token) or int(token) < 0:
            raise ValueError(f"{self.path}: {what} must be a non-negative integer, "
                             f"found {token[:40]!r}")
        return int(token)

    def index(self, what: str, limit: int) -> int:
        """An integer index in ``0..limit-1``."""
        token = self.next(what)
        value = _index(token, limit)
        if value is None:
            raise self._bad_index(what, limit, token)
        return value

    def _bad_index(self, what: str, limit: int, token: str) -> ValueError:
        return ValueError(f"{self.path}: {what} must be an index in 0..{limit - 1}, "
                          f"found {token[:40]!r}")

    def pairs(self, count: int, what: str, limit: int) -> list[tuple[int, int, int]]:
        """``count`` pairs ``index value`` as ``(index, numerator, denominator)``: distinct
        indices in ``0..limit-1``, rational values; read in batches (the hot path), so a
        declared count beyond the file costs no more than the file."""
        out: list[tuple[int, int, int]] = []
        while len(out) < count:
            out += self._batch(min(count - len(out), _BATCH), what, limit)
        seen: set[int] = set()
        for j, _, _ in out:
            if j in seen:
                raise ValueError(f"{self.path}: {what} lists index {j} twice")
            seen.add(j)
        return out

    def _batch(self, count: int, what: str, limit: int) -> list[tuple[int, int, int]]:
        tokens = self._pending[::-1]
        self._pending = []
        tokens += itertools.islice(self._tokens, 2 * count - len(tokens))
        if len(tokens) < 2 * count:
            raise ValueError(f"{self.path}: the file ends inside {what}")
        self._pending = tokens[2 * count:][::-1]
        out = []
        for k in range(count):
            token, text = tokens[2 * k], tokens[2 * k + 1]
            j = _index(token, limit)
            if j is None:
                raise self._bad_index(f"an index in {what}", limit, token)
            ratio = parse_ratio(text)
            if ratio is None:
                raise ValueError(f"{self.path}: a value in {what} must be a rational number (like "
                                 f"3, -1/2, 0.25), found {text[:40]!r}")
            out.append((j, *ratio))
        return out

    def integer(self, what: str) -> int:
        """Any integer (small: an index field that may be -1)."""
        token = self.next(what)
        if len(token) > 18 or not _INT.fullmatch(token):
            raise ValueError(f"{self.path}: {what} must be an integer, found {token[:40]!r}")
        return int(token)

    def value(self, what: str) -> Fraction:
        """A rational value."""
        token = self.next(what)
        value = parse_value(token)
        if value is None:
            raise ValueError(f"{self.path}: {what} must be a rational number (like 3, -1/2, "
                             f"0.25), found {token[:40]!r}")
        return value
