"""Verifying a VIPR certificate in exact arithmetic: solutions, derivations, the claim.

Every derived constraint is checked against its reason (``asm``, ``lin``, ``rnd``, ``uns``,
``sol``) as the VIPR 1.0 specification defines them, each carries the set of assumptions it
rests on, and the last one must prove the relation to prove with no assumption left open.
Work is counted (one unit per coefficient touched, more for long numbers) and a certificate
that needs more than its budget is refused, so a hostile file cannot run for hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from smug_opt.check_certificate.rows import EQ, GE, LE, MAX_BITS, Row, combine, first_difference, with_lhs_of
from smug_opt.check_certificate.tokens import TokenStream
from smug_opt.check_certificate.vipr_reader import Derivation, Header, read_derivation

__all__ = ["DEFAULT_MAX_WORK", "CertificateRejected", "Proven", "verify"]

DEFAULT_MAX_WORK = 2_000_000_000
"""Coefficient operations a certificate may cost (about 20 minutes of this checker)."""
MAX_ASSUMPTION_ENTRIES = 20_000_000
"""Assumption-set entries kept over all derivations (a B&B tree keeps one per level per node)."""


class CertificateRejected(ValueError):
    """The certificate does not prove its claim; the message names the first failure."""


@dataclass(frozen=True)
class Proven:
    """What a verified certificate proves about its problem's optimal value."""

    infeasible: bool
    lower: Fraction | None
    upper: Fraction | None
    derivations: int
    work: int

    def describe(self) -> str:
        if self.infeasible:
            return "infeasible"
        if self.lower is not None and self.lower == self.upper:
            return f"optimal value {self.lower}"
        if self.lower is not None and self.upper is not None:
            return f"optimal value between {self.lower} and {self.upper}"
        if self.lower is not None:
            return f"lower bound {self.lower}"
        if self.upper is not None:
            return f"upper bound {self.upper}"
        return "nothing (RTP range -inf inf)"


_FREED = Row({}, 1, Fraction(0), EQ)


def verify(header: Header, stream: TokenStream, *, strict: frozenset[int] = frozenset(),
           max_work: int = DEFAULT_MAX_WORK) -> Proven:
    """Check ``header``'s solutions and the derivations that follow in ``stream``.

    ``strict`` holds the CON indices that stand for strict rows: a derivation uses their
    closure, a solution must satisfy them strictly.
    """
    return _Verifier(header, strict, max_work).run(stream)


