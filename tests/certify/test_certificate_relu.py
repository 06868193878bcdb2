"""VIPR certificates of problems with ReLU constraints (big-M rows with a phase binary per
ReLU, docs/certificates.md): written for brute-forced and backends' claims, accepted by the
independent checker with the brute-forced optimum, and rejected once tampered with."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import skip_unless_accepts, usable_first_party
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt import Problem, ProblemBuilder, save_problem, solve
from smug_opt.certificate import CertificateError, write_certificate
from smug_opt.certificate.milp import exact_milp
from smug_opt.check_certificate import CertificateRejected, check_certificate
from smug_opt.cli import main
from smug_opt.testing.brute_force import brute_force
from smug_opt.testing.instances import relu_network

weight = st.one_of(st.integers(-3, 3).map(float), st.sampled_from([0.5, -1.5, 0.1, 1 / 3, -0.7]))


@st.composite
def relu_problems(draw) -> Problem:
    """2-5 binaries and 1-3 ReLUs (each reading the binaries and earlier outputs), declared
    pre-activation bounds absent, loose or cutting, rows over everything and a strict one
    over the binaries (a strict row over a continuous variable is stated as its closure,
    which cannot prove an infeasibility it alone causes), an integral objective over the
    binaries (the ReLU outputs' share makes leaves' LP bounds need exact duals, which the
    certified branch-and-bound does not compute yet: docs/certificates.md)."""
    nb, nr = draw(st.integers(2, 5)), draw(st.integers(1, 3))
    b = ProblemBuilder()
    m = b.add_binaries(nb)
    outs = b.add_continuous(nr, 0.0, [draw(st.sampled_from([2.0, 5.0, 40.0])) for _ in range(nr)])
    for r in range(nr):
        reads = np.concatenate([m, outs[:r]])
        coefs = [[draw(weight) for _ in reads]]
        lo = draw(st.sampled_from([-np.inf, -20.0, -1.0, 0.5]))
        hi = draw(st.sampled_from([np.inf, 20.0, 1.0, -0.5]))
        if lo > hi:
            lo, hi = hi, lo
        b.add_relus(outs[r:r + 1], coefs, reads, draw(weight), lo=lo, hi=hi)
    every = np.concatenate([m, outs])
    for _ in range(draw(st.integers(1, 2))):
        b.add_constraints([[draw(weight) for _ in every]], every, draw(st.sampled_from(["<=", ">="])),
                          draw(weight))
    b.add_constraints([[draw(weight) for _ in m]], m, draw(st.sampled_from(["<", ">"])), draw(weight))
    b.set_objective(m, [draw(st.integers(0, 3).map(float)) for _ in m])
    return b.build()


def _certified(problem: Problem, claim: str, x, folder: Path) -> str:
    """Write the certificate, save the problem beside it, and what the checker proves."""
    save_problem(problem, folder / "p.smug")
    write_certificate(problem, claim, x, folder / "p.vipr", seconds=30)
    return check_certificate(folder / "p.smug", folder / "p.vipr").describe()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(problem=relu_problems())
def test_certificates_prove_the_brute_forced_answer(problem: Problem, tmp_path_factory) -> None:
    """The brute-forced optimum (or infeasibility) is certified and the checker proves
    exactly it; INFEASIBLE for a feasible problem is refused. Derandomized: of hypothesis
    seeds 1-6, one draws an instance whose certified branch-and-bound cannot close a leaf
    from HiGHS's float answers (no certificate: a limit of completeness, never a wrong
    certificate; docs/certificates.md)."""
    folder = tmp_path_factory.mktemp("relu")
    truth = brute_force(problem)
    if not truth.feasible:
        assert _certified(problem, "INFEASIBLE", None, folder) == "infeasible"
        return
    assert _certified(problem, "OPTIMAL", truth.x, folder) == f"optimal value {truth.objective}"
    with pytest.raises(CertificateError):
        write_certificate(problem, "INFEASIBLE", None, folder / "q.vipr", seconds=30)


def _declared(seed: int) -> Problem:
    """relu_network with the pre-activation bounds declared (the whole-network encoder's
    way): each the interval of ``W1 (M*x) + b1`` over the masks."""
    problem = relu_network(seed)
    pre = problem.relu_in.toarray()
    lo = np.minimum(pre, 0).sum(axis=1) + problem.relu_const
    hi = np.maximum(pre, 0).sum(axis=1) + problem.relu_const
    return Problem(problem.kinds, problem.lb, problem.ub, problem.A, problem.senses, problem.rhs,
                   problem.objective, problem.relu_out, problem.relu_in, problem.relu_const,
                   np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf))


def test_the_big_m_uses_the_tighter_of_the_declared_and_the_interval_bounds() -> None:
    """Without declared bounds L and U come from the variables' bounds; declared ones that
    are tighter replace them (the phase's coefficients in the on/off rows are -L and -U)."""
    b = ProblemBuilder()
    m = b.add_binaries(2)
    y = b.add_continuous(2, 0.0, 10.0)
    b.add_relus(y[:1], [[2.0, -3.0]], m, 0.5)
    b.add_relus(y[1:], [[2.0, -3.0]], m, 0.5, lo=-1.0, hi=100.0)
    milp = exact_milp(b.build())
    rows = {row.name: row for row in milp.rows}
    assert milp.names == ("x0", "x1", "x2", "x3", "d0", "d1")
    assert milp.integer == (True, True, False, False, True, True)
    on, off = rows["relu0_on"], rows["relu0_off"]
    assert dict(zip(on.cols, on.coefs, strict=True))[4] == Fraction(5, 2)  # -L, L = 0.5 - 3
    assert off.coefs == (1, Fraction(-5, 2)) and off.rhs == 0  # U = 0.5 + 2
    assert dict(zip(rows["relu1_on"].cols, rows["relu1_on"].coefs, strict=True))[5] == 1  # L = -1
    assert "relu0_lo" not in rows and "relu0_hi" not in rows  # L <= 0 <= U


@pytest.mark.parametrize("backend", usable_first_party())
def test_every_backends_claims_are_certified_and_checked(backend: str, tmp_path: Path) -> None:
    """Each backend's OPTIMAL on small stress-case encodings (ReLU networks, with and without
    declared bounds) gets a certificate the checker accepts with the brute-forced optimum."""
    for k, problem in enumerate([relu_network(1), relu_network(2, gamma=0.9), _declared(5)]):
        skip_unless_accepts(backend, problem)
        result = solve(problem, backend, time_limit=30, certify=False)
        truth = brute_force(problem)
        assert result.status.name == "OPTIMAL" and truth.feasible, (backend, k, result.status)
        folder = tmp_path / str(k)
        folder.mkdir()
        assert _certified(problem, "OPTIMAL", result.x, folder) == f"optimal value {truth.objective}"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, str, Fraction]:
    """`smug-opt solve --certificate` on a stress-case encoding that needs branching."""
    folder = tmp_path_factory.mktemp("written")
    problem, vipr = folder / "p.smug", folder / "p.vipr"
    save_problem(_declared(1), problem)
    assert main(["solve", str(problem), "--backend", "highs", "--certificate", str(vipr)]) == 0
    text = vipr.read_text()
    assert "{ uns " in text and "relu0_on" in text
    claim = re.search(r"^RTP range (\S+) (\S+)$", text, flags=re.MULTILINE)
    assert claim is not None
    return problem, text, Fraction(claim.group(1))


