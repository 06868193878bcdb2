"""Parsing the sections of a VIPR 1.0 certificate (Cheung, Gleixner, Steffy 2017).

The problem sections (VAR, INT, OBJ, CON), the relation to prove (RTP) and the solutions
(SOL) are read whole by :func:`read_header`; derivations are read one at a time by
:func:`read_derivation`, so a verifier can check each and forget what it no longer needs.
Nothing is allocated from a count the file declares: every item is read before it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from smug_opt.check_certificate.rows import (
    GE,
    MAX_BITS,
    SENSE_CODES,
    Row,
    bounded_lcm,
    row_from_values,
    with_lhs_of,
)
from smug_opt.check_certificate.tokens import TokenStream

__all__ = ["Derivation", "Header", "Reason", "read_derivation", "read_header"]

_VERSIONS = ("1.0",)


@dataclass(frozen=True)
class Header:
    """Everything before the DER section."""

    variables: list[str]
    integers: frozenset[int]
    minimize: bool
    objective: Row
    constraints: list[tuple[str, Row]]
    bound_count: int
    infeasible: bool
    lower: Fraction | None
    """The lower bound to prove (None: ``-inf``, or an infeasibility claim)."""
    upper: Fraction | None
    solutions: list[tuple[str, dict[int, Fraction]]]
    derivation_count: int


@dataclass(frozen=True)
class Reason:
    """``{ asm }``, ``{ sol }``, ``{ lin/rnd p i λ ... }`` or ``{ uns i1 l1 i2 l2 }``."""

    kind: str
    multipliers: tuple[tuple[int, int, int], ...] = ()
    """``(constraint index, numerator, denominator)`` of each multiplier (denominator > 0)."""
    unsplit: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass(frozen=True)
class Derivation:
    """One line of the DER section: a named constraint, its reason and its last use."""

    name: str
    row: Row
    reason: Reason
    last_use: int


def read_header(stream: TokenStream) -> Header:
    """VER through the count of the DER section."""
    path = stream.path
    stream.keyword("VER")
    version = stream.next("the version")
    if version not in _VERSIONS:
        raise ValueError(f"{path}: VIPR version {version!r} is not supported (this reads "
                         f"{', '.join(_VERSIONS)})")
    stream.keyword("VAR")
    n = stream.count("the number of variables")
    variables = [stream.next(f"variable name {j}") for j in range(n)]
    if len(set(variables)) != n:
        raise ValueError(f"{path}: VAR names a variable twice")
    stream.keyword("INT")
    integers = [stream.index("an integer variable's index", n)
                for _ in range(stream.count("the number of integer variables"))]
    if len(set(integers)) != len(integers):
        raise ValueError(f"{path}: INT lists a variable twice")
    stream.keyword("OBJ")
    sense = stream.next("the objective sense")
    if sense not in ("min", "max"):
        raise ValueError(f"{path}: the objective sense must be min or max, found {sense[:40]!r}")
    pairs = _pairs(stream, n, "the objective")
    try:
        objective = row_from_values(pairs, Fraction(0), GE)
    except ValueError as exc:
        raise ValueError(f"{path}: the objective: {exc}") from None
    stream.keyword("CON")
    m = stream.count("the number of constraints")
    bound_count = stream.count("the number of bound constraints")
    if bound_count > m:
        raise ValueError(f"{path}: CON declares {bound_count} bound constraints among {m}")
    constraints = [_constraint(stream, n, objective) for _ in range(m)]
    infeasible, lower, upper = _relation(stream)
    stream.keyword("SOL")
    solutions = []
    for _ in range(stream.count("the number of solutions")):
        name = stream.next("a solution's name")
        values = _pairs(stream, n, f"solution {name}")
        if bounded_lcm(q for _, _, q in values) is None:
            raise ValueError(f"{path}: solution {name}'s values need a common denominator of "
                             f"over {MAX_BITS:,} bits")
        solutions.append((name, {j: Fraction(p, q) for j, p, q in values}))
    stream.keyword("DER")
    return Header(variables, frozenset(integers), sense == "min", objective, constraints,
                  bound_count, infeasible, lower, upper, solutions,
                  stream.count("the number of derivations"))


def read_derivation(stream: TokenStream, header: Header, index: int) -> Derivation:
    """The derivation that gets constraint index ``index``."""
    name, row = _constraint(stream, len(header.variables), header.objective)
    where = f"derivation {name!r} (constraint {index})"
    stream.keyword("{")
    kind = stream.next(f"the reason of {where}")
    if kind in ("asm", "sol"):
        reason = Reason(kind)
    elif kind in ("lin", "rnd"):
        count = stream.count(f"the number of multipliers of {where}")
        reason = Reason(kind, tuple(stream.pairs(count, f"the multipliers of {where}", index)))
    elif kind == "uns":
        fields = tuple(stream.index(f"an unsplit index in {where}", index) for _ in range(4))
        reason = Reason(kind, unsplit=fields)  # type: ignore[arg-type]
    else:
        raise ValueError(f"{stream.path}: {where} has the unknown reason {kind[:40]!r} "
                         "(known: asm, lin, rnd, uns, sol)")
    stream.keyword("}")
    return Derivation(name, row, reason, stream.integer(f"the last-use index of {where}"))


def _relation(stream: TokenStream) -> tuple[bool, Fraction | None, Fraction | None]:
    stream.keyword("RTP")
    kind = stream.next("the relation to prove")
    if kind == "infeas":
        return True, None, None
    if kind != "range":
        raise ValueError(f"{stream.path}: RTP must be 'infeas' or 'range', found {kind[:40]!r}")
    lower = None if _peek_word(stream, "-inf") else stream.value("the RTP lower bound")
    upper = None if _peek_word(stream, "inf") else stream.value("the RTP upper bound")
    if lower is not None and upper is not None and lower > upper:
        raise ValueError(f"{stream.path}: RTP range has lower bound {lower} above upper bound {upper}")
    return False, lower, upper


def _peek_word(stream: TokenStream, word: str) -> bool:
    token = stream.next(f"{word} or a number")
    if token == word:
        return True
    stream.push_back(token)
    return False


def _constraint(stream: TokenStream, n: int, objective: Row) -> tuple[str, Row]:
    name = stream.next("a constraint name")
    letter = stream.next(f"the sense of constraint {name}")
    if letter not in SENSE_CODES:
        raise ValueError(f"{stream.path}: constraint {name}'s sense must be E, L or G, "
                         f"found {letter[:40]!r}")
    rhs = stream.value(f"the right-hand side of constraint {name}")
    token = stream.next(f"the coefficients of constraint {name}")
    if token == "OBJ":
        return name, with_lhs_of(objective, rhs, SENSE_CODES[letter])
    stream.push_back(token)
    pairs = _pairs(stream, n, f"constraint {name}")
    try:
        return name, row_from_values(pairs, rhs, SENSE_CODES[letter])
    except ValueError as exc:
        raise ValueError(f"{stream.path}: constraint {name}: {exc}") from None


def _pairs(stream: TokenStream, n: int, what: str) -> list[tuple[int, int, int]]:
    return stream.pairs(stream.count(f"the number of entries of {what}"), what, n)
