"""The solve as composable steps behind one protocol: each step is given what it needs
when it is built, no step imports the module that composes them, and one deadline is
shared by all of them."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import numpy as np
import pytest

from smug_opt import Problem, ProblemBuilder, solve
from smug_opt.backend import SolveOptions, Status
from smug_opt.backend_choice import BackendChoice
from smug_opt.deadline import Deadline
from smug_opt.result import Proof
from smug_opt.strategies import Certify, SingleBackend, Strengthen, WorkerSettings
from smug_opt.strengthen import Pieces

ROOT = Path(__file__).resolve().parents[2] / "smug_opt"
STEP_MODULES = ["strategies.py", "solve_loop.py", "portfolio.py", "certify.py", "strengthen/solve_parts.py"]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", STEP_MODULES)
def test_no_step_imports_the_module_that_composes_the_steps(module):
    assert "smug_opt.solving" not in _imports(ROOT / module), f"{module} reaches back into solving"


def test_a_deadline_is_one_moment_that_every_step_reads():
    assert Deadline.after(None).remaining() is None and not Deadline.none().passed(1e9)
    d = Deadline.after(10.0)
    assert 9.0 < d.remaining() <= 10.0 and not d.passed() and d.passed(11.0)
    half = d.share(0.5)
    assert half.at < d.at and 4.0 < half.remaining() <= 5.0
    assert Deadline.after(-1.0).passed() and Deadline.after(-1.0).share(0.5).remaining() <= 0.001
    with pytest.raises(ValueError, match="time limit"):
        Deadline.after(float("nan"))


def _homogeneous(n: int = 6) -> Problem:
    """Strict homogeneous rows (a·x > 0) on overlapping pairs: strengthening applies."""
    rng = np.random.default_rng(3)
    A = np.zeros((n, n))
    for i in range(n):
        A[i, i], A[i, (i + 1) % n] = rng.uniform(0.5, 2.0), rng.uniform(-0.4, 0.4)
    return Problem.from_arrays(A, [">"] * n, np.zeros(n))


def _settings() -> WorkerSettings:
    return WorkerSettings(SolveOptions(time_limit=20.0), isolate=True, grace=1.0, memory_limit_mb=None)


def test_steps_composed_by_hand_answer_as_solve_does():
    pytest.importorskip("highspy")
    p, highs = _homogeneous(), BackendChoice.parse("highs")
    step = Strengthen(Pieces(), SingleBackend(_settings()), "HiGHS")
    by_hand = step(p, highs, Deadline.after(20.0), None)
    composed = solve(p, highs, time_limit=20.0, strengthen=True)
    assert by_hand.status is composed.status is Status.OPTIMAL
    assert by_hand.objective == composed.objective and by_hand.strengthening.applied


class _Counted:
    """A real step that counts the questions it is asked."""

    def __init__(self, inner):
        self.inner, self.asked = inner, []

    def __call__(self, problem, choice, deadline, start):
        self.asked.append(choice)
        return self.inner(problem, choice, deadline, start)


def test_certification_asks_its_exact_questions_through_the_step_it_was_given():
    pytest.importorskip("highspy")
    pytest.importorskip("z3")
    from smug_opt.certify import exact_backend, exact_options

    # more binaries than enumeration settles, no incumbent for an LP bound, and a ReLU, which
    # the safe search does not take: z3 is asked
    n = 20
    rng = np.random.default_rng(0)
    b = ProblemBuilder()
    m = b.add_binaries(n)
    y = b.add_continuous(1, 0.0, 100.0)
    b.add_relus(y, rng.uniform(0.1, 1.0, (1, n)), m, np.array([0.0]))
    b.add_constraints(np.array([[1.0]]), y, ">", 25.0)  # infeasible: the sum stays below 20
    b.set_objective(m, 1.0)
    p = b.build()
    exact = WorkerSettings(exact_options(SolveOptions()), isolate=True, grace=1.0, memory_limit_mb=None)
    questions = _Counted(SingleBackend(exact))
    started = time.monotonic()
    r = Certify(SingleBackend(_settings()), questions)(p, BackendChoice.parse("highs"),
                                                        Deadline.after(30.0), None)
    assert r.status is Status.INFEASIBLE and r.proof == Proof.EXACT, r.message
    assert questions.asked and all(c.name == exact_backend().name for c in questions.asked)
    assert time.monotonic() - started < 30.0 + 2.0


def test_the_solver_stops_early_enough_for_its_answer_to_be_checked_in_time():
    """An attempt's solver limit keeps back the slowest exact check seen so far (at most
    half of what remains): on large problems (the stress case's CNNs) a check takes
    seconds, and the answer's check must fit the limit."""
    from smug_opt.solve_loop import SOLVER_RESERVE, _for_solver

    d = Deadline.after(60.0)
    assert _for_solver(d).at == pytest.approx(d.at - SOLVER_RESERVE)
    assert _for_solver(d, 10.0).at == pytest.approx(d.at - SOLVER_RESERVE - 10.0)
    short = Deadline.after(4.0)
    assert _for_solver(short, 10.0).at == pytest.approx(short.at - 0.4 - 2.0, abs=1e-3)
    assert _for_solver(Deadline.none(), 10.0).at is None
