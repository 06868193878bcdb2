"""The plugin guide answers what an author must otherwise guess, in step with the code,
and a conformance report reads well when printed."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from smug_opt import Capabilities, RawResult
from smug_opt.testing.run_checks import CheckOutcome, CheckResult, ConformanceReport

GUIDE = (Path(__file__).resolve().parents[2] / "README.md").read_text().split(
    "## Writing a backend plugin")[1].split("\n## ")[0]


def _signature(cls: type) -> str:
    parts = []
    for f in dataclasses.fields(cls):
        default = "" if f.default is dataclasses.MISSING else f"={f.default!r}"
        parts.append(f"{f.name}{default.replace(chr(39), chr(34))}")
    return f"{cls.__name__}({', '.join(parts)})"


def test_the_guide_gives_raw_results_fields_as_the_code_has_them():
    assert _signature(RawResult) in " ".join(GUIDE.split())
    for name in (f.name for f in dataclasses.fields(RawResult)):
        assert f"`{name}`" in GUIDE, name


def test_the_guide_gives_every_capability_and_its_default():
    assert all(f.default is False for f in dataclasses.fields(Capabilities))
    assert "`Capabilities()`** defaults to all False" in GUIDE
    for f in dataclasses.fields(Capabilities):
        assert f"`{f.name}`" in GUIDE, f.name


def test_the_guide_answers_the_authors_questions():
    text = " ".join(GUIDE.split())
    for answer in (
        "`lower` and `optimize` both run in the solver's worker process",  # where lower runs
        "it may be anything (an unpicklable solver object",                # what it may return
        "no constant term",                                                # MilpForm.objective
        "unscaled",
        "give `bound` as the solver's best *proven* dual bound",           # FEASIBLE/NO_SOLUTION
        "it takes any array-like of the form's `num_cols` values",        # problem_values
        "\"not solved\" endings",                                          # mapping endings
        "Anything abnormal",
        "`report.ok`",                                                      # the report
        "`report.summary()`",
    ):
        assert answer in text, answer


def test_a_conformance_report_prints_readably():
    results = tuple(CheckResult(f"check_{i}", CheckOutcome.PASSED, "", 0.1) for i in range(30))
    failed = CheckResult("check_time_limit", CheckOutcome.FAILED, "ran 9 s past a 1 s limit", 9.0)
    report = ConformanceReport("mine", "MySolver 1.0", (*results, failed))
    assert not report.ok and report.failures == (failed,)
    assert repr(report) == "<ConformanceReport 'mine': 30 passed, 1 failed; FAILED>"
    assert str(report) == report.summary()
    assert str(report).splitlines() == [
        "conformance of 'mine' (MySolver 1.0): 30 passed, 1 failed",
        "  FAILED check_time_limit: ran 9 s past a 1 s limit"]
    assert re.fullmatch(r"<ConformanceReport .*; ok>",
                        repr(ConformanceReport("mine", "MySolver 1.0", results)))
