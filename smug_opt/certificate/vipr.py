"""VIPR 1.0 text: numbers, constraints, reasons and the file's sections.

VIPR (Cheung, Gleixner, Steffy 2017) states a MILP, a relation to prove and a list of
derived constraints, each with a reason an exact checker re-derives. Spec:
``cert_spec_v1_0.md`` of github.com/ambros-gleixner/VIPR; our MILP: ``docs/certificates.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path

from smug_opt.certificate.milp import ExactMilp

__all__ = ["OBJECTIVE", "Derivations", "constraint", "number", "write_vipr"]

OBJECTIVE = "OBJ"
"""The left-hand side of a derived constraint that is the objective's."""


def number(q: Fraction | int) -> str:
    """``q`` as VIPR reads it: an integer in decimal, else a reduced ``p/q``."""
    numerator, denominator = q.numerator, q.denominator  # an int is its own numerator over 1
    return str(numerator) if denominator == 1 else f"{numerator}/{denominator}"


def _terms(pairs: Iterable[tuple[int, Fraction]]) -> str:
    items = [f"{i} {number(v)}" for i, v in pairs]
    return " ".join([str(len(items)), *items])


def constraint(name: str, sense: str, rhs: Fraction,
               lhs: str | Iterable[tuple[int, Fraction]]) -> str:
    """A constraint in VIPR's constraint format (``lhs`` pairs or :data:`OBJECTIVE`)."""
    body = lhs if isinstance(lhs, str) else _terms(lhs)
    return f"{name} {sense} {number(rhs)} {body}"


class Derivations:
    """The DER section being written: each ``add`` returns the new constraint's index."""

    def __init__(self, first_index: int) -> None:
        self._first = first_index
        self.lines: list[str] = []

    @property
    def next_index(self) -> int:
        return self._first + len(self.lines)

    def _add(self, name: str, sense: str, rhs: Fraction,
             lhs: str | Iterable[tuple[int, Fraction]], reason: str) -> int:
        index = self.next_index
        self.lines.append(f"{constraint(name, sense, rhs, lhs)} {{ {reason} }} -1")
        return index

    def assume(self, name: str, sense: str, rhs: Fraction, lhs: Iterable[tuple[int, Fraction]]) -> int:
        return self._add(name, sense, rhs, lhs, "asm")

    def combine(self, name: str, sense: str, rhs: Fraction, lhs: str | Iterable[tuple[int, Fraction]],
                multipliers: Mapping[int, Fraction], *, rounded: bool) -> int:
        """A ``lin`` (or, ``rounded``, ``rnd``) derivation from ``multipliers`` by index."""
        pairs = sorted((i, v) for i, v in multipliers.items() if v != 0)
        return self._add(name, sense, rhs, lhs, f"{'rnd' if rounded else 'lin'} {_terms(pairs)}")

    def unsplit(self, name: str, sense: str, rhs: Fraction, lhs: str | Iterable[tuple[int, Fraction]],
                first: tuple[int, int], second: tuple[int, int]) -> int:
        """``uns``: the constraint holds on both sides of a split (derived, assumption)."""
        return self._add(name, sense, rhs, lhs, f"uns {first[0]} {first[1]} {second[0]} {second[1]}")


def write_vipr(path: str | os.PathLike[str], milp: ExactMilp, *, comments: Iterable[str],
               optimum: Fraction | None, solution: Mapping[int, Fraction] | None,
               derivations: Derivations) -> None:
    """Write the certificate: ``optimum`` None states infeasibility (``RTP infeas``)."""
    n = milp.num_vars
    lines = [f"% {c}" for c in comments]
    lines += ["VER 1.0", f"VAR {n}", " ".join(milp.names)]
    ints = [j for j in range(n) if milp.integer[j]]
    lines += [f"INT {len(ints)}", " ".join(map(str, ints))]
    lines += ["OBJ min", _terms(sorted(milp.objective.items()))]
    lines.append(f"CON {len(milp.rows)} {milp.num_bound_rows}")
    lines += [constraint(r.name, r.sense, r.rhs, zip(r.cols, r.coefs, strict=True)) for r in milp.rows]
    if optimum is None:
        lines += ["RTP infeas", "SOL 0"]
    else:
        values = sorted((j, v) for j, v in (solution or {}).items() if v != 0)
        lines += [f"RTP range {number(optimum)} {number(optimum)}", "SOL 1", f"opt {_terms(values)}"]
    lines.append(f"DER {len(derivations.lines)}")
    lines += derivations.lines
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, target)
