"""The VNN-LIB language as the verification competitions write it: s-expressions, the
declarations, linear terms and comparisons, read into *cases*: input boxes, each with the
unsafe output region that goes with it (rows ``coef·y <= rhs``, ``<`` where strict, in
disjunctive normal form).

A file whose asserts put input bounds inside an ``or`` (VNN-COMP 2022's ACAS Xu property 6,
or ``(or (and <box> <outputs>) ...)``) has several cases; the property is violated when some
case is. :mod:`smug_opt.vnnlib` builds the public :class:`~smug_opt.vnnlib.VnnlibSpec` from them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["MAX_DISJUNCTS", "Case", "Row", "VnnlibError", "read_cases"]

MAX_DISJUNCTS = 10_000
"""The largest unsafe region (disjuncts after conjoining the asserts, over all cases) accepted."""

_VARIABLE = re.compile(r"^([XY])_(\d+)$")
_COMPARISONS = ("<=", ">=", "<", ">", "=")

Row = tuple[dict[int, float], float, bool]
"""An output row: coefficients by output index, right-hand side, strict."""


class Bound(NamedTuple):
    """An input bound on ``X_i`` (``i = input_index``) from ``line``: ``low``/``high`` bound
    the float64 inputs that satisfy it, ``closed_low``/``closed_high`` its closure over the
    reals (they differ for a strict bound: ``x < v`` is ``x <= below(v)`` on floats,
    ``x <= v`` in the closure)."""

    input_index: int
    low: float
    high: float
    line: int
    closed_low: float
    closed_high: float


class VnnlibError(ValueError):
    """A VNN-LIB file this reader refuses; the message names the construct and its line."""


@dataclass(frozen=True)
class Case:
    """An input box and the unsafe region over the outputs that goes with it: ``lo``/``hi``
    bound the float64 inputs in the box, ``closed_lo``/``closed_hi`` its closure over the reals."""

    lo: np.ndarray
    hi: np.ndarray
    disjuncts: tuple[tuple[Row, ...], ...]
    closed_lo: np.ndarray
    closed_hi: np.ndarray


@dataclass(frozen=True)
class _Clause:
    """A conjunction of output rows and input bounds (one disjunct before grouping)."""

    rows: tuple[Row, ...] = ()
    bounds: tuple[Bound, ...] = ()

    def __add__(self, other: _Clause) -> _Clause:
        return _Clause(self.rows + other.rows, self.bounds + other.bounds)


def read_cases(text: str) -> tuple[tuple[Case, ...], int]:
    """The cases of VNN-LIB ``text`` (boxes in the order first met) and the number of outputs."""
    reader = _Reader()
    for node in _parse_sexprs(text):
        reader.command(node)
    return reader.cases(), _count(reader.declared["Y"], "Y")


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
    """Collects declarations, the top-level box and the asserts (in disjunctive normal form)
    while walking the commands."""

    def __init__(self) -> None:
        self.declared: dict[str, set[int]] = {"X": set(), "Y": set()}
        self.bounds: list[Bound] = []
        self.asserts: list[list[_Clause]] = []

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
        dnf = self._dnf(node)
        if len(dnf) == 1 and not dnf[0].rows:
            self.bounds.extend(dnf[0].bounds)  # a plain box constraint: every case has it
        else:
            self.asserts.append(dnf)

    def _atom(self, node: _Node) -> _Clause:
        """One comparison: a bound on one input, or output rows."""
        coefs, const, relation = self._comparison(node)
        kinds = {kind for kind, _ in coefs}
        if kinds == {"X"}:
            return _Clause(bounds=(_input_bound(coefs, const, relation, node.line),))
        if "X" in kinds:
            raise VnnlibError(f"line {node.line}: constraint {_show(node)} mixes inputs and outputs "
                              f"(only bounds on one input, and output constraints, are supported)")
        row = {index: c for (_, index), c in coefs.items()}
        if relation == "=":
            return _Clause(rows=((row, -const, False), ({i: -c for i, c in row.items()}, const, False)))
        sign = 1.0 if relation in ("<=", "<") else -1.0
        return _Clause(rows=(({i: sign * c for i, c in row.items()}, -sign * const, relation in ("<", ">")),))

    def _dnf(self, node: _Node) -> list[_Clause]:
        """The formula as a disjunction of clauses."""
        head = node.head
        if head in _COMPARISONS:
            return [self._atom(node)]
        if head in ("and", "or") and len(node.items) >= 2:
            parts = [self._dnf(child) for child in node.items[1:]]
            if head == "or":
                out = [clause for part in parts for clause in part]
            else:
                if np.prod([float(len(p)) for p in parts]) > MAX_DISJUNCTS:
                    raise VnnlibError(f"line {node.line}: 'and' of disjunctions expands past "
                                      f"{MAX_DISJUNCTS} disjuncts")
                out = [sum(combo, _Clause()) for combo in itertools.product(*parts)]
            if len(out) > MAX_DISJUNCTS:
                raise VnnlibError(f"line {node.line}: more than {MAX_DISJUNCTS} disjuncts")
            return out
        raise VnnlibError(f"line {node.line}: unsupported formula {_show(node)} "
                          f"(comparisons, and, or)")

    def cases(self) -> tuple[Case, ...]:
        n_in = _count(self.declared["X"], "X")
        unbounded = (np.full(n_in, -np.inf), np.full(n_in, np.inf))
        lo, hi, closed_lo, closed_hi = _cut(*unbounded, *unbounded, self.bounds)
        _check_nonempty(lo, hi)
        if not self.asserts:
            raise VnnlibError("no output constraint (the unsafe region is missing)")
        region = [_Clause()]
        for dnf in self.asserts:
            if len(region) * len(dnf) > MAX_DISJUNCTS:
                raise VnnlibError(f"the asserts expand past {MAX_DISJUNCTS} disjuncts")
            region = [a + b for a in region for b in dnf]
        boxes: dict[bytes, tuple[tuple[np.ndarray, ...], list[tuple[Row, ...]]]] = {}
        for clause in region:
            if not clause.rows:
                line = min(b.line for b in clause.bounds)
                raise VnnlibError(f"line {line}: a disjunct constrains no output (the unsafe region "
                                  f"of its input box is missing)")
            box = _cut(lo, hi, closed_lo, closed_hi, clause.bounds)
            _check_bounded(box[0], box[1])
            if _empty_over_reals(*box):
                continue  # an empty box: no input is in this disjunct
            _check_nonempty(box[0], box[1])  # reals but no float64 input: refused, not skipped
            key = b"".join(a.tobytes() for a in box)
            boxes.setdefault(key, (box, []))[1].append(clause.rows)
        if not boxes:
            raise VnnlibError("every input box of the property is empty")
        return tuple(Case(box[0], box[1], tuple(rows), box[2], box[3]) for box, rows in boxes.values())


def _cut(lo: np.ndarray, hi: np.ndarray, closed_lo: np.ndarray, closed_hi: np.ndarray,
         bounds: Sequence[Bound]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The float64 box and its real closure with ``bounds`` cut from them (new arrays)."""
    lo, hi, closed_lo, closed_hi = lo.copy(), hi.copy(), closed_lo.copy(), closed_hi.copy()
    for b in bounds:
        i = b.input_index
        lo[i], hi[i] = max(lo[i], b.low), min(hi[i], b.high)
        closed_lo[i], closed_hi[i] = max(closed_lo[i], b.closed_low), min(closed_hi[i], b.closed_high)
    return lo, hi, closed_lo, closed_hi


