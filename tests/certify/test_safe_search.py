"""The safe search (a branch-and-bound pruned only by safe LP bounds) finds the exact optimum:
equal to brute force on random problems, whatever incumbent it starts from, with every
switch of the ablation; a wrong incumbent is never what it returns."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_problems import problems

from smug_opt import Problem, ProblemBuilder, Status, solve, verify
from smug_opt.deadline import Deadline
from smug_opt.safe_search import Settings, search
from smug_opt.safe_search.parallel import OPEN_PER_WORKER
from smug_opt.safe_search.prove import applies, prove_optimum
from smug_opt.safe_search.search import _Search
from smug_opt.testing.brute_force import brute_force

pytest.importorskip("highspy")

SWITCHES = [Settings(), Settings(reduced_cost_fixing=False), Settings(warm_start=False),
            Settings(strong_candidates=0), Settings(depth_first=True)]


def _optimum(problem: Problem) -> Fraction | None:
    return brute_force(problem).objective


def _feasible_points(problem: Problem) -> list[np.ndarray]:
    points = (np.array(bits, dtype=np.float64) for bits in itertools.product((0, 1), repeat=problem.num_vars))
    return [x for x in points if verify(problem, x).ok]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems, switches=st.sampled_from(SWITCHES), strengthened=st.booleans())
def test_the_proven_optimum_is_brute_force_s(problem: Problem, switches: Settings,
                                             strengthened: bool) -> None:
    """From no incumbent, the search closes its tree (binaries only: leaves are verified
    points) and its optimum is the brute-forced one (None: infeasible)."""
    optimum = _optimum(problem)
    proof = prove_optimum(problem, None, Deadline.after(60), switches, strengthened=strengthened)
    assert proof.proven, proof.why
    if optimum is None:
        assert proof.best is None
    else:
        assert proof.best is not None and proof.best.ok and proof.best.objective == optimum


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems, pick=st.integers(0, 2**16))
def test_a_worse_incumbent_is_never_what_it_proves(problem: Problem, pick: int) -> None:
    """Started from any feasible point (the optimum included), the search returns the exact
    optimum: a tampered, non-optimal incumbent is replaced, never certified."""
    points = _feasible_points(problem)
    if not points:
        return
    optimum = _optimum(problem)
    start = verify(problem, points[pick % len(points)])
    for switches in (Settings(), Settings(reduced_cost_fixing=False), Settings(depth_first=True)):
        outcome = search(problem, start, Deadline.after(60), switches)
        assert outcome.proven and outcome.best is not None, outcome.why
        assert outcome.best.objective == optimum


def test_an_incumbent_that_fails_verification_is_ignored() -> None:
    p = Problem.from_arrays([[1.0, 1.0, 1.0]], ">=", [2.0])
    bad = verify(p, np.array([1.0, 0.0, 0.0]))  # violates the row: objective 1 would be a lie
    assert not bad.ok
    outcome = search(p, bad, Deadline.after(30))
    assert outcome.proven and outcome.best is not None and outcome.best.objective == 2


def test_an_infeasible_problem_is_proven_infeasible() -> None:
    n = 30  # far too many binaries to enumerate: the LP's Farkas ray proves it
    p = Problem.from_arrays(np.ones((1, n)), ">=", [n + 0.5])
    outcome = search(p, None, Deadline.after(30))
    assert outcome.proven and outcome.best is None and outcome.nodes == 1


def test_reduced_cost_fixing_fixes_and_saves_nodes() -> None:
    """Three knapsack covers whose LP bound is near the incumbent: reduced costs fix
    binaries, and the tree is smaller than without them (19 nodes against 9, measured; both
    without cover cuts, which shrink either tree to 7 nodes here)."""
    rng = np.random.default_rng(5)
    n = 30
    weights = rng.integers(5, 40, (3, n)).astype(float)
    p = Problem.from_arrays(weights, ">=", weights.sum(axis=1) * 0.3,
                            objective=rng.integers(1, 10, n).astype(float))
    best = solve(p, "highs", time_limit=30)
    assert best.status is Status.OPTIMAL
    start = verify(p, best.x)
    on = search(p, start, Deadline.after(60), Settings(cut_rounds=0))
    off = search(p, start, Deadline.after(60), Settings(reduced_cost_fixing=False, cut_rounds=0))
    assert on.proven and off.proven
    assert on.best is not None and off.best is not None and on.best.objective == off.best.objective
    assert on.fixed_by_reduced_costs > 0 and off.fixed_by_reduced_costs == 0 and on.nodes < off.nodes


def test_a_time_limit_stops_it_without_a_claim() -> None:
    p = Problem.from_arrays(np.ones((1, 20)), ">=", [3.0])
    outcome = search(p, None, Deadline.after(-1.0))
    assert not outcome.proven and "time limit" in outcome.why


def test_relus_are_left_to_the_exact_backend() -> None:
    b = ProblemBuilder()
    x = b.add_binaries(2)
    y = b.add_continuous(1, 0.0, 1.0)
    b.add_relus(y, [[1.0]], x[:1], lo=[0.0], hi=[1.0])
    assert not applies(b.build())


def test_nodes_highs_cannot_answer_are_settled_by_their_points() -> None:
    """Hypothesis's case: coefficients from 1e-259 to 1e16 leave HiGHS without an answer at
    every node; the search once split them down to single points (tens of thousands of
    nodes), now it decides a node's points exactly once few binaries are free."""
    A = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10737418240.0, -1e16, 0.0, -5.454703768102646, -24.0,
          -7.450580596923828e-09],
         [-3.0, -268435456.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 1e12, 6.317998022179843, 0.0, 8.853703397591929,
          2147483648.0, 1e16],
         [7.867612350606185e-73, 0.0, 2.579743932002759e-183, -201326592.0, -0.6666666666666666, 0.0,
          3.0, -3.821633049377194e-95, 0.0, 5.076598582683424, 2.118676426764509e-181, 0.1,
          -8.147298529830094, -0.7],
         [0.0, -2.0, 0.0, -10.0, -0.7, 9.094947017729282e-13, -3.0969731461400944e-259, 4.0, 2.0, -12582912.0,
          0.0, 0.0, 0.0, -2.00001]]
    rhs = [0.0, 17.17170141977177, 4.5099319160167575, -12582922.7]
    p = Problem.from_arrays(A, ["<", "<=", "<=", ">"], rhs)
    outcome = search(p, None, Deadline.after(60))
    assert outcome.proven and outcome.best is not None, outcome.why
    assert outcome.best.objective == _optimum(p) and outcome.nodes < 2**10


