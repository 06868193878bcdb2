"""VNN-LIB properties as the verification competitions write them: an input box and an
unsafe output region (a disjunction of conjunctions of linear comparisons of the outputs).

A property is *violated* (``sat``) when some input in the box gives outputs in the unsafe
region. Read with :func:`read_vnnlib` (plain or gzipped file, size-limited before and while
decompressing) or :func:`parse_vnnlib` (text). Supported: ``(declare-const X_i Real)`` and
``(declare-const Y_j Real)``; asserts of ``<=``, ``>=``, ``<``, ``>`` (and ``=`` on the
outputs) between linear terms (numbers, variables, ``+``, ``-``, ``*`` by a number);
input asserts that bound one ``X`` by a number; output asserts combining comparisons with
``and``/``or``. Anything else (an input constraint over several inputs, inputs inside an
``or``, other sorts or commands) is refused with one line naming the construct and line.
"""

from __future__ import annotations

import gzip
import itertools
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["MAX_DISJUNCTS", "MAX_FILE_BYTES", "Conjunct", "VnnlibError", "VnnlibSpec",
           "parse_vnnlib", "read_vnnlib", "read_vnnlib_text", "resolve_vnnlib_path"]

MAX_FILE_BYTES = 256 * 2**20
"""The largest file (compressed or not) and the largest decompressed text read."""

MAX_DISJUNCTS = 10_000
"""The largest unsafe region (disjuncts after conjoining the output asserts) accepted."""

_VARIABLE = re.compile(r"^([XY])_(\d+)$")
_COMPARISONS = ("<=", ">=", "<", ">", "=")


class VnnlibError(ValueError):
    """A VNN-LIB file this reader refuses; the message names the construct and its line."""


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
    outputs satisfying any one of ``disjuncts``."""

    lo: np.ndarray
    hi: np.ndarray
    disjuncts: tuple[Conjunct, ...]
    num_outputs: int

    @property
    def num_inputs(self) -> int:
        return int(self.lo.size)

    def unsafe(self, y: np.ndarray) -> bool:
        """Whether float64 outputs ``y`` lie in the unsafe region."""
        return any(d.holds(y) for d in self.disjuncts)


def read_vnnlib(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> VnnlibSpec:
    """Read a ``.vnnlib`` file, gzipped or not (recognised by content). If ``path`` does not
    exist but ``path.gz`` does, that is read (the competitions' csv files name the
    decompressed file)."""
    path = resolve_vnnlib_path(path)
    return parse_vnnlib(read_vnnlib_text(path, max_bytes=max_bytes), source=path)


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


@dataclass(frozen=True)
class _Node:
    """An atom (``value`` a str) or a list (``value`` a tuple), with its line."""

    value: str | tuple[_Node, ...]
    line: int

    @property
    def head(self) -> str | None:
        if isinstance(self.value, tuple) and self.value and isinstance(self.value[0].value, str):
            return self.value[0].value
        return None

    @property
    def items(self) -> tuple[_Node, ...]:
        """A list's elements; an atom has none."""
        return self.value if isinstance(self.value, tuple) else ()