def _check_nonempty(lo: np.ndarray, hi: np.ndarray) -> None:
    empty = np.flatnonzero(lo > hi)
    if empty.size:
        raise VnnlibError(f"input X_{empty[0]} has lower bound {float(lo[empty[0]])!r} above its upper "
                          f"bound {float(hi[empty[0]])!r} (an empty box)")


def _empty_over_reals(lo: np.ndarray, hi: np.ndarray, closed_lo: np.ndarray,
                      closed_hi: np.ndarray) -> bool:
    """Whether no real input is in the box: its closure is empty in some input, or is one
    point there that a strict bound excludes (then the float box is empty there too)."""
    return bool(np.any((closed_lo > closed_hi) | ((closed_lo == closed_hi) & (lo > hi))))


def _check_bounded(lo: np.ndarray, hi: np.ndarray) -> None:
    unbounded = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
    if unbounded.size:
        raise VnnlibError(f"input X_{unbounded[0]} has no finite lower and upper bound "
                          f"({unbounded.size} input(s) unbounded)")


def _input_bound(coefs: dict[tuple[str, int], float], const: float, relation: str, line: int) -> Bound:
    if len(coefs) != 1:
        raise VnnlibError(f"line {line}: input constraint over {len(coefs)} inputs "
                          f"(only boxes, one input per bound, are supported)")
    ((_, index), a), = coefs.items()
    value = -const / a + 0.0  # a·x + const REL 0 (+ 0.0: no -0.0)
    if -const != value * a:
        raise VnnlibError(f"line {line}: input bound with coefficient {a!r} is not exact in float64")
    if relation == "=":
        return Bound(index, value, value, line, value, value)
    upper = (relation in ("<=", "<")) == (a > 0)
    on_floats = value
    if relation in ("<", ">"):  # x < v holds for the floats x <= below(v); its closure is x <= v
        on_floats = float(np.nextafter(value, -np.inf if upper else np.inf))
    if upper:
        return Bound(index, -np.inf, on_floats, line, -np.inf, value)
    return Bound(index, on_floats, np.inf, line, value, np.inf)


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


def _count(indices: set[int], kind: str) -> int:
    n = max(indices, default=-1) + 1
    if n == 0:
        raise VnnlibError(f"no {kind}_ variable declared")
    if len(indices) != n:
        missing = min(set(range(n)) - indices)
        raise VnnlibError(f"{kind}_{missing} is not declared but {kind}_{n - 1} is")
    return n


def _show(node: _Node, limit: int = 60) -> str:
    def text(n: _Node) -> str:
        return n.value if isinstance(n.value, str) else "(" + " ".join(text(c) for c in n.value) + ")"

    out = text(node)
    return out if len(out) <= limit else out[: limit - 3] + "..."