def test_the_safe_lp_bound_and_the_search_strengthen_a_problem_once() -> None:
    """Certification's two steps share one strengthening of the same problem object; an
    equal but distinct problem is strengthened afresh."""
    from smug_opt.strengthen.reuse import strengthen_reused

    p = Problem.from_arrays([[3.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]], [">=", ">="], [2.0, 1.0])
    first = strengthen_reused(p)
    assert strengthen_reused(p) is first
    copy = Problem.from_arrays([[3.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]], [">=", ">="], [2.0, 1.0])
    again = strengthen_reused(copy)
    assert again is not first and again.offset == first.offset and len(again.parts) == len(first.parts)


def test_certification_reuses_the_strengthening_of_the_solve_it_certifies() -> None:
    """A strengthened solve (all pieces) leaves its strengthening for certification: the
    reused one is the solve's own (same timing), one with a piece off is not kept."""
    from smug_opt.strengthen import Pieces
    from smug_opt.strengthen.reuse import strengthen_reused

    p = Problem.from_arrays([[3.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]], [">=", ">="], [2.0, 1.0])
    r = solve(p, backend="highs", strengthen=True, certify=False)
    assert r.strengthening is not None and r.strengthening.applied
    assert strengthen_reused(p).stats["seconds"] == r.strengthening.seconds
    q = Problem.from_arrays([[3.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]], [">=", ">="], [2.0, 1.0])
    solve(q, backend="highs", strengthen=Pieces(cuts=False), certify=False)
    assert strengthen_reused(q).stats["pieces"] == list(Pieces().enabled())
    proof = prove_optimum(p, None, Deadline.after(30))
    assert proof.proven and proof.best is not None and proof.best.objective == _optimum(p)


def test_a_node_enumerated_after_reduced_cost_fixing_keeps_its_fixings() -> None:
    """``x1 <= 0.7``, ``−x0 + 603979776·x2 − x3 > 0``, minimise ``−x0 − x1 + x2 − x3 − x4``
    (x5..x10 in no row, cost 0), optimum −2 at x0 = x2 = x3 = x4 = 1. At the node x0 = 1,
    reduced-cost fixing sets x4 (in no row, cost −1) to 1; the LP point has no fractional
    binary (x2 = x3 ≈ 1.7e-9), so the node's 9 free binaries are enumerated exactly. The
    enumeration once took the node's bounds from before that fixing, x4 = 0, and the
    search proved −1."""
    A = np.zeros((2, 11))
    A[0, 1] = 1.0
    A[1, [0, 2, 3]] = [-1.0, 603979776.0, -1.0]
    objective = np.zeros(11)
    objective[[0, 1, 2, 3, 4]] = [-1.0, -1.0, 1.0, -1.0, -1.0]
    p = Problem.from_arrays(A, ["<=", ">"], [0.7, 0.0], objective=objective)
    outcome = search(p, None, Deadline.after(60))
    assert _optimum(p) == -2
    assert outcome.proven and outcome.best is not None and outcome.best.objective == -2
    assert outcome.fixed_by_reduced_costs > 0


