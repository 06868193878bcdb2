"""A solve run in the caller's process (``isolate=False``, as the robustness queries run)
writes nothing to descriptor 1: the CLI's stdout is for results only."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIRST_PARTY, skip_unless_usable


@pytest.mark.parametrize("backend", FIRST_PARTY)
def test_in_process_solve_prints_nothing(backend: str) -> None:
    skip_unless_usable(backend)
    code = ("import sys\n"
            "from smug_opt import Problem, solve\n"
            "p = Problem.from_arrays([[1.0, 1.0]], '>=', 1.0)\n"
            f"print(solve(p, {backend!r}, isolate=False).status.name, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                          text=True, check=True, timeout=120)
    assert done.stderr.strip().endswith("OPTIMAL"), done.stderr
    assert done.stdout == "", f"{backend} wrote to stdout in the caller's process: {done.stdout!r}"
