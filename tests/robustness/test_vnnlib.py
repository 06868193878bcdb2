"""The VNN-LIB reader: every supported construct, and one clear refusal for the rest."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from smug_opt.vnnlib import MAX_DISJUNCTS, VnnlibError, parse_vnnlib, read_vnnlib

SHARED = Path(__file__).resolve().parents[3] / "shared" / "nets" / "vnncomp2021" / "benchmarks"

HEAD = """; a comment
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(declare-const Y_2 Real)
(assert (<= X_0 0.5))
(assert (>= X_0 -0.5))
(assert (<= X_1 1))  ; trailing comment
(assert (>= X_1 0))
"""


def test_box_and_single_comparison():
    spec = parse_vnnlib(HEAD + "(assert (>= Y_0 Y_1))\n")
    assert spec.lo.tolist() == [-0.5, 0.0] and spec.hi.tolist() == [0.5, 1.0]
    assert spec.num_inputs == 2 and spec.num_outputs == 3
    (d,) = spec.disjuncts
    # Y_0 >= Y_1  <=>  -Y_0 + Y_1 <= 0
    assert d.matrix.tolist() == [[-1.0, 1.0, 0.0]] and d.rhs.tolist() == [0.0]
    assert not d.strict.any()
    assert spec.unsafe(np.array([2.0, 1.0, 0.0])) and not spec.unsafe(np.array([0.0, 1.0, 0.0]))


def test_or_of_ands_and_constants():
    spec = parse_vnnlib(HEAD + """(assert (or
        (and (>= Y_0 Y_2) (<= Y_1 3.5))
        (and (< Y_2 -1))
    ))""")
    first, second = spec.disjuncts
    assert first.matrix.tolist() == [[-1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    assert first.rhs.tolist() == [0.0, 3.5]
    assert second.matrix.tolist() == [[0.0, 0.0, 1.0]] and second.rhs.tolist() == [-1.0]
    assert second.strict.tolist() == [True]
    assert spec.unsafe(np.array([0.0, 0.0, -2.0])) and not spec.unsafe(np.array([-5.0, 0.0, -1.0]))


def test_linear_terms_and_equality():
    spec = parse_vnnlib(HEAD + "(assert (<= (+ Y_0 (* -2 Y_1) (- Y_2)) (- 3 1)))\n"
                               "(assert (= Y_2 0.25))\n")
    (d,) = spec.disjuncts  # two asserts conjoined: one disjunct with three rows
    assert d.matrix.tolist() == [[1.0, -2.0, -1.0], [0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]
    assert d.rhs.tolist() == [2.0, 0.25, -0.25]


def test_asserts_conjoin_as_a_cross_product():
    spec = parse_vnnlib(HEAD + "(assert (or (>= Y_0 1) (>= Y_1 1)))\n(assert (or (>= Y_2 1) (<= Y_2 0)))\n")
    assert len(spec.disjuncts) == 4
    assert all(d.matrix.shape == (2, 3) for d in spec.disjuncts)


def test_input_bounds_with_coefficient_strict_and_reversed():
    spec = parse_vnnlib(HEAD.replace("(assert (<= X_0 0.5))", "(assert (<= (* 2 X_0) 1))")
                        .replace("(assert (>= X_1 0))", "(assert (< 0 X_1))") + "(assert (>= Y_0 0))")
    assert spec.hi[0] == 0.5
    assert 0.0 < spec.lo[1] < 1e-300  # X_1 > 0 on the floats: at least the next float
    closed_lo, closed_hi = spec.closure  # its closure over the reals: X_1 >= 0
    assert closed_lo.tolist() == [-0.5, 0.0] and closed_hi.tolist() == [0.5, 1.0]


def test_closure_of_strict_bounds_is_the_tightest_real_box():
    spec = parse_vnnlib(HEAD + "(assert (< X_0 0.25))(assert (<= X_0 0.25))(assert (> X_1 0.5))"
                               "(assert (>= X_1 0.75))(assert (>= Y_0 0))")
    assert spec.hi[0] == np.nextafter(0.25, -1) and spec.lo[1] == 0.75
    closed_lo, closed_hi = spec.closure
    assert closed_hi[0] == 0.25 and closed_lo[1] == 0.75
    plain = parse_vnnlib(HEAD + "(assert (>= Y_0 0))")
    assert plain.closed_lo is None and plain.closure[0] is plain.lo  # no strict bound: one box


def test_gzipped_file_found_from_the_plain_name(tmp_path):
    text = HEAD + "(assert (>= Y_0 Y_1))\n"
    (tmp_path / "p.vnnlib.gz").write_bytes(gzip.compress(text.encode()))
    spec = read_vnnlib(tmp_path / "p.vnnlib")  # the competitions' csv names the plain file
    assert spec.num_outputs == 3
    (tmp_path / "q.vnnlib").write_text(text)
    assert read_vnnlib(tmp_path / "q.vnnlib").lo.tolist() == spec.lo.tolist()


def test_size_limit_applies_before_and_after_decompressing(tmp_path):
    text = HEAD + "(assert (>= Y_0 Y_1))\n" + ";" * 5000 + "\n"
    (tmp_path / "big.vnnlib").write_text(text)
    with pytest.raises(VnnlibError, match="more than the 1000"):
        read_vnnlib(tmp_path / "big.vnnlib", max_bytes=1000)
    (tmp_path / "bomb.vnnlib.gz").write_bytes(gzip.compress(text.encode()))
    assert (tmp_path / "bomb.vnnlib.gz").stat().st_size < 1000
    with pytest.raises(VnnlibError, match="decompresses to more than 1000"):
        read_vnnlib(tmp_path / "bomb.vnnlib.gz", max_bytes=1000)


@pytest.mark.parametrize("extra, message", [
    ("(assert (<= (+ X_0 X_1) 1))", "line 11: input constraint over 2 inputs"),
    ("(assert (or (<= (- X_0 X_1) 0.1) (>= Y_0 0)))", "line 11: input constraint over 2 inputs"),
    ("(assert (>= Y_0 X_0))", "line 11: constraint .* mixes inputs and outputs"),
    ("(assert (or (<= X_0 0.1) (>= Y_0 (+ 1 X_1))))", "line 11: constraint .* mixes inputs and outputs"),
    ("(assert (<= (* Y_0 Y_1) 1))", "line 11: product of variables is not linear"),
    ("(assert (not (>= Y_0 0)))", "line 11: unsupported formula \\(not"),
    ("(assert (>= Y_7 0))", "line 11: Y_7 is used but not declared"),
    ("(assert (>= Y_0 abc))", "line 11: 'abc' is neither a number"),
    ("(check-sat)", "line 11: unsupported command 'check-sat'"),
    ("(declare-const Z_0 Real)", "line 11: variable 'Z_0' is not X_i"),
    ("(declare-const X_2 Int)", "line 11: sort 'Int' of X_2 unsupported"),
    ("(assert (>= Y_0 0)", "line 11: '\\(' never closed"),
    ("(assert (>= Y_0 0)))", "line 11: unbalanced"),
])
def test_refusals_name_the_construct_and_line(extra, message):
    with pytest.raises(VnnlibError, match=message):
        parse_vnnlib(HEAD + extra + "\n(assert (>= Y_0 Y_1))\n")


@pytest.mark.parametrize("text, message", [
    (HEAD, "no output constraint"),
    (HEAD.replace("(assert (>= X_1 0))", "") + "(assert (>= Y_0 0))", "X_1 has no finite lower"),
    (HEAD + "(assert (>= X_0 0.7))(assert (>= Y_0 0))", "X_0 has lower bound 0.7 above"),
    (HEAD.replace("(declare-const Y_1 Real)", "") + "(assert (>= Y_0 0))", "Y_1 is not declared"),
])
def test_whole_file_refusals(text, message):
    with pytest.raises(VnnlibError, match=message):
        parse_vnnlib(text)


def test_too_many_disjuncts_refused():
    big = "(assert (or " + " ".join(f"(>= Y_0 {i})" for i in range(101)) + "))\n"
    with pytest.raises(VnnlibError, match=f"past {MAX_DISJUNCTS} disjuncts"):
        parse_vnnlib(HEAD + big + big)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/nets/vnncomp2021 is not present")
def test_competition_specs_read():
    spec = read_vnnlib(SHARED / "mnistfc" / "prop_0_0.03.vnnlib")  # gzipped on disk
    assert spec.num_inputs == 784 and spec.num_outputs == 10 and len(spec.disjuncts) == 9
    assert np.all(spec.lo <= spec.hi) and np.all(spec.hi - spec.lo <= 0.06 + 1e-6)
    label = 8  # the file's comment: "Mnist property with label: 8."
    for d in spec.disjuncts:
        assert d.matrix[0, label] == 1.0 and d.matrix.sum() == 0.0
