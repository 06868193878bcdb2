"""End to end: `smug-opt solve --certificate` writes a certificate, the independent checker
accepts it, and every tampering with it (a multiplier, a node, the claimed bound, the
solution, the problem, the last step, a derived row's bound or sense, a citation of itself
or of a later row, an unsplit over two branchings, the objective, the integers, the names)
is rejected."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from smug_opt import Problem, save_problem
from smug_opt.check_certificate import CertificateRejected, check_certificate
from smug_opt.cli import main


def knapsack_problem(first_rhs_change: float = 0.0) -> Problem:
    """Pick items of the largest value under four capacities (12 binaries): the LP bound
    and its cuts leave a gap that a branch-and-bound (asm, uns) closes."""
    rng = np.random.default_rng(0)
    A = rng.choice([0.0, 0.0, 3.0, 5.0, 7.0, 0.5], size=(4, 12))
    rhs = np.floor(A.sum(1) / 2) + 0.5
    rhs[0] += first_rhs_change
    costs = -rng.choice([2.0, 3.0, 5.0, 7.0], size=12)
    return Problem.from_arrays(A, ["<="] * 4, rhs, objective=costs)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, str, Fraction]:
    """The problem file, the certificate's text and the optimum it claims."""
    folder = tmp_path_factory.mktemp("written")
    problem, vipr = folder / "p.smug", folder / "p.vipr"
    save_problem(knapsack_problem(), problem)
    assert main(["solve", str(problem), "--backend", "highs", "--certificate", str(vipr)]) == 0
    text = vipr.read_text()
    claim = re.search(r"^RTP range (\S+) (\S+)$", text, flags=re.MULTILINE)
    assert claim and claim.group(1) == claim.group(2)
    return problem, text, Fraction(claim.group(1))


def check_text(problem: Path, text: str, tmp_path: Path):
    path = tmp_path / "t.vipr"
    path.write_text(text)
    return check_certificate(problem, path)


def split(text: str) -> tuple[list[str], list[str], int]:
    """(lines up to and with DER, derivation lines, index of the first derivation)."""
    lines = [line for line in text.splitlines() if line.strip()]
    der = next(i for i, line in enumerate(lines) if line.startswith("DER "))
    first = int(next(line for line in lines if line.startswith("CON ")).split()[1])
    return lines[: der + 1], lines[der + 1:], first


