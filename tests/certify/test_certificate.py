"""VIPR certificates (smug_opt.certificate): written for brute-forced claims, re-checked
here exactly by a minimal reader of their derivations (not the project's checker)."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt.certificate import CertificateError, write_certificate
from smug_opt.certificate.milp import exact_milp
from smug_opt.ir import Problem, ProblemBuilder

# ------------------------------------------------------------ a minimal exact re-check


def _number(text: str) -> Fraction:
    return Fraction(text)


class _Reader:
    def __init__(self, text: str) -> None:
        lines = [line for line in text.splitlines() if not line.startswith("%")]
        self.tokens = " ".join(lines).split()
        self.at = 0

    def next(self) -> str:
        self.at += 1
        return self.tokens[self.at - 1]

    def expect(self, word: str) -> None:
        got = self.next()
        assert got == word, f"expected {word!r}, got {got!r}"

    def terms(self) -> dict[int, Fraction]:
        count = int(self.next())
        out = {}
        for _ in range(count):
            j = int(self.next())
            out[j] = _number(self.next())
        return {j: v for j, v in out.items() if v != 0}

    def constraint(self, objective: dict[int, Fraction]) -> tuple[str, Fraction, dict[int, Fraction]]:
        self.next()  # name
        sense, rhs = self.next(), _number(self.next())
        if self.tokens[self.at] == "OBJ":
            self.at += 1
            return sense, rhs, dict(objective)
        return sense, rhs, self.terms()


_SIGN = {"G": 1, "E": 0, "L": -1}


def _absurd(c: tuple[str, Fraction, dict[int, Fraction]]) -> bool:
    sense, rhs, lhs = c
    return not lhs and ((sense == "G" and rhs > 0) or (sense == "L" and rhs < 0)
                        or (sense == "E" and rhs != 0))


def _dominates(c, d) -> bool:
    if _absurd(c):
        return True
    (cs, cr, cl), (ds, dr, dl) = c, d
    if cl != dl:
        return False
    if ds == "G":
        return cs in "GE" and cr >= dr
    if ds == "L":
        return cs in "LE" and cr <= dr
    return cs == "E" and cr == dr


def _combination(cons, multipliers):
    signs = {_SIGN[cons[i][0]] * lam for i, lam in multipliers.items()}
    assert all(s >= 0 for s in signs) or all(s <= 0 for s in signs), "not a suitable combination"
    lhs: dict[int, Fraction] = {}
    rhs = Fraction(0)
    for i, lam in multipliers.items():
        _, side, row = cons[i]
        rhs += lam * side
        for j, a in row.items():
            lhs[j] = lhs.get(j, 0) + lam * a
    lhs = {j: a for j, a in lhs.items() if a != 0}
    sense = "G" if any(s > 0 for s in signs) else "L" if any(s < 0 for s in signs) else "E"
    return sense, rhs, lhs


def recheck(text: str) -> tuple[str, Fraction | None]:
    """Check every derivation of a VIPR file exactly; return (RTP kind, proven bound)."""
    r = _Reader(text)
    r.expect("VER")
    r.expect("1.0")
    r.expect("VAR")
    n = int(r.next())
    r.at += n
    r.expect("INT")
    integer = {int(r.next()) for _ in range(int(r.next()))}
    r.expect("OBJ")
    r.expect("min")
    objective = r.terms()
    r.expect("CON")
    m, _ = int(r.next()), int(r.next())
    cons = [r.constraint(objective) for _ in range(m)]
    r.expect("RTP")
    kind = r.next()
    bound = None
    if kind == "range":
        bound = _number(r.next())
        r.next()
    r.expect("SOL")
    solutions = [(r.next(), r.terms()) for _ in range(int(r.next()))]
    for _, values in solutions:
        assert sum(c * values.get(j, 0) for j, c in objective.items()) <= bound
    r.expect("DER")
    assumptions: list[frozenset[int]] = [frozenset()] * m
    for _ in range(int(r.next())):
        index = len(cons)
        stated = r.constraint(objective)
        r.expect("{")
        reason = r.next()
        if reason == "asm":
            used = frozenset({index})
        elif reason in ("lin", "rnd"):
            multipliers = r.terms()
            derived = _combination(cons, multipliers)
            if reason == "rnd":
                sense, rhs, lhs = derived
                assert sense in "GL" and all(a.denominator == 1 and j in integer for j, a in lhs.items())
                derived = (sense, Fraction(rhs.__ceil__() if sense == "G" else rhs.__floor__()), lhs)
            assert _dominates(derived, stated), f"derivation {index} does not hold"
            used = frozenset().union(*(assumptions[i] for i in multipliers))
        else:
            assert reason == "uns"
            i1, l1, i2, l2 = (int(r.next()) for _ in range(4))
            assert _dominates(cons[i1], stated) and _dominates(cons[i2], stated)
            (s1, b1, a1), (s2, b2, a2) = cons[l1], cons[l2]
            if s1 == "G":
                (s1, b1, a1), (s2, b2, a2) = (s2, b2, a2), (s1, b1, a1)
            assert s1 == "L" and s2 == "G" and a1 == a2 and b1.denominator == 1 and b2 == b1 + 1
            assert all(a.denominator == 1 and j in integer for j, a in a1.items())
            used = (assumptions[i1] - {l1}) | (assumptions[i2] - {l2})
        r.expect("}")
        r.next()  # last-use index
        cons.append(stated)
        assumptions.append(used)
    last = cons[-1]
    assert not assumptions[-1], "the last derivation rests on assumptions"
    if kind == "infeas":
        assert _absurd(last)
    else:
        assert _dominates(last, ("G", bound, dict(objective)))
    return kind, bound


# ------------------------------------------------------------ brute force


def brute_force(problem: Problem) -> np.ndarray | None:
    """An optimal 0/1 point (exact arithmetic), or None when none is feasible."""
    milp = exact_milp(problem)
    original = problem.A.toarray()
    best = None
    for bits in itertools.product((0, 1), repeat=problem.num_vars):
        x = [Fraction(b) for b in bits]
        ok = True
        for i in range(problem.num_rows):
            lhs = sum(Fraction(float(a)) * v for a, v in zip(original[i], x, strict=True))
            rhs, sense = Fraction(float(problem.rhs[i])), int(problem.senses[i])
            ok &= [lhs <= rhs, lhs >= rhs, lhs == rhs, lhs < rhs, lhs > rhs][sense]
        if ok:
            value = sum(c * x[j] for j, c in milp.objective.items())
            if best is None or value < best[0]:
                best = (value, np.array(bits, dtype=np.float64))
    return None if best is None else best[1]


coefficient = st.one_of(st.integers(-4, 4).map(float), st.floats(-3, 3, allow_subnormal=False).map(
    lambda v: round(v, 3)))


@st.composite
def binary_problems(draw):
    n = draw(st.integers(2, 7))
    m = draw(st.integers(1, 4))
    b = ProblemBuilder()
    cols = b.add_binaries(n)
    A = np.array(draw(st.lists(st.lists(coefficient, min_size=n, max_size=n), min_size=m, max_size=m)))
    senses = draw(st.lists(st.sampled_from(["<=", ">=", "==", "<", ">"]), min_size=m, max_size=m))
    rhs = draw(st.lists(coefficient, min_size=m, max_size=m))
    b.add_constraints(A, cols, senses, rhs)
    integral = draw(st.booleans())
    costs = draw(st.lists(st.integers(0, 5).map(float) if integral else coefficient, min_size=n, max_size=n))
    b.set_objective(cols, costs)
    return b.build()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=binary_problems())
def test_certificates_of_brute_forced_claims_recheck(problem: Problem, tmp_path_factory) -> None:
    """A certificate of the exact optimum (or infeasibility) is written, every one of its
    derivations holds exactly, and `smug-opt check-certificate` accepts it; its bound is
    the brute-forced optimum."""
    from smug_opt.cli import main
    from smug_opt.problem_file import save_problem

    path = tmp_path_factory.mktemp("vipr") / "p.vipr"
    x = brute_force(problem)
    claim = "INFEASIBLE" if x is None else "OPTIMAL"
    cert = write_certificate(problem, claim, x, path, seconds=30)
    kind, bound = recheck(path.read_text())
    save_problem(problem, path.with_suffix(".smug"))
    assert main(["check-certificate", str(path.with_suffix(".smug")), str(path)]) == 0
    if x is None:
        assert kind == "infeas" and cert.optimum is None
    else:
        exact = sum(Fraction(float(c)) * Fraction(float(v))
                    for c, v in zip(problem.objective, x, strict=True))
        assert kind == "range" and bound == exact == cert.optimum


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=binary_problems())
def test_a_wrong_claim_gets_no_certificate(problem: Problem, tmp_path_factory) -> None:
    """A feasible point worse than the optimum, or INFEASIBLE for a feasible problem, is
    refused (CertificateError) and nothing is written."""
    path = tmp_path_factory.mktemp("vipr") / "p.vipr"
    x = brute_force(problem)
    if x is None:
        return
    with pytest.raises(CertificateError):
        write_certificate(problem, "INFEASIBLE", None, path, seconds=30)
    assert not path.exists()
    milp = exact_milp(problem)
    optimum = sum(c * int(x[j]) for j, c in milp.objective.items())
    worse = None
    for bits in itertools.product((0, 1), repeat=problem.num_vars):
        candidate = np.array(bits, dtype=np.float64)
        value = sum(c * bits[j] for j, c in milp.objective.items())
        if value > optimum and brute_force_feasible(problem, candidate):
            worse = candidate
            break
    if worse is not None:
        with pytest.raises(CertificateError):
            write_certificate(problem, "OPTIMAL", worse, path, seconds=30)
        assert not path.exists()


def brute_force_feasible(problem: Problem, x: np.ndarray) -> bool:
    from smug_opt.certificate.milp import violated_row

    return violated_row(exact_milp(problem), {j: Fraction(v) for j, v in enumerate(x.tolist()) if v}) is None


def test_homogeneous_strict_rows_are_tightened_and_cut(tmp_path: Path) -> None:
    """``a·M > 0`` over binaries is stated as ``a·M >= 1/D``; the cardinality cut lifts the
    bound so the root closes the proof without branching."""
    b = ProblemBuilder()
    m = b.add_binaries(4)
    b.add_constraints([[1.0, -0.5, 0.25, 0.0], [0.0, 0.0, 1.0, 1.0]], m, [">", ">"], [0.0, 0.0])
    b.set_objective(m, 1.0)
    problem = b.build()
    milp = exact_milp(problem)
    assert milp.problem_row(0).rhs == Fraction(1, 4) and milp.problem_row(0).sense == "G"
    x = brute_force(problem)
    assert x is not None and x.sum() == 1  # x2 alone satisfies both
    cert = write_certificate(problem, "OPTIMAL", x, tmp_path / "p.vipr", seconds=10)
    assert (cert.cuts, cert.nodes) == (2, 1)
    assert recheck((tmp_path / "p.vipr").read_text()) == ("range", 1)


def _closure_problem(y_max: float) -> Problem:
    """``x0 + x1 + x2 + y > 1.5`` with ``0 <= y <= y_max``, minimising the binaries."""
    b = ProblemBuilder()
    m = b.add_binaries(3)
    y = b.add_continuous(1, 0.0, y_max)
    b.add_constraints([[1.0, 1.0, 1.0, 1.0]], np.concatenate([m, y]), ">", 1.5)
    b.set_objective(m, 1.0)
    return b.build()


def test_closure_row_with_a_continuous_variable(tmp_path: Path) -> None:
    """A strict row with a continuous variable is stated as its closure; the solution must
    still meet it strictly, and the optimum over binaries is certified."""
    problem = _closure_problem(0.25)
    row = exact_milp(problem).problem_row(0)
    assert row.strict and row.rhs == Fraction(3, 2)
    cert = write_certificate(problem, "OPTIMAL", np.array([1.0, 1.0, 0.0, 0.0]), tmp_path / "p.vipr",
                             seconds=10)
    assert recheck((tmp_path / "p.vipr").read_text()) == ("range", 2)
    assert cert.optimum == 2
    with pytest.raises(CertificateError, match="strict"):  # 1 + 0.5 is not > 1.5
        write_certificate(_closure_problem(0.5), "OPTIMAL", np.array([1.0, 0.0, 0.0, 0.5]),
                          tmp_path / "q.vipr", seconds=10)


# ------------------------------------------------------------ the command line


def _saved(tmp_path: Path, rhs: float) -> Path:
    """``x0 + 2·x1 + x2 >= rhs`` over binaries, minimising their count (infeasible above 4)."""
    from smug_opt.problem_file import save_problem

    b = ProblemBuilder()
    m = b.add_binaries(3)
    b.add_constraints([[1.0, 2.0, 1.0]], m, ">=", rhs)
    b.set_objective(m, 1.0)
    path = tmp_path / f"p{rhs:g}.smug"
    save_problem(b.build(), path)
    return path


def test_solve_writes_a_certificate_of_the_optimum(tmp_path: Path, capsys) -> None:
    from smug_opt.cli import main

    out = tmp_path / "p.vipr"
    assert main(["solve", str(_saved(tmp_path, 3.0)), "--certificate", str(out)]) == 0
    assert f"certificate {out}: optimum 2" in capsys.readouterr().out
    assert recheck(out.read_text()) == ("range", 2)
    assert main(["check-certificate", str(tmp_path / "p3.smug"), str(out)]) == 0


def test_solve_writes_a_certificate_of_infeasibility(tmp_path: Path, capsys) -> None:
    from smug_opt.cli import main

    out = tmp_path / "p.vipr"
    main(["solve", str(_saved(tmp_path, 5.0)), "--certificate", str(out)])
    assert f"certificate {out}: infeasibility" in capsys.readouterr().out
    assert recheck(out.read_text()) == ("infeas", None)
    assert main(["check-certificate", str(tmp_path / "p5.smug"), str(out)]) == 0


def test_solve_says_why_no_certificate_is_written(tmp_path: Path, capsys) -> None:
    """A claim that is no proof (time limit) writes nothing and says why; a path that
    cannot be written is refused before solving."""
    from smug_opt.cli import main

    out = tmp_path / "p.vipr"
    main(["solve", str(_saved(tmp_path, 3.0)), "--certificate", str(out), "--backend", "highs",
          "--certificate-time", "1e-9"])
    printed = capsys.readouterr().out
    assert "certificate none written (the certified branch-and-bound did not finish" in printed
    assert not out.exists()
    assert main(["solve", str(_saved(tmp_path, 3.0)), "--certificate", str(tmp_path)]) != 0
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_mnist_first_layer_certificates_pass_the_checker(tmp_path: Path) -> None:
    """HiGHS's optima on small MNIST first-layer suite instances get certificates that
    `smug-opt check-certificate` accepts."""
    from smug_opt import solve
    from smug_opt.bench.suites import SuiteUnavailableError, load_suite
    from smug_opt.cli import main
    from smug_opt.problem_file import load_problem

    try:
        suite = {inst.name: inst for inst in load_suite("mnist-first-layer")}
    except SuiteUnavailableError as exc:
        pytest.skip(str(exc))
    for name in ("cnn-d0-c2-k10-g0.5", "mlp-d1-c1-k8-g0.0", "cnn-d0-c2-k100-g0.9"):
        path = suite[name].problem_path
        problem = load_problem(path)
        result = solve(problem, "highs", time_limit=60, certify=False)
        assert result.status.name == "OPTIMAL", name
        out = tmp_path / f"{name}.vipr"
        cert = write_certificate(problem, "OPTIMAL", result.x, out, seconds=120)
        assert cert.optimum == Fraction(result.objective)
        assert main(["check-certificate", str(path), str(out)]) == 0, name


def test_infeasibility_without_a_farkas_ray_and_lone_equalities(tmp_path: Path) -> None:
    """An empty row ``0 >= 1`` (HiGHS finds no ray: the elastic LP's duals prove it) and a
    single-variable equality ``2·x0 == 1`` (not rounded: VIPR rounds <= and >= only)."""
    empty = Problem.from_arrays([[0.0, 0.0], [1.0, 1.0]], [">=", ">="], [1.0, 1.0])
    write_certificate(empty, "INFEASIBLE", None, tmp_path / "e.vipr", seconds=10)
    assert recheck((tmp_path / "e.vipr").read_text()) == ("infeas", None)
    lone = Problem.from_arrays([[2.0, 0.0], [1.0, 1.0]], ["==", ">="], [1.0, 1.0])
    write_certificate(lone, "INFEASIBLE", None, tmp_path / "l.vipr", seconds=10)
    assert recheck((tmp_path / "l.vipr").read_text()) == ("infeas", None)


def test_explain_refuses_a_certificate_for_a_batch(tmp_path: Path, capsys) -> None:
    from smug_opt.cli import main

    (tmp_path / "inputs").mkdir()
    code = main(["explain", "--input", str(tmp_path / "inputs"), "--out", str(tmp_path / "out"),
                 "--certificate", str(tmp_path / "c.vipr")])
    assert code != 0
    assert "--certificate is for a single input" in capsys.readouterr().err


@pytest.mark.slow
def test_explain_writes_the_problem_beside_its_certificate(tmp_path: Path) -> None:
    """`explain --certificate` writes out.smug beside out.vipr, and the checker accepts them."""
    import subprocess
    import sys

    out = tmp_path / "out.vipr"
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "explain", "--index", "3", "--quiet",
                           "--time-limit", "60", "--out", str(tmp_path / "res"), "--certificate", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"certificate {out}: optimum" in proc.stdout
    check = subprocess.run([sys.executable, "-m", "smug_opt", "check-certificate", str(tmp_path / "out.smug"),
                            str(out)], capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