@pytest.mark.slow
def test_two_workers_prove_the_optimum_one_proves_s() -> None:
    """A tree of ~2,750 nodes (40 binaries, 12 covering rows, no incumbent): split among two
    spawned workers after the first phase, it closes on the same optimum."""
    rng = np.random.default_rng(1)
    A = rng.uniform(0, 1, (12, 40)) * (rng.uniform(0, 1, (12, 40)) < 0.5)
    p = Problem.from_arrays(A, ">", A.sum(axis=1) * rng.uniform(0.4, 0.6, 12))
    one = search(p, None, Deadline.after(120), Settings(cut_rounds=0))
    first_phase = _Search(p, None, Deadline.after(120), Settings(cut_rounds=0))
    assert first_phase.run(until_open=2 * OPEN_PER_WORKER)  # the tree is split
    for settings_ in (Settings(cut_rounds=0, workers=2), Settings(cut_rounds=0, workers=2, depth_first=True)):
        two = search(p, None, Deadline.after(120), settings_)
        assert one.proven and two.proven, two.why
        assert one.best is not None and two.best is not None and two.best.objective == one.best.objective
        assert verify(p, two.best.x).ok


def test_depth_first_closes_on_the_same_optimum_in_the_same_tree_each_time() -> None:
    """Depth first (last node queued first) proves the optimum best-first proves, from no
    incumbent and from the optimum, and its tree is the same on every run (no wall time in it)."""
    rng = np.random.default_rng(3)
    A = rng.uniform(0, 1, (8, 24)) * (rng.uniform(0, 1, (8, 24)) < 0.5)
    p = Problem.from_arrays(A, ">", A.sum(axis=1) * rng.uniform(0.4, 0.6, 8))
    best_first = search(p, None, Deadline.after(60), Settings(cut_rounds=0))
    assert best_first.proven and best_first.best is not None and best_first.nodes > 20
    deep = Settings(cut_rounds=0, depth_first=True)
    for start in (None, best_first.best):
        runs = [search(p, start, Deadline.after(60), deep) for _ in range(2)]
        assert all(o.proven and o.best is not None and o.best.objective == best_first.best.objective
                   for o in runs)
        assert runs[0].nodes == runs[1].nodes and runs[0].lps == runs[1].lps


def test_open_nodes_are_dealt_out_in_a_snake() -> None:
    """Every node goes to one share; sorted by bound, the largest subtrees (lowest bounds)
    alternate between the ends, so no share takes the largest of every round."""
    from smug_opt.safe_search.parallel import _dealt
    from smug_opt.safe_search.search import _Node

    nodes = [_Node(np.zeros(1, dtype=np.int8), float(i)) for i in range(7)]
    shares = _dealt(nodes, 2)
    assert [[n.estimate for n in share] for share in shares] == [[0, 3, 4], [1, 2, 5, 6]]
    three = _dealt(nodes, 3)
    assert [[n.estimate for n in share] for share in three] == [[0, 5, 6], [1, 4], [2, 3]]


def test_workers_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="workers"):
        Settings(workers=0)


@pytest.mark.slow
def test_workers_do_not_run_the_callers_script_again_s(tmp_path) -> None:
    """A script without ``if __name__ == "__main__"`` that splits a search between two
    workers runs once: the workers are fresh interpreters (multiprocessing's spawn would
    run the script again in each, and fail)."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import numpy as np\n"
        "from smug_opt import Problem\n"
        "from smug_opt.deadline import Deadline\n"
        "from smug_opt.safe_search import Settings, search\n"
        "print('script ran', flush=True)\n"
        "rng = np.random.default_rng(1)\n"
        "A = rng.uniform(0, 1, (12, 40)) * (rng.uniform(0, 1, (12, 40)) < 0.5)\n"
        "p = Problem.from_arrays(A, '>', A.sum(axis=1) * rng.uniform(0.4, 0.6, 12))\n"
        "o = search(p, None, Deadline.after(120), Settings(cut_rounds=0, highs_cuts_after=0, workers=2))\n"
        "print('proven', o.proven, o.best.objective)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script ran") == 1 and "proven True" in done.stdout
