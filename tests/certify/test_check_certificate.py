"""The VIPR verifier on the specification's own examples, and each way a certificate can be
tampered with: every one is rejected, naming the step that fails."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smug_opt.check_certificate import CertificateRejected, Proven
from smug_opt.check_certificate.tokens import TokenStream, parse_value
from smug_opt.check_certificate.verifier import verify
from smug_opt.check_certificate.vipr_reader import read_header

# Example 3 of Cheung, Gleixner, Steffy (2017), as in github.com/ambros-gleixner/VIPR
# (code/paper_eg3.vipr): {2x + 3y >= 1, 3x - 4y <= 2, -x + 6y <= 3} has no integer point.
PAPER_EG3 = """\
% Example 3 in the paper
VER 1.0
VAR 2
x y
INT 2
0 1
OBJ min
0
CON 3 0
C1  G 1  2  0 2  1 3
C2  L 2  2  0 3  1 -4
C3  L 3  2  0 -1  1 6
RTP infeas
SOL 0
DER 11
A1  L 0   1  0 1  { asm } -1
A2  G 1   1  0 1  { asm } -1
A3  L 0   1  1 1  { asm } -1
C4  G 1   0       { lin 3  0 1  3 -2  5 -3 } 12
A4  G 1   1  1 1  { asm } -1
C5  G 1   0       { lin 3  2 -1/3  3 -1/3  7 2 } 12
C6  G 1/4 1  1 1  { lin 2  1 -1/4  4 3/4 } 10
C7  G 1   1  1 1  { rnd 1  9 1 } 11
C8  G 1   0       { lin 3 1 -1/3  2 -1  10 14/3 } 13
C9  G 1   0       { uns 6 5  8 7 } 13
C10 G 1   0       { uns 11 4  12 3 } -1
"""

# The specification's example (cert_spec_v1_0.md, cg.vipr): min x + y, 4x + y >= 1,
# 4x - y <= 2, optimum 1, proven by two Chvátal-Gomory roundings.
SPEC_CG = """\
VER 1.0
VAR 2
x y
INT 2
0 1
OBJ min
2  0 1  1 1
CON 2 0
C1 G 1  2  0 4  1 1
C2 L 2  2  0 4  1 -1
RTP range 1 1
SOL 2
feas 2  0 1  1 2
opt 1  1 1
DER 4
C3 G -1/2  1  1 1   { lin 2  0 1/2  1 -1/2 } 3
C4 G 0     1  1 1   { rnd 1  2 1 } 4
C5 G 1/4   OBJ     { lin 2  0 1/4  3 3/4 } 5
C6 G 1     OBJ     { rnd 1  4 1 } 0
"""


def check(tmp_path: Path, text: str, **limits) -> Proven:
    path = tmp_path / "c.vipr"
    path.write_text(text)
    stream = TokenStream(path, max_bytes=limits.pop("max_bytes", 10**6))
    return verify(read_header(stream), stream, **limits)


def rejected(tmp_path: Path, text: str, **limits) -> str:
    with pytest.raises(CertificateRejected) as caught:
        check(tmp_path, text, **limits)
    return str(caught.value)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_the_papers_infeasibility_certificate_is_accepted(tmp_path):
    proven = check(tmp_path, PAPER_EG3)
    assert proven.infeasible and proven.describe() == "infeasible" and proven.derivations == 11


def test_the_specifications_optimality_certificate_is_accepted(tmp_path):
    proven = check(tmp_path, SPEC_CG)
    assert (proven.lower, proven.upper) == (1, 1) and proven.describe() == "optimal value 1"


def test_a_lower_bound_alone_is_reported_as_one(tmp_path):
    text = edit(edit(SPEC_CG, "RTP range 1 1", "RTP range 1 inf"), "SOL 2\nfeas 2  0 1  1 2\nopt 1  1 1",
                "SOL 0")
    assert check(tmp_path, text).describe() == "lower bound 1"


def test_a_changed_multiplier_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(PAPER_EG3, "lin 3  0 1  3 -2  5 -3", "lin 3  0 1  3 -2  5 -2"))
    assert message.startswith("derivation 'C4' (constraint 6): lin combination gives the "
                              "coefficient 1 on y where the derivation states 0")


def test_a_multiplier_of_the_wrong_sign_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(PAPER_EG3, "lin 3  0 1  3 -2  5 -3", "lin 3  0 1  3 2  5 -3"))
    assert "'C4'" in message and "wrong sign" in message


def test_a_dropped_node_is_rejected(tmp_path):
    """Without C8 (the proof of the branch x >= 1) the unsplit has no proof of that branch."""
    text = edit(PAPER_EG3, "C8  G 1   0       { lin 3 1 -1/3  2 -1  10 14/3 } 13\n", "")
    text = edit(edit(text, "DER 11", "DER 10"), "uns 11 4  12 3", "uns 10 4  11 3")
    text = edit(edit(text, "{ rnd 1  9 1 } 11", "{ rnd 1  9 1 } -1"), "8 7 } 13", "8 7 } -1")
    message = rejected(tmp_path, text)
    assert message.startswith("derivation 'C10' (constraint 12): uns branch 'C7'")


def test_an_open_assumption_at_the_end_is_rejected(tmp_path):
    text = edit(edit(PAPER_EG3, "C10 G 1   0       { uns 11 4  12 3 } -1\n", ""), "DER 11", "DER 10")
    assert "rests on open assumption(s) 'A1'" in rejected(tmp_path, text)


def test_a_wrong_bound_in_rtp_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(SPEC_CG, "RTP range 1 1", "RTP range 2 2"))
    assert message.startswith("the last derivation 'C6'") and "does not prove OBJ G 2" in message


def test_an_upper_bound_no_solution_attains_is_rejected(tmp_path):
    assert "best solution has objective 3" in rejected(
        tmp_path, edit(SPEC_CG, "opt 1  1 1", "opt 1  1 3"))
    assert "SOL gives no solution" in rejected(
        tmp_path, edit(SPEC_CG, "SOL 2\nfeas 2  0 1  1 2\nopt 1  1 1", "SOL 0"))


def test_a_solution_that_violates_a_row_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(SPEC_CG, "feas 2  0 1  1 2", "feas 1  0 1"))
    assert message == "solution 'feas' violates constraint 'C2': its left-hand side is 4, not <= 2"


def test_a_fractional_solution_for_an_integer_variable_is_rejected(tmp_path):
    text = edit(SPEC_CG, "feas 2  0 1  1 2", "feas 2  0 1/2  1 2")
    assert "fractional value 1/2" in rejected(tmp_path, text)


def test_a_rounding_on_a_continuous_variable_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(SPEC_CG, "INT 2\n0 1", "INT 1\n0"))
    assert message == ("derivation 'C4' (constraint 3): rnd on a combination with the "
                       "coefficient 1 on the continuous variable y")


def test_a_rounding_of_fractional_coefficients_is_rejected(tmp_path):
    text = edit(SPEC_CG, "C4 G 0     1  1 1   { rnd 1  2 1 } 4", "C4 G 0     1  1 1/2   { rnd 1  2 1/2 } 4")
    assert "fractional coefficient 1/2 on y" in rejected(tmp_path, text)


def test_an_unsplit_on_a_non_integer_variable_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(PAPER_EG3, "INT 2\n0 1", "INT 1\n1"))
    assert message == ("derivation 'C10' (constraint 13): uns on a disjunction over the "
                       "continuous variable x")


def test_an_unsplit_that_misses_integers_is_rejected(tmp_path):
    """x <= 0 or x >= 2 leaves x = 1 out."""
    message = rejected(tmp_path, edit(PAPER_EG3, "A2  G 1   1  0 1", "A2  G 2   1  0 1"))
    assert message == ("derivation 'C10' (constraint 13): uns disjunction <= 0 or >= 2 does not "
                       "cover every integer")


UNSPLIT_AT = """VER 1.0
VAR 1
x
INT 1
0
OBJ min
0
CON 2 0
lo G 1 1 0 4
hi L 3/2 1 0 4
RTP infeas
SOL 0
DER 5
down L {down} 1 0 1 {{ asm }} -1
f1 G 1 0 {{ lin 2 0 1 2 -4 }} -1
up G {up} 1 0 1 {{ asm }} -1
f2 G 1 0 {{ lin 2 1 -1 4 4 }} -1
f G 1 0 {{ uns 3 2 5 4 }} -1
"""


def test_an_unsplit_at_a_fractional_point_is_rejected(tmp_path):
    """1 <= 4x <= 3/2 has no integer point: x <= 0 or x >= 1 proves it; x <= -1/2 or
    x >= 1/2 refutes both branches too, but misses x = 0."""
    assert check(tmp_path, UNSPLIT_AT.format(down=0, up=1)).infeasible
    message = rejected(tmp_path, UNSPLIT_AT.format(down="-1/2", up="1/2"))
    assert message == ("derivation 'f' (constraint 6): uns disjunction <= -1/2 or >= 1/2 does "
                       "not cover every integer")


def test_a_rounding_that_rounds_the_wrong_way_is_rejected(tmp_path):
    message = rejected(tmp_path, edit(SPEC_CG, "C6 G 1     OBJ     { rnd 1  4 1 } 0",
                                      "C6 G 2     OBJ     { rnd 1  4 1 } 0"))
    assert message.startswith("derivation 'C6' (constraint 5): rnd combination gives G 1")


def test_a_constraint_used_after_its_declared_last_use_is_rejected(tmp_path):
    text = edit(SPEC_CG, "C4 G 0     1  1 1   { rnd 1  2 1 } 4", "C4 G 0     1  1 1   { rnd 1  2 1 } 3")
    assert "uses constraint 3 ('C4') after its declared last use" in rejected(tmp_path, text)


def test_a_cutoff_from_a_solution_proves_no_bound_beyond_that_solution(tmp_path):
    """``sol`` lets a proof assume OBJ <= best - 1; with it, 0 >= 1 follows from x >= 5, and
    a falsehood dominates any bound: only bounds up to the best solution may be claimed."""
    text = """VER 1.0