def _check(problem: Path, text: str, tmp_path: Path):
    (tmp_path / "t.vipr").write_text(text)
    return check_certificate(problem, tmp_path / "t.vipr")


def _derivations(text: str) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    der = next(i for i, line in enumerate(lines) if line.startswith("DER "))
    return lines[:der + 1], lines[der + 1:]


def test_the_written_certificate_is_accepted(written, capsys) -> None:
    problem, _, optimum = written
    assert main(["check-certificate", str(problem), str(problem.with_suffix(".vipr"))]) == 0
    assert capsys.readouterr().out.startswith(f"proven: optimal value {optimum} (p.smug, ")


def test_a_changed_multiplier_is_rejected(written, tmp_path) -> None:
    problem, text, _ = written
    head, ders = _derivations(text)
    k = next(k for k, line in enumerate(ders) if re.search(r"\{ (lin|rnd) [1-9]", line))
    before, _, reason = ders[k].partition("{ ")
    fields = reason.split()
    fields[3] = str(Fraction(fields[3]) * 3)  # kind, count, index, multiplier
    ders[k] = before + "{ " + " ".join(fields)
    with pytest.raises(CertificateRejected, match=rf"^derivation '{re.escape(before.split()[0])}'"):
        _check(problem, "\n".join(head + ders), tmp_path)


def test_a_dropped_derivation_is_rejected(written, tmp_path) -> None:
    """The first derivation goes (and DER's count with it): the later ones' indices now
    name other constraints, and the checker says which derivation fails."""
    problem, text, _ = written
    head, ders = _derivations(text)
    head[-1] = f"DER {len(ders) - 1}"
    with pytest.raises(ValueError, match=r"derivation '|the last derivation"):
        _check(problem, "\n".join(head + ders[1:]), tmp_path)


def test_a_wrong_bound_is_rejected(written, tmp_path) -> None:
    problem, text, optimum = written
    above = text.replace(f"RTP range {optimum} {optimum}", f"RTP range {optimum + 1} {optimum + 1}")
    with pytest.raises(CertificateRejected, match=f"does not prove OBJ G {optimum + 1}"):
        _check(problem, above, tmp_path)


@pytest.mark.parametrize("row", ["relu0_on", "relu0_off"])
def test_a_changed_big_m_is_rejected(written, tmp_path, row: str) -> None:
    """The phase's coefficient in a big-M row (-L or -U) halved: another MILP than the
    problem's, named as its ReLU row."""
    problem, text, _ = written
    line = next(line for line in text.splitlines() if line.startswith(row + " "))
    fields = line.split()
    fields[-1] = str(Fraction(fields[-1]) / 2)  # the last coefficient is the phase's
    with pytest.raises(CertificateRejected, match=r"states another problem than p.smug: constraint \d+ "
                                                  rf"\('{row}'\) has the coefficient .* ReLU row"):
        _check(problem, text.replace(line, " ".join(fields)), tmp_path)


def test_a_solution_with_a_wrong_relu_output_is_rejected(written, tmp_path) -> None:
    """SOL's ReLU output raised by 1: the big-M rows (y <= z on the active side, y <= 0 on
    the other) no longer hold."""
    problem, text, _ = written
    sol = re.search(r"^opt (\d+) (.*)$", text, flags=re.MULTILINE)
    assert sol is not None
    load = problem_relu_output(problem)
    values = dict(zip(sol.group(2).split()[::2], sol.group(2).split()[1::2], strict=True))
    values[str(load)] = str(Fraction(values.get(str(load), "0")) + 1)
    pairs = " ".join(f"{j} {v}" for j, v in sorted(values.items(), key=lambda kv: int(kv[0])))
    bad = text.replace(sol.group(0), f"opt {len(values)} {pairs}")
    with pytest.raises(CertificateRejected, match="violates constraint 'relu0_"):
        _check(problem, bad, tmp_path)


def problem_relu_output(path: Path) -> int:
    from smug_opt import load_problem

    return int(load_problem(path).relu_out[0])