class _Verifier:
    def __init__(self, header: Header, strict: frozenset[int], max_work: int) -> None:
        self.header = header
        self.strict = strict
        self.max_work = max_work
        self.work = 0
        self.rows: list[Row] = [row for _, row in header.constraints]
        self.names: list[str] = [name for name, _ in header.constraints]
        self.assumptions: list[frozenset[int]] = [frozenset()] * len(self.rows)
        self.free_after: dict[int, list[int]] = {}
        self.assumption_entries = 0
        self.best: Fraction | None = None
        self.used_sol = False

    # ------------------------------------------------------------------ costs
    def union(self, sets: list[frozenset[int]], where: str) -> frozenset[int]:
        """The union of ``sets``, sharing one of them when it is the whole union; its cost
        is charged and the entries a new set keeps are counted against their own limit."""
        self.charge(sum(len(s) for s in sets), where)
        largest = max(sets, key=len, default=frozenset())
        union = largest.union(*sets)
        if len(union) == len(largest):
            return largest
        self.count_entries(len(union), where)
        return union

    def count_entries(self, entries: int, where: str) -> None:
        self.assumption_entries += entries
        if self.assumption_entries > MAX_ASSUMPTION_ENTRIES:
            raise CertificateRejected(f"{where}: the assumption sets kept reach "
                                      f"{MAX_ASSUMPTION_ENTRIES:,} entries")

    def charge(self, units: int, where: str) -> None:
        self.work += units
        if self.work > self.max_work:
            raise CertificateRejected(f"{where}: over the work budget of {self.max_work:,} "
                                      "coefficient operations (raise --max-work if it is genuine)")

    # -------------------------------------------------------------- solutions
    def check_solutions(self) -> None:
        h = self.header
        if h.infeasible and h.solutions:
            raise CertificateRejected(f"RTP claims infeasibility but SOL lists {len(h.solutions)} "
                                      "solution(s)")
        for name, point in h.solutions:
            where = f"solution {name!r}"
            self.charge(len(point) + sum(len(r.coefs) for r in self.rows), where)
            for j, v in point.items():
                if j in h.integers and v.denominator != 1:
                    raise CertificateRejected(f"{where}: integer variable {h.variables[j]} has "
                                              f"the fractional value {v}")
            for i, row in enumerate(self.rows):
                strictly = i in self.strict
                if not row.holds_at(point, strictly=strictly):
                    relation = {LE: "<", GE: ">"}.get(row.sense, "=") if strictly else (
                        {LE: "<=", GE: ">=", EQ: "="}[row.sense])
                    raise CertificateRejected(
                        f"{where} violates constraint {self.names[i]!r}: its left-hand side is "
                        f"{row.value_at(point)}, not {relation} {row.rhs}")
            value = h.objective.value_at(point)
            if self.best is None or (value < self.best if h.minimize else value > self.best):
                self.best = value
        claim = h.upper if h.minimize else h.lower
        if claim is None:
            return
        if self.best is None:
            raise CertificateRejected(f"RTP claims the {'upper' if h.minimize else 'lower'} bound "
                                      f"{claim} but SOL gives no solution that attains it")
        if (self.best > claim) if h.minimize else (self.best < claim):
            raise CertificateRejected(f"RTP claims the {'upper' if h.minimize else 'lower'} bound "
                                      f"{claim} but the best solution has objective {self.best}")

    # ------------------------------------------------------------ derivations
    def run(self, stream: TokenStream) -> Proven:
        h = self.header
        self.check_solutions()
        first = len(self.rows)
        for k in range(h.derivation_count):
            index = first + k
            derivation = read_derivation(stream, h, index)
            where = f"derivation {derivation.name!r} (constraint {index})"
            self.assumptions.append(self.check(derivation, index, where))
            self.rows.append(derivation.row)
            self.names.append(derivation.name)
            self.release(derivation, index, is_last=k == h.derivation_count - 1)
        if not stream.at_end():
            raise ValueError(f"{stream.path}: text after the {h.derivation_count} derivations "
                             "DER declares")
        self.check_claim()
        return Proven(h.infeasible, h.lower if h.minimize else self.best,
                      self.best if h.minimize else h.upper, h.derivation_count, self.work)

    def referenced(self, i: int, where: str) -> Row:
        row = self.rows[i]
        if row is _FREED:
            raise CertificateRejected(f"{where} uses constraint {i} ({self.names[i]!r}) after its "
                                      "declared last use")
        return row

    def check(self, d: Derivation, index: int, where: str) -> frozenset[int]:
        """The assumptions ``d`` rests on, once its reason is checked."""
        kind = d.reason.kind
        if kind == "asm":
            self.charge(1 + len(d.row.coefs), where)
            return frozenset((index,))
        if kind in ("lin", "rnd"):
            return self.check_linear(d, where, rounded=kind == "rnd")
        if kind == "uns":
            return self.check_unsplit(d, where)
        return self.check_cutoff(d, where)

    def check_linear(self, d: Derivation, where: str, *, rounded: bool) -> frozenset[int]:
        terms: list[tuple[int, int, Row]] = []
        direction = 0
        resting: list[frozenset[int]] = []
        for i, p, q in d.reason.multipliers:
            if p == 0:
                continue
            row = self.referenced(i, where)
            sign = (1 if p > 0 else -1) * row.sense
            if sign and direction and sign != direction:
                raise CertificateRejected(
                    f"{where}: the multiplier {Fraction(p, q)} of {self.names[i]!r} has the wrong "
                    f"sign (a {row.letter} constraint after ones giving "
                    f"{'>=' if direction > 0 else '<='})")
            direction = direction or sign
            terms.append((p, q, row))
            resting.append(self.assumptions[i])
        self.charge(len(d.row.coefs) + sum(len(row.coefs) for _, _, row in terms), where)
        combined = combine(terms)
        if combined is None:
            raise CertificateRejected(f"{where}: its multipliers need a common denominator of "
                                      f"over {MAX_BITS:,} bits")
        coefs, den, rhs = combined
        self.charge(len(coefs) * (den.bit_length() // 256), where)
        derived = Row(coefs, den, rhs, direction)
        if rounded:
            derived = self.rounded(derived, where)
        if not derived.dominates(d.row):
            raise CertificateRejected(f"{where}: {d.reason.kind} {self.mismatch(derived, d.row)}")
        return self.union(resting, where)

    def rounded(self, row: Row, where: str) -> Row:
        """Chvátal–Gomory rounding of ``row`` (integer coefficients on integer variables)."""
        for j, a in row.coefs.items():
            if j not in self.header.integers:
                raise CertificateRejected(
                    f"{where}: rnd on a combination with the coefficient {Fraction(a, row.den)} "
                    f"on the continuous variable {self.header.variables[j]}")
            if a % row.den:
                raise CertificateRejected(
                    f"{where}: rnd on a combination with the fractional coefficient "
                    f"{Fraction(a, row.den)} on {self.header.variables[j]}")
        coefs = {j: a // row.den for j, a in row.coefs.items()}
        if row.sense == LE:
            return Row(coefs, 1, Fraction(math.floor(row.rhs)), LE)
        if row.sense == GE:
            return Row(coefs, 1, Fraction(math.ceil(row.rhs)), GE)
        return row  # an equation is kept as it is (rounding applies to inequalities)

    def mismatch(self, derived: Row, stated: Row) -> str:
        """Why ``derived`` does not dominate ``stated``, in one phrase."""
        j = first_difference(derived, stated)
        if j is not None:
            return (f"combination gives the coefficient {derived.coefficient(j)} on "
                    f"{self.header.variables[j]} where the derivation states "
                    f"{stated.coefficient(j)}")
        return (f"combination gives {derived.letter} {derived.rhs}, which does not dominate "
                f"{stated.letter} {stated.rhs}")

    def check_unsplit(self, d: Derivation, where: str) -> frozenset[int]:
        i1, l1, i2, l2 = d.reason.unsplit
        rows = [self.referenced(i, where) for i in (i1, l1, i2, l2)]
        self.charge(sum(len(r.coefs) for r in rows) + len(d.row.coefs), where)
        for i, row in ((i1, rows[0]), (i2, rows[2])):
            if not row.dominates(d.row):
                raise CertificateRejected(f"{where}: uns branch {self.names[i]!r} "
                                          f"({row.letter} {row.rhs}) does not dominate it")
        low, high = sorted((rows[1], rows[3]), key=lambda r: r.sense)
        if (low.sense, high.sense) != (LE, GE) or not low.same_lhs(high):
            raise CertificateRejected(f"{where}: uns disjunction {self.names[l1]!r}, "
                                      f"{self.names[l2]!r} is not a <= b and the same form >= b + 1")
        for j, a in low.coefs.items():
            if j not in self.header.integers:
                raise CertificateRejected(f"{where}: uns on a disjunction over the continuous "
                                          f"variable {self.header.variables[j]}")
            if a % low.den:
                raise CertificateRejected(f"{where}: uns on a disjunction with the fractional "
                                          f"coefficient {Fraction(a, low.den)}")
        beta = low.rhs
        if beta.denominator != 1 or high.rhs != beta + 1:
            raise CertificateRejected(f"{where}: uns disjunction <= {beta} or >= {high.rhs} "
                                      "does not cover every integer")
        kept = [self.assumptions[i] - {lit} if lit in self.assumptions[i] else self.assumptions[i]
                for i, lit in ((i1, l1), (i2, l2))]
        union = self.union(kept, where)
        if any(union is k and k is not self.assumptions[i] for k, i in zip(kept, (i1, i2), strict=True)):
            self.count_entries(len(union), where)  # a set made by taking the assumption out
        return union

    def check_cutoff(self, d: Derivation, where: str) -> frozenset[int]:
        h = self.header
        self.charge(len(d.row.coefs), where)
        if self.best is None:
            raise CertificateRejected(f"{where}: sol needs a solution in SOL")
        integral = all(j in h.integers and a % h.objective.den == 0
                       for j, a in h.objective.coefs.items())
        step = 1 if integral else 0
        cutoff = self.best - step if h.minimize else self.best + step
        wanted = with_lhs_of(h.objective, cutoff, LE if h.minimize else GE)
        if first_difference(wanted, d.row) is not None or d.row.sense != wanted.sense:
            raise CertificateRejected(f"{where}: sol must state OBJ {wanted.letter} a bound")
        if (d.row.rhs < cutoff) if h.minimize else (d.row.rhs > cutoff):
            raise CertificateRejected(f"{where}: sol states OBJ {d.row.letter} {d.row.rhs}, "
                                      f"stronger than the best solution allows ({cutoff})")
        self.used_sol = True
        return frozenset()

    def release(self, d: Derivation, index: int, *, is_last: bool) -> None:
        """Forget the constraints whose declared last use was ``index``."""
        if d.last_use >= 0 and not is_last:
            if d.last_use <= index:
                self.rows[index] = _FREED
            else:
                self.free_after.setdefault(d.last_use, []).append(index)
        for i in self.free_after.pop(index, ()):
            self.rows[i] = _FREED

    # ------------------------------------------------------------------ claim
    def check_claim(self) -> None:
        h = self.header
        if h.infeasible:
            self.final("infeasibility", lambda row: row.is_falsehood())
            return
        bound = h.lower if h.minimize else h.upper
        if bound is None:
            return
        best = self.best  # set whenever a sol derivation was accepted
        if self.used_sol and best is not None and (bound > best if h.minimize else bound < best):
            raise CertificateRejected(f"RTP bound {bound} is beyond the best solution's "
                                      f"{self.best}, which sol derivations may not prove")
        goal = with_lhs_of(h.objective, bound, GE if h.minimize else LE)
        if goal.is_tautology():
            return
        self.final(f"OBJ {goal.letter} {bound}", lambda row: row.dominates(goal))

    def final(self, what: str, proves: Callable[[Row], bool]) -> None:
        if not self.header.derivation_count:
            raise CertificateRejected(f"no derivation proves {what} (DER is empty)")
        last = len(self.rows) - 1
        row, name = self.rows[last], self.names[last]
        if not proves(row):
            raise CertificateRejected(f"the last derivation {name!r} ({row.letter} {row.rhs} "
                                      f"over {len(row.coefs)} variable(s)) does not prove {what}")
        if self.assumptions[last]:
            open_names = ", ".join(repr(self.names[i]) for i in sorted(self.assumptions[last])[:5])
            raise CertificateRejected(f"the last derivation {name!r} rests on open assumption(s) "
                                      f"{open_names}")