def test_the_writers_certificate_is_accepted(written, capsys):
    problem, _, optimum = written
    path = problem.with_suffix(".vipr")
    assert main(["check-certificate", str(problem), str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"proven: optimal value {optimum} (p.smug, ")


def test_a_changed_multiplier_is_rejected(written, tmp_path):
    problem, text, _ = written
    head, ders, _ = split(text)
    k = next(k for k, line in enumerate(ders) if re.search(r"\{ (lin|rnd) [1-9]", line))
    before, _, reason = ders[k].partition("{ ")
    fields = reason.split()
    fields[3] = str(Fraction(fields[3]) * 2)  # kind, count, index, multiplier
    ders[k] = before + "{ " + " ".join(fields)
    name = before.split()[0]
    with pytest.raises(CertificateRejected, match=rf"^derivation '{re.escape(name)}'"):
        check_text(problem, "\n".join(head + ders), tmp_path)


def test_a_dropped_node_is_rejected(written, tmp_path):
    """The first branch proof an unsplit uses is deleted (later indices renumbered, so the
    unsplit now points at whatever followed it)."""
    problem, text, _ = written
    head, ders, first = split(text)
    uns = next(line for line in ders if "{ uns " in line)
    dropped = int(uns.partition("{ uns ")[2].split()[0])
    assert dropped >= first

    def renumber(line: str) -> str:
        before, _, reason = line.partition("{ ")
        if not reason:
            return line
        fields = reason.split()
        if fields[0] == "uns":
            at = [1, 2, 3, 4]
        elif fields[0] in ("lin", "rnd"):
            at = list(range(2, 2 + 2 * int(fields[1]), 2))
        else:
            at = []
        for i in at:
            fields[i] = str(int(fields[i]) - (int(fields[i]) > dropped))
        return before + "{ " + " ".join(fields)

    kept = [renumber(line) for k, line in enumerate(ders) if first + k != dropped]
    head[-1] = f"DER {len(kept)}"
    with pytest.raises(ValueError, match=r"derivation '"):
        check_text(problem, "\n".join(head + kept), tmp_path)


def test_a_wrong_bound_in_rtp_is_rejected(written, tmp_path):
    problem, text, optimum = written
    above = text.replace(f"RTP range {optimum} {optimum}", f"RTP range {optimum + 1} {optimum + 1}")
    with pytest.raises(CertificateRejected, match=f"does not prove OBJ G {optimum + 1}"):
        check_text(problem, above, tmp_path)
    below = text.replace(f"RTP range {optimum} {optimum}", f"RTP range {optimum - 1} {optimum - 1}")
    with pytest.raises(CertificateRejected, match=f"best solution has objective {optimum}"):
        check_text(problem, below, tmp_path)


def test_a_solution_that_violates_a_row_is_rejected(written, tmp_path):
    problem, text, _ = written
    everything = "12 " + " ".join(f"{j} 1" for j in range(12))  # over every capacity
    bad = re.sub(r"^SOL 1\n(\S+) .*$", rf"SOL 1\n\1 {everything}", text, count=1, flags=re.MULTILINE)
    assert bad != text
    with pytest.raises(CertificateRejected, match="violates constraint 'r"):
        check_text(problem, bad, tmp_path)


def test_a_certificate_for_another_problem_is_rejected(written, tmp_path):
    _, text, _ = written
    other = tmp_path / "other.smug"
    save_problem(knapsack_problem(first_rhs_change=1.0), other)
    with pytest.raises(CertificateRejected, match="states another problem than other.smug: "
                                                  r"constraint 24 \('r0'\) is L "):
        check_text(other, text, tmp_path)


def test_a_certificate_without_its_last_step_is_rejected(written, tmp_path):
    problem, text, _ = written
    head, ders, _ = split(text)
    head[-1] = f"DER {len(ders) - 1}"
    with pytest.raises(CertificateRejected, match="the last derivation"):
        check_text(problem, "\n".join(head + ders[:-1]), tmp_path)


def test_a_strengthened_solves_claim_is_certified_about_the_original_problem(tmp_path):
    """--strengthen changes what the solver sees, not the certificate: it states the .smug's
    own MILP (the writer derives its own fixings and cuts), and the checker accepts it."""
    problem, vipr = tmp_path / "p.smug", tmp_path / "p.vipr"
    save_problem(knapsack_problem(), problem)
    plain = tmp_path / "plain.vipr"
    for flag, path in (("--strengthen", vipr), ("--no-strengthen", plain)):
        assert main(["solve", str(problem), "--backend", "highs", flag, "--certificate", str(path)]) == 0

    def milp(path: Path) -> list[str]:  # VER to CON: the problem the certificate is about
        lines = [line for line in path.read_text().splitlines() if not line.startswith("%")]
        return lines[:next(k for k, line in enumerate(lines) if line.startswith("RTP "))]

    assert milp(vipr) == milp(plain)
    assert check_certificate(problem, vipr).describe() == check_certificate(problem, plain).describe()


def _derived(ders: list[str], kind: str, sense: str | None = None) -> int:
    """The first derivation line of ``kind`` (lin, rnd, uns) and, given, ``sense``."""
    return next(k for k, line in enumerate(ders)
                if f"{{ {kind} " in line and (sense is None or line.split()[1] == sense))


def test_a_derived_row_claiming_more_than_its_reason_gives_is_rejected(written, tmp_path):
    """The right-hand side raised past what the multipliers give, or the sense turned."""
    problem, text, _ = written
    head, ders, _ = split(text)
    k = _derived(ders, "lin", "G")
    fields = ders[k].split()
    raised = [fields[0], "G", str(Fraction(fields[2]) + 100), *fields[3:]]
    with pytest.raises(CertificateRejected, match=r"lin combination gives G .* which does not dominate G"):
        check_text(problem, "\n".join(head + ders[:k] + [" ".join(raised)] + ders[k + 1:]), tmp_path)
    k = _derived(ders, "rnd", "L")
    for sense in ("G", "E"):
        fields = ders[k].split()
        fields[1] = sense
        with pytest.raises(CertificateRejected, match=f"gives L .* which does not dominate {sense} "):
            check_text(problem, "\n".join(head + ders[:k] + [" ".join(fields)] + ders[k + 1:]), tmp_path)


def test_a_derivation_citing_itself_or_a_later_one_is_rejected(written, tmp_path):
    problem, text, _ = written
    head, ders, first = split(text)
    k = _derived(ders, "lin")
    before, _, reason = ders[k].partition("{ ")
    for cited in (first + k, first + k + 1):
        fields = reason.split()
        fields[2] = str(cited)  # lin, count, the first index
        tampered = before + "{ " + " ".join(fields)
        with pytest.raises(ValueError, match=rf"must be an index in 0\.\.{first + k - 1}, found '{cited}'"):
            check_text(problem, "\n".join(head + ders[:k] + [tampered] + ders[k + 1:]), tmp_path)


def test_an_unsplit_over_two_different_branchings_is_rejected(written, tmp_path):
    """An unsplit whose second branch's assumption is another variable's (or the first
    branch's own): not a disjunction, so its conclusion does not follow."""
    problem, text, _ = written
    head, ders, first = split(text)
    k = _derived(ders, "uns")
    before, _, reason = ders[k].partition("{ ")
    _, i1, l1, i2, _, *rest = reason.split()
    assumed = {first + j: line.split()[3:5] for j, line in enumerate(ders) if "{ asm }" in line}
    other = next(a for a, cols in assumed.items() if cols != assumed[int(l1)] and a < first + k)
    for l2_new in (other, int(l1)):
        tampered = before + "{ " + " ".join(["uns", i1, l1, i2, str(l2_new), *rest])
        with pytest.raises(CertificateRejected, match="is not a <= b and the same form >= b \\+ 1"):
            check_text(problem, "\n".join(head + ders[:k] + [tampered] + ders[k + 1:]), tmp_path)


@pytest.mark.parametrize(("old", "new", "phrase"), [
    ("OBJ min", "OBJ max", "OBJ maximises; the problem minimises"),
    ("OBJ min\n12 0 ", "OBJ min\n12 0 1+", "OBJ has the coefficient"),
    ("INT 12\n0 1 2 3 4 5 6 7 8 9 10 11", "INT 11\n0 1 2 3 4 5 6 7 8 9 10", "x11 is not integer in INT"),
    ("x0 x1 x2", "x0 x2 x1", "variable 1 is named 'x2', not 'x1'"),
])
def test_a_certificate_stating_the_objective_integers_or_names_otherwise_is_rejected(
        written, tmp_path, old, new, phrase):
    problem, text, _ = written
    if new.endswith("+"):  # the first objective coefficient, plus one
        coefficient = text.partition(old)[2].split()[0]
        old, new = old + coefficient, old + str(Fraction(coefficient) + 1)
    assert old in text
    another = f"states another problem than p.smug: .*{re.escape(phrase)}"
    with pytest.raises(CertificateRejected, match=another):
        check_text(problem, text.replace(old, new, 1), tmp_path)
