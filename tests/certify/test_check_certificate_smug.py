"""The checker against ``.smug`` problems: the MILP is derived from the problem file
(docs/certificates.md), certificates built here by enumerating every binary assignment in
one ``uns`` tree are accepted exactly when their claim is the brute-force truth, and
tampered ones are rejected."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt import Problem, ProblemBuilder, save_problem
from smug_opt.check_certificate import CertificateRejected, check_certificate
from smug_opt.cli import main

_STRICT_TIGHTENED = {">": lambda D, b: Fraction(math.floor(D * b) + 1, D),
                     "<": lambda D, b: Fraction(math.ceil(D * b) - 1, D)}
_LETTER = {"<=": "L", ">=": "G", "==": "E", "<": "L", ">": "G"}


def q(x: float | Fraction) -> str:
    f = Fraction(x)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


class BinaryProblem:
    """A problem over n binaries with dense rows, and its MILP as this test writes it."""

    def __init__(self, A: list[list[float]], senses: list[str], rhs: list[float],
                 costs: list[float]) -> None:
        self.A, self.senses, self.rhs, self.costs = A, senses, rhs, costs
        self.n = len(costs)
        self.problem = Problem.from_arrays(np.array(A, dtype=float).reshape(len(A), self.n),
                                           senses, rhs, objective=costs)

    def milp_rows(self) -> list[tuple[str, str, Fraction, dict[int, Fraction]]]:
        """(name, letter, rhs, coefficients): bounds first, then rows; strict rows over
        binaries tightened exactly."""
        rows = []
        for j in range(self.n):
            rows += [(f"lb{j}", "G", Fraction(0), {j: Fraction(1)}),
                     (f"ub{j}", "L", Fraction(1), {j: Fraction(1)})]
        for i, (a, sense, b) in enumerate(zip(self.A, self.senses, self.rhs, strict=False)):
            coefs = {j: Fraction(v) for j, v in enumerate(a) if v != 0}
            bound = Fraction(b)
            if sense in _STRICT_TIGHTENED:
                D = math.lcm(*(c.denominator for c in coefs.values())) if coefs else 1
                bound = _STRICT_TIGHTENED[sense](D, bound)
            rows.append((f"r{i}", _LETTER[sense], bound, coefs))
        return rows

    def feasible(self, x: tuple[int, ...]) -> bool:
        for a, sense, b in zip(self.A, self.senses, self.rhs, strict=False):
            lhs = sum(Fraction(v) * xj for v, xj in zip(a, x, strict=False))
            if not {"<=": lhs <= b, ">=": lhs >= b, "==": lhs == b, "<": lhs < b,
                    ">": lhs > b}[sense]:
                return False
        return True

    def value(self, x: tuple[int, ...]) -> Fraction:
        return sum((Fraction(c) * xj for c, xj in zip(self.costs, x, strict=False)), Fraction(0))

    def optimum(self) -> tuple[Fraction, tuple[int, ...]] | None:
        points = [x for x in itertools.product((0, 1), repeat=self.n) if self.feasible(x)]
        return min(((self.value(x), x) for x in points), default=None)


def constraint_text(coefs: dict[int, Fraction]) -> str:
    items = sorted((j, a) for j, a in coefs.items() if a != 0)
    return " ".join([str(len(items))] + [f"{j} {q(a)}" for j, a in items])


def enumeration_certificate(bp: BinaryProblem, *, claim: Fraction | None,
                            solution: tuple[int, ...] | None) -> str:
    """A certificate that splits on every binary in turn and proves each leaf by ``lin``:
    ``OBJ >= claim`` at a point where that holds, ``0 >= 1`` at a point a row excludes.
    ``claim`` None claims infeasibility."""
    rows = bp.milp_rows()
    lines = ["% enumeration certificate", "VER 1.0", f"VAR {bp.n}",
             " ".join(f"x{j}" for j in range(bp.n)), f"INT {bp.n}",
             " ".join(str(j) for j in range(bp.n)), "OBJ min",
             constraint_text({j: Fraction(c) for j, c in enumerate(bp.costs)}),
             f"CON {len(rows)} {2 * bp.n}"]
    lines += [f"{name} {letter} {q(b)} {constraint_text(c)}" for name, letter, b, c in rows]
    if claim is None:
        lines += ["RTP infeas", "SOL 0"]
        goal = "G 1 0"
    else:
        lines += [f"RTP range {q(claim)} {q(claim)}", "SOL 1",
                  f"opt {constraint_text({j: Fraction(v) for j, v in enumerate(solution)})}"]
        goal = f"G {q(claim)} OBJ"
    derivations: list[str] = []

    def emit(text: str) -> int:
        derivations.append(text)
        return len(rows) + len(derivations) - 1

    def leaf(x: tuple[int, ...], fixed: dict[int, int]) -> int:
        # fixed[j]: the index of the row that pins x_j from below (G) and from above (L)
        lower = {j: fixed[j] if x[j] else 2 * j for j in range(bp.n)}
        upper = {j: 2 * j + 1 if x[j] else fixed[j] for j in range(bp.n)}
        violated = next((i for i, (_, letter, b, c) in enumerate(rows[2 * bp.n:])
                         if not _holds(letter, sum(c.get(j, 0) * x[j] for j in range(bp.n)), b)),
                        None)
        if violated is None:  # OBJ >= value(x): cost c_j > 0 on a row pinning x_j from below
            terms = {}
            for j, c in enumerate(bp.costs):
                if c:
                    terms[lower[j] if c > 0 else upper[j]] = Fraction(c)
            return emit(f"leaf {goal} {{ lin {len(terms)} "
                        + " ".join(f"{i} {q(m)}" for i, m in sorted(terms.items())) + " } -1")
        # a row the point violates, minus its terms pinned at the point: 0 >= positive
        _, letter, b, c = rows[2 * bp.n + violated]
        lhs = sum(c.get(j, 0) * x[j] for j in range(bp.n))
        sign = {"G": 1, "L": -1, "E": 1 if lhs < b else -1}[letter]
        terms = {2 * bp.n + violated: Fraction(sign)}
        for j, a in c.items():
            m = -sign * a  # multiplier of a row over x_j, in the G direction
            terms[lower[j] if m > 0 else upper[j]] = m
        return emit("leaf G 1 0 { lin " + str(len(terms)) + " "
                    + " ".join(f"{i} {q(m)}" for i, m in sorted(terms.items())) + " } -1")

    def subtree(depth: int, x: list[int], fixed: dict[int, int]) -> int:
        if depth == bp.n:
            return leaf(tuple(x), fixed)
        down = emit(f"down{depth} L 0 1 {depth} 1 {{ asm }} -1")
        low = subtree(depth + 1, [*x, 0], {**fixed, depth: down})
        up = emit(f"up{depth} G 1 1 {depth} 1 {{ asm }} -1")
        high = subtree(depth + 1, [*x, 1], {**fixed, depth: up})
        return emit(f"node{depth} {goal} {{ uns {low} {down} {high} {up} }} -1")

    subtree(0, [], {})
    return "\n".join([*lines, f"DER {len(derivations)}", *derivations, ""])


def _holds(letter: str, lhs: Fraction, b: Fraction) -> bool:
    return {"G": lhs >= b, "L": lhs <= b, "E": lhs == b}[letter]


def write(tmp_path: Path, bp: BinaryProblem, certificate: str) -> tuple[Path, Path]:
    problem, vipr = tmp_path / "p.smug", tmp_path / "p.vipr"
    save_problem(bp.problem, problem)
    vipr.write_text(certificate)
    return problem, vipr


def honest_certificate(bp: BinaryProblem) -> tuple[str, Fraction | None]:
    best = bp.optimum()
    if best is None:
        return enumeration_certificate(bp, claim=None, solution=None), None
    return enumeration_certificate(bp, claim=best[0], solution=best[1]), best[0]


VALUES = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.5, 3.0, 0.1, -0.3])


@st.composite
def binary_problems(draw) -> BinaryProblem:
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 3))
    A = [[draw(VALUES) for _ in range(n)] for _ in range(m)]
    senses = [draw(st.sampled_from(["<=", ">=", "==", "<", ">"])) for _ in range(m)]
    rhs = [draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 1.6, 2.0, 0.1])) for _ in range(m)]
    costs = [draw(st.sampled_from([0.0, 1.0, 2.0, -1.0, 0.5, 0.1])) for _ in range(n)]
    return BinaryProblem(A, senses, rhs, costs)


PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(binary_problems())
def test_an_enumeration_certificate_proves_the_brute_force_answer(tmp_path, bp):
    certificate, optimum = honest_certificate(bp)
    proven = check_certificate(*write(tmp_path, bp, certificate))
    if optimum is None:
        assert proven.infeasible
    else:
        assert proven.lower == proven.upper == optimum


@PROPERTY
@given(binary_problems(), st.data())
def test_a_wrong_claim_or_a_tampered_step_is_rejected(tmp_path, bp, data):
    best = bp.optimum()
    if best is None:  # claim some point is optimal
        x = data.draw(st.tuples(*[st.integers(0, 1)] * bp.n))
        wrong = enumeration_certificate(bp, claim=bp.value(x), solution=x)
        with pytest.raises(CertificateRejected, match="violates constraint"):
            check_certificate(*write(tmp_path, bp, wrong))
        return
    value, x = best
    raised = enumeration_certificate(bp, claim=value + Fraction(1, 3), solution=x)
    with pytest.raises(CertificateRejected, match="does not dominate|does not prove"):
        check_certificate(*write(tmp_path, bp, raised))
    infeasible = enumeration_certificate(bp, claim=None, solution=None)
    with pytest.raises(CertificateRejected):
        check_certificate(*write(tmp_path, bp, infeasible))
    honest, _ = honest_certificate(bp)
    lines = honest.split("\n")
    problem_rows = range(2 * bp.n, 2 * bp.n + len(bp.A))
    choices = []  # (line, term) of multipliers on bound or assumption rows (never empty)
    for i, line in enumerate(lines):
        if "{ lin " in line:
            fields = line.partition("{ lin ")[2].split()
            choices += [(i, k) for k in range(int(fields[0]))
                        if int(fields[1 + 2 * k]) not in problem_rows]
    if not choices:
        return
    i, k = data.draw(st.sampled_from(choices))
    head, _, tail = lines[i].partition("{ lin ")
    fields = tail.split()
    fields[2 + 2 * k] = q(Fraction(fields[2 + 2 * k]) * 2)  # double one multiplier
    lines[i] = head + "{ lin " + " ".join(fields)
    with pytest.raises(CertificateRejected, match=r"^derivation 'leaf'"):
        check_certificate(*write(tmp_path, bp, "\n".join(lines)))


def small_problem() -> BinaryProblem:
    """min x0 + 2 x1 + x2 s.t. x0 + x1 >= 1, x1 + x2 > 0.5, 0.1 x0 + 0.1 x2 < 0.15."""
    return BinaryProblem([[1, 1, 0], [0, 1, 1], [0.1, 0, 0.1]], [">=", ">", "<"],
                         [1, 0.5, 0.15], [1, 2, 1])


def test_the_cli_prints_what_was_proven_and_exits_0(tmp_path, capsys):
    bp = small_problem()
    certificate, optimum = honest_certificate(bp)
    assert optimum == 2
    assert main(["check-certificate", *map(str, write(tmp_path, bp, certificate))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("proven: optimal value 2 (p.smug, ")


def test_a_certificate_for_another_problem_is_rejected(tmp_path, capsys):
    bp = small_problem()
    certificate, _ = honest_certificate(bp)
    other = BinaryProblem([[1, 1, 0], [0, 1, 1], [0.1, 0, 0.1]], [">=", ">", "<"],
                          [1, 0.5, 0.25], [1, 2, 1])
    problem, vipr = write(tmp_path, other, certificate)
    assert main(["check-certificate", str(problem), str(vipr)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("smug-opt check-certificate: rejected: the certificate states another problem "
                   "than p.smug: constraint 8 ('r2') is L 2702159776422297/18014398509481984, "
                   "row 2 of the problem is L 9007199254740991/36028797018963968")


def test_unreadable_files_exit_1_in_one_line(tmp_path, capsys):
    bp = small_problem()
    problem, vipr = write(tmp_path, bp, honest_certificate(bp)[0])
    for args in ([str(tmp_path / "none.smug"), str(vipr)], [str(problem), str(tmp_path / "none.vipr")],
                 [str(vipr), str(vipr)]):
        assert main(["check-certificate", *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith("smug-opt check-certificate: error: ") and err.count("\n") == 1


def test_a_strict_row_over_a_continuous_variable_is_stated_as_its_closure(tmp_path):
    """min x0 s.t. x0 + y > 1, y in [0, 1/2]: the closure x0 + y >= 1 proves x0 >= 1/2, so
    x0 >= 1; a solution must hold the row strictly (x0 = 1, y = 0 does not, y = 1/4 does)."""
    b = ProblemBuilder()
    x0 = b.add_binaries(1)
    y = b.add_continuous(1, 0.0, 0.5)
    b.add_constraints([[1.0, 1.0]], [x0[0], y[0]], ">", 1.0)
    b.set_objective(x0, 1.0)
    problem = tmp_path / "p.smug"
    save_problem(b.build(), problem)
    text = """VER 1.0
VAR 2
x0 x1
INT 1
0
OBJ min
1 0 1
CON 5 4
lb0 G 0 1 0 1
ub0 L 1 1 0 1
lb1 G 0 1 1 1
ub1 L 1/2 1 1 1
r0 G 1 2 0 1 1 1
RTP range 1 1
SOL 1
opt {solution}
DER 2
half G 1/2 OBJ {{ lin 2 3 -1 4 1 }} -1
whole G 1 OBJ {{ rnd 1 5 1 }} -1
"""
    vipr = tmp_path / "p.vipr"
    vipr.write_text(text.format(solution="2 0 1 1 1/4"))
    assert check_certificate(problem, vipr).describe() == "optimal value 1"
    vipr.write_text(text.format(solution="1 0 1"))
    with pytest.raises(CertificateRejected, match="violates constraint 'r0': its left-hand side "
                                                  "is 1, not > 1"):
        check_certificate(problem, vipr)