def _tokens(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split(";", 1)[0]
        for token in re.findall(r"\(|\)|[^\s()]+", line):
            out.append((token, number))
    return out


def _parse_sexprs(text: str) -> list[_Node]:
    stack: list[tuple[int, list[_Node]]] = [(0, [])]
    for token, line in _tokens(text):
        if token == "(":
            stack.append((line, []))
        elif token == ")":
            if len(stack) == 1:
                raise VnnlibError(f"line {line}: unbalanced ')'")
            start, items = stack.pop()
            stack[-1][1].append(_Node(tuple(items), start))
        else:
            stack[-1][1].append(_Node(token, line))
    if len(stack) > 1:
        raise VnnlibError(f"line {stack[-1][0]}: '(' never closed")
    return stack[0][1]


class _Reader:
    """Collects declarations, the box and the output asserts while walking the commands."""

    def __init__(self) -> None:
        self.declared: dict[str, set[int]] = {"X": set(), "Y": set()}
        self.bounds: list[tuple[int, float, float, int]] = []  # (index, lo, hi, line)
        self.asserts: list[list[list[tuple[dict[int, float], float, bool]]]] = []  # DNFs

    def command(self, node: _Node) -> None:
        if not isinstance(node.value, tuple):
            raise VnnlibError(f"line {node.line}: expected a command in parentheses, got {node.value!r}")
        head = node.head
        if head == "declare-const":
            self._declare(node)
        elif head == "assert":
            if len(node.value) != 2:
                raise VnnlibError(f"line {node.line}: assert takes one formula")
            self._assert(node.value[1])
        else:
            raise VnnlibError(f"line {node.line}: unsupported command {head!r} "
                              f"(only declare-const and assert)")

    def _declare(self, node: _Node) -> None:
        parts = [n.value for n in node.items if isinstance(n.value, str)]
        if len(parts) != 3 or len(node.items) != 3:
            raise VnnlibError(f"line {node.line}: declare-const takes a name and a sort")
        name, sort = parts[1], parts[2]
        match = _VARIABLE.match(name)
        if not match:
            raise VnnlibError(f"line {node.line}: variable {name!r} is not X_i (input) or Y_j (output)")
        if sort != "Real":
            raise VnnlibError(f"line {node.line}: sort {sort!r} of {name} unsupported (only Real)")
        self.declared[match.group(1)].add(int(match.group(2)))

    def _variable(self, name: str, line: int) -> tuple[str, int] | None:
        match = _VARIABLE.match(name)
        if not match:
            return None
        kind, index = match.group(1), int(match.group(2))
        if index not in self.declared[kind]:
            raise VnnlibError(f"line {line}: {name} is used but not declared")
        return kind, index

    def _term(self, node: _Node) -> tuple[dict[tuple[str, int], float], float]:
        """A linear term as (coefficients by variable, constant)."""
        if isinstance(node.value, str):
            var = self._variable(node.value, node.line)
            if var is not None:
                return {var: 1.0}, 0.0
            return {}, _number(node)
        head, args = node.head, node.value[1:]
        if head in ("+", "-") and args:
            terms = [self._term(a) for a in args]
            if head == "-" and len(terms) == 1:
                terms = [({}, 0.0), terms[0]]
            coefs: dict[tuple[str, int], float] = dict(terms[0][0])
            const = terms[0][1]
            sign = -1.0 if head == "-" else 1.0
            for c, k in terms[1:]:
                for var, v in c.items():
                    coefs[var] = coefs.get(var, 0.0) + sign * v
                const += sign * k
            return coefs, const
        if head == "*" and len(args) >= 2:
            terms = [self._term(a) for a in args]
            variable = [t for t in terms if t[0]]
            if len(variable) > 1:
                raise VnnlibError(f"line {node.line}: product of variables is not linear")
            factor = float(np.prod([k for c, k in terms if not c]))
            if not variable:
                return {}, factor
            c, k = variable[0]
            return {var: v * factor for var, v in c.items()}, k * factor
        raise VnnlibError(f"line {node.line}: unsupported term {_show(node)}")

    def _comparison(self, node: _Node) -> tuple[dict[tuple[str, int], float], float, str]:
        """``lhs - rhs`` as (coefficients, constant) and the relation to 0."""
        relation = node.head
        if relation is None or len(node.items) != 3:
            raise VnnlibError(f"line {node.line}: {node.head} takes two terms, got {_show(node)}")
        (cl, kl), (cr, kr) = self._term(node.items[1]), self._term(node.items[2])
        coefs = dict(cl)
        for var, v in cr.items():
            coefs[var] = coefs.get(var, 0.0) - v
        return {v: c for v, c in coefs.items() if c != 0.0}, kl - kr, relation

    def _assert(self, node: _Node) -> None:
        if node.head in _COMPARISONS:
            coefs, const, relation = self._comparison(node)
            kinds = {kind for kind, _ in coefs}
            if kinds == {"X"}:
                self._input_bound(coefs, const, relation, node.line)
                return
        if _mentions(node, "X"):
            raise VnnlibError(f"line {node.line}: input constraint {_show(node)} is not a bound "
                              f"on one input (only boxes are supported)")
        self.asserts.append(self._dnf(node))

    def _input_bound(self, coefs: dict[tuple[str, int], float], const: float, relation: str,
                     line: int) -> None:
        if len(coefs) != 1:
            raise VnnlibError(f"line {line}: input constraint over {len(coefs)} inputs "
                              f"(only boxes, one input per bound, are supported)")
        ((_, index), a), = coefs.items()
        value = -const / a + 0.0  # a·x + const REL 0 (+ 0.0: no -0.0)
        if -const != value * a:
            raise VnnlibError(f"line {line}: input bound with coefficient {a!r} is not exact in float64")
        if relation == "=":
            self.bounds.append((index, value, value, line))
            return
        upper = (relation in ("<=", "<")) == (a > 0)
        if relation in ("<", ">"):
            value = np.nextafter(value, -np.inf if upper else np.inf)  # x < v on reals: x <= below(v)
        self.bounds.append((index, -np.inf, value, line) if upper else (index, value, np.inf, line))

    def _dnf(self, node: _Node) -> list[list[tuple[dict[int, float], float, bool]]]:
        """The formula as a disjunction of conjunctions of rows ``coef·y <= rhs`` (``<``)."""
        head = node.head
        if head in _COMPARISONS:
            coefs, const, relation = self._comparison(node)
            row = {index: c for (_, index), c in coefs.items()}
            if relation == "=":
                return [[(row, -const, False), ({i: -c for i, c in row.items()}, const, False)]]
            sign = 1.0 if relation in ("<=", "<") else -1.0
            return [[({i: sign * c for i, c in row.items()}, -sign * const, relation in ("<", ">"))]]
        if head in ("and", "or") and len(node.items) >= 2:
            parts = [self._dnf(child) for child in node.items[1:]]
            if head == "or":
                out = [conj for part in parts for conj in part]
            else:
                if np.prod([float(len(p)) for p in parts]) > MAX_DISJUNCTS:
                    raise VnnlibError(f"line {node.line}: 'and' of disjunctions expands past "
                                      f"{MAX_DISJUNCTS} disjuncts")
                out = [list(itertools.chain.from_iterable(combo)) for combo in itertools.product(*parts)]
            if len(out) > MAX_DISJUNCTS:
                raise VnnlibError(f"line {node.line}: more than {MAX_DISJUNCTS} disjuncts")
            return out
        raise VnnlibError(f"line {node.line}: unsupported formula {_show(node)} "
                          f"(comparisons, and, or)")

    def spec(self) -> VnnlibSpec:
        n_in, n_out = _count(self.declared["X"], "X"), _count(self.declared["Y"], "Y")
        lo, hi = np.full(n_in, -np.inf), np.full(n_in, np.inf)
        for index, low, high, _ in self.bounds:
            lo[index] = max(lo[index], low)
            hi[index] = min(hi[index], high)
        empty = np.flatnonzero(lo > hi)
        if empty.size:
            raise VnnlibError(f"input X_{empty[0]} has lower bound {float(lo[empty[0]])!r} above its upper "
                              f"bound {float(hi[empty[0]])!r} (an empty box)")
        unbounded = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
        if unbounded.size:
            raise VnnlibError(f"input X_{unbounded[0]} has no finite lower and upper bound "
                              f"({unbounded.size} input(s) unbounded)")
        if not self.asserts:
            raise VnnlibError("no output constraint (the unsafe region is missing)")
        region: list[list[tuple[dict[int, float], float, bool]]] = [[]]
        for dnf in self.asserts:
            if len(region) * len(dnf) > MAX_DISJUNCTS:
                raise VnnlibError(f"the output asserts expand past {MAX_DISJUNCTS} disjuncts")
            region = [a + b for a in region for b in dnf]
        return VnnlibSpec(lo=_frozen(lo), hi=_frozen(hi),
                          disjuncts=tuple(_conjunct(rows, n_out) for rows in region),
                          num_outputs=n_out)


def parse_vnnlib(text: str, *, source: str | Path | None = None) -> VnnlibSpec:
    """The property written in VNN-LIB ``text`` (see the module docstring); errors name
    ``source`` where given."""
    try:
        reader = _Reader()
        for node in _parse_sexprs(text):
            reader.command(node)
        return reader.spec()
    except VnnlibError as exc:
        if source is None:
            raise
        raise VnnlibError(f"{source}: {exc}") from None


def _number(node: _Node) -> float:
    text = str(node.value)
    try:
        value = float(text)
    except ValueError:
        raise VnnlibError(f"line {node.line}: {text!r} is neither a number nor a declared "
                          f"variable X_i/Y_j") from None
    if not np.isfinite(value):
        raise VnnlibError(f"line {node.line}: constant {text!r} is not finite")
    return value


def _mentions(node: _Node, kind: str) -> bool:
    if isinstance(node.value, str):
        return node.value.startswith(f"{kind}_")
    return any(_mentions(child, kind) for child in node.value)


def _count(indices: set[int], kind: str) -> int:
    n = max(indices, default=-1) + 1
    if n == 0:
        raise VnnlibError(f"no {kind}_ variable declared")
    if len(indices) != n:
        missing = min(set(range(n)) - indices)
        raise VnnlibError(f"{kind}_{missing} is not declared but {kind}_{n - 1} is")
    return n


def _conjunct(rows: list[tuple[dict[int, float], float, bool]], n_out: int) -> Conjunct:
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


def _show(node: _Node, limit: int = 60) -> str:
    def text(n: _Node) -> str:
        return n.value if isinstance(n.value, str) else "(" + " ".join(text(c) for c in n.value) + ")"

    out = text(node)
    return out if len(out) <= limit else out[: limit - 3] + "..."