VAR 1
x
INT 1
0
OBJ min
1 0 1
CON 1 0
c G 5 1 0 1
RTP range {lb} inf
SOL 1
s 1 0 5
DER 2
cut L 4 OBJ {{ sol }} -1
f G 1 0 {{ lin 2 0 1 1 -1 }} -1
"""
    assert check(tmp_path, text.format(lb=5)).lower == 5
    assert "beyond the best solution's 5" in rejected(tmp_path, text.format(lb=100))
    assert "stronger than the best solution allows" in rejected(
        tmp_path, text.format(lb=5).replace("cut L 4", "cut L 3"))


def test_infeasibility_with_a_solution_is_rejected(tmp_path):
    assert "SOL lists 1" in rejected(tmp_path, edit(PAPER_EG3, "SOL 0", "SOL 1\ns 0"))


def test_an_empty_der_proves_no_lower_bound(tmp_path):
    text = SPEC_CG[: SPEC_CG.index("DER")] + "DER 0\n"
    assert rejected(tmp_path, text) == "no derivation proves OBJ G 1 (DER is empty)"


def test_work_over_the_budget_is_refused(tmp_path):
    assert "over the work budget of 20" in rejected(tmp_path, PAPER_EG3, max_work=20)


def test_a_file_over_the_byte_limit_is_refused_before_reading(tmp_path):
    with pytest.raises(ValueError, match="over the limit of 100 bytes"):
        check(tmp_path, PAPER_EG3, max_bytes=100)


@pytest.mark.parametrize("old, new, phrase", [
    ("VER 1.0", "VER 2.0", "version '2.0' is not supported"),
    ("C1  G 1  2", "C1  G 1x  2", "must be a rational number"),
    ("C1  G 1  2", "C1  Q 1  2", "sense must be E, L or G"),
    ("{ asm } -1\nA2", "{ guess } -1\nA2", "unknown reason 'guess'"),
    ("C10 G 1   0       { uns 11 4  12 3 } -1\n", "C10 G 1   0       { uns 11 4  13 3 } -1\n",
     "must be an index in 0..12"),
    ("C10 G 1   0       { uns 11 4  12 3 } -1\n", "C10 G 1   0       { uns 11 4  12 3 } -1\nextra\n",
     "text after the 11 derivations"),
    ("DER 11", "DER 12", "the file ends where a constraint name was expected"),
    ("C1  G 1  2  0 2  1 3", "C1  G 1  2  0 2  0 3", "lists index 0 twice"),
    ("C1  G 1  2", "C1  G 1/0  2", "must be a rational number"),
])
def test_malformed_files_end_in_one_error_naming_the_problem(tmp_path, old, new, phrase):
    with pytest.raises(ValueError) as caught:
        check(tmp_path, edit(PAPER_EG3, old, new))
    assert phrase in str(caught.value) and "\n" not in str(caught.value)


def test_numbers_are_read_exactly_and_strictly():
    assert parse_value("-7/16") == Fraction(-7, 16)
    assert parse_value("0.1") == Fraction(1, 10)
    assert parse_value("1e-3") == Fraction(1, 1000)
    assert parse_value("2/4") == Fraction(1, 2)
    for bad in ("1_000", "1/0", "0x10", "nan", "inf", "1e99999", "½", "1/-2", ""):
        assert parse_value(bad) is None, bad


def test_assumption_sets_are_kept_within_their_limit(tmp_path, monkeypatch):
    from smug_opt.check_certificate import verifier

    monkeypatch.setattr(verifier, "MAX_ASSUMPTION_ENTRIES", 3)
    assert rejected(tmp_path, PAPER_EG3) == ("derivation 'C5' (constraint 8): the assumption sets "
                                             "kept reach 3 entries")


_POOL = ["0", "-1", "1", "2", "12", "100", "1/0", "-3/2", "99999999999999999999", "1e5000", "0.5",
         "x", "{", "}", "OBJ", "G", "L", "E", "-inf", "inf", "asm", "lin", "rnd", "uns", "sol"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([PAPER_EG3, SPEC_CG]), st.data())
def test_a_mutated_certificate_is_accepted_or_refused_in_one_error(tmp_path, text, data):
    """Replacing, deleting or repeating tokens never crashes the checker: the answer is a
    verdict or one ValueError (CertificateRejected is one)."""
    tokens = [t for line in text.splitlines() if not line.startswith("%") for t in line.split()]
    for _ in range(data.draw(st.integers(1, 3))):
        k = data.draw(st.integers(0, len(tokens) - 1))
        action = data.draw(st.sampled_from(["replace", "delete", "repeat"]))
        if action == "replace":
            tokens[k] = data.draw(st.sampled_from(_POOL))
        elif action == "delete":
            del tokens[k]
        else:
            tokens.insert(k, tokens[k])
    try:
        check(tmp_path, " ".join(tokens), max_work=10**6)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)


def test_a_certificate_on_one_line_longer_than_a_read_block_is_read_whole(tmp_path):
    """Reading goes a megabyte at a time and cuts at line breaks: a 3 MB line is gathered."""
    tokens = [t for line in PAPER_EG3.splitlines() if not line.startswith("%") for t in line.split()]
    middle = len(tokens) // 2
    text = " ".join(tokens[:middle]) + " " * (3 << 20) + " ".join(tokens[middle:])
    assert check(tmp_path, text, max_bytes=4 << 20).infeasible


def test_the_checker_shares_no_code_with_the_certificate_writer_or_the_solvers():
    """Its modules import the standard library, numpy, each other, and the problem's
    reading (smug_opt.ir, smug_opt.problem_file) only; smug_opt.cli's module imports only
    the checker."""
    import ast

    root = Path(__file__).resolve().parents[2] / "smug_opt"
    allowed = {"__future__", "dataclasses", "fractions", "math", "re", "itertools", "os",
               "pathlib", "collections", "numpy", "argparse", "sys", "time",
               "smug_opt.check_certificate", "smug_opt.ir", "smug_opt.problem_file"}
    files = [*(root / "check_certificate").glob("*.py"), root / "cli" / "check_certificate.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert any(name == a or name.startswith(a + ".") for a in allowed), (
                    f"{path.name} imports {name}")


def test_denominators_past_the_bit_cap_are_refused_before_they_are_computed(tmp_path):
    """Pairwise coprime denominators (2^p - 1 for primes p) have a common denominator as long
    as their sum: a stated row, a solution and a combination each stop at the cap."""
    primes = [2**p - 1 for p in (4001, 5003, 6007, 7001, 8009, 9001, 10007, 11003, 12007)]
    row = " ".join(f"{j} 1/{p}" for j, p in enumerate(primes))
    head = f"VER 1.0\nVAR {len(primes)}\n" + " ".join(f"v{j}" for j in range(len(primes)))
    head += "\nINT 0\nOBJ min\n0\n"
    with pytest.raises(ValueError, match="constraint c: a constraint needs a common denominator"):
        check(tmp_path, head + f"CON 1 0\nc G 0 {len(primes)} {row}\nRTP infeas\nSOL 0\nDER 0\n")
    singles = "".join(f"c{j} G 0 1 {j} 1/{p}\n" for j, p in enumerate(primes))
    cons = f"CON {len(primes)} 0\n{singles}"
    with pytest.raises(ValueError, match="solution s's values need a common denominator"):
        check(tmp_path, head + cons + f"RTP range -inf inf\nSOL 1\ns {len(primes)} {row}\nDER 0\n")
    combination = " ".join(f"{j} 1" for j in range(len(primes)))
    text = head + cons + (f"RTP infeas\nSOL 0\nDER 1\nd G 0 0 {{ lin {len(primes)} "
                          f"{combination} }} -1\n")
    assert "common denominator of over 65,536 bits" in rejected(tmp_path, text)
