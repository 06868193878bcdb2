"""A safe search stopped by its LP budget is taken up again from its open nodes, not from its
root: it proves the brute-forced optimum (from no incumbent, from a worse one, over
strengthening's parts, in one process or split among workers), and the LPs it solved before
the pause are not solved again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from smug_opt import Problem, Status, solve, verify
from smug_opt.deadline import Deadline
from smug_opt.safe_search.prove import OptimumSearch, prove_optimum
from smug_opt.safe_search.search import Settings
from smug_opt.testing.brute_force import brute_force

pytest.importorskip("highspy")


def _covering(seed: int, rows: int = 8, cols: int = 16) -> Problem:
    rng = np.random.default_rng(seed)
    A = rng.uniform(0, 1, (rows, cols)) * (rng.uniform(0, 1, (rows, cols)) < 0.5)
    return Problem.from_arrays(A, ">", A.sum(axis=1) * rng.uniform(0.4, 0.6, rows))


def _two_blocks(seed: int) -> Problem:
    """Two independent covering problems side by side: strengthening makes them two parts."""
    a, b = _covering(seed, 6, 7), _covering(seed + 100, 6, 9)
    A = sp.block_diag([a.A, b.A], format="csr")
    return Problem.from_arrays(A, ">", np.concatenate([a.rhs, b.rhs]))


def _resumed(p: Problem, incumbent, budget: int, settings: Settings):
    """The search run ``budget`` LPs at a time (each run going on from the last) until it ends."""
    tree = OptimumSearch(p, incumbent)
    runs = 0
    while True:
        runs += 1
        proof = tree.run(Deadline.after(60), replace(settings, max_lps=budget * runs))
        if proof.proven or "LP limit" not in proof.why:
            return proof, runs


@pytest.mark.parametrize("make, seed, start, settings", [
    (_covering, 0, "none", Settings(cut_rounds=0)), (_two_blocks, 15, "worst", Settings(cut_rounds=0)),
    (_covering, 2, "optimum", Settings(cut_rounds=0)),
    (_two_blocks, 17, "none", Settings(cut_rounds=0, depth_first=True)),
    (_covering, 4, "worst", Settings(cut_rounds=0, depth_first=True)),
    (_two_blocks, 29, "optimum", Settings(cut_rounds=0, depth_first=True))])
def test_a_search_taken_up_again_proves_the_brute_forced_optimum(make, seed: int, start: str,
                                                                  settings: Settings) -> None:
    p = make(seed)
    optimum = brute_force(p)
    assert optimum.objective is not None
    incumbent = {"none": None, "worst": verify(p, np.ones(p.num_vars)), "optimum": optimum}[start]
    fresh = prove_optimum(p, incumbent, Deadline.after(60), settings)
    assert fresh.proven and fresh.best is not None and fresh.best.objective == optimum.objective
    proof, runs = _resumed(p, incumbent, 10, settings)
    assert proof.proven, proof.why
    assert proof.best is not None and proof.best.ok and proof.best.objective == optimum.objective
    assert runs > 1 or start == "optimum"
    # the LPs before each pause are not solved again (only the node in hand when it paused,
    # with its strong branching, at most 2 * 8 + 1 LPs); from its root each time it would solve
    # 10 + 20 + ... of them again
    assert proof.lps <= fresh.lps + (runs - 1) * (2 * settings.strong_candidates + 1)


def test_a_search_paused_in_its_root_cut_rounds_starts_that_part_again() -> None:
    """Stopped before its root node was queued (its cover-cut rounds), a part has no open
    nodes to go on from: the next run searches it afresh, and still proves the optimum."""
    p = _covering(4)
    optimum = brute_force(p).objective
    proof, runs = _resumed(p, None, 1, Settings())
    assert runs > 1 and proof.proven and proof.best is not None and proof.best.objective == optimum


def test_a_proof_is_kept_and_a_paused_search_goes_on_with_a_new_deadline() -> None:
    p = _covering(7)
    tree = OptimumSearch(p, None)
    paused = tree.run(Deadline.after(60), Settings(cut_rounds=0, max_lps=3))
    assert not paused.proven and "LP limit" in paused.why and tree.paused is not None
    proven = tree.run(Deadline.after(60), Settings())
    assert proven.proven and proven.best is not None
    assert proven.best.objective == brute_force(p).objective
    assert tree.run(Deadline.after(60), Settings()) is proven  # the answer, not a new search


@pytest.mark.slow
def test_a_paused_search_is_split_among_workers_when_it_goes_on_s() -> None:
    """Paused in one process, taken up by two workers (HiGHS's cuts joining then): the same optimum."""
    p = _covering(1, 12, 40)
    fresh = prove_optimum(p, None, Deadline.after(120), Settings(cut_rounds=0))
    tree = OptimumSearch(p, None)
    assert not tree.run(Deadline.after(120), Settings(cut_rounds=0, max_lps=200)).proven
    assert tree.paused is not None and len(tree.paused.nodes) > 1
    proof = tree.run(Deadline.after(120), Settings(cut_rounds=0, workers=2, highs_cuts_after=0,
                                                   depth_first=True))
    assert proof.proven and fresh.proven and fresh.best is not None and proof.best is not None
    assert proof.best.objective == fresh.best.objective and verify(p, proof.best.x).ok


@pytest.mark.parametrize("workers", [1, 2])
def test_certify_goes_on_from_the_open_nodes_of_its_budgeted_search(monkeypatch, workers: int) -> None:
    """Past ``SEARCH_LPS`` a search near its end goes on from where it stopped (with two
    cores: alone for ``ALONE_LPS`` more LPs first, enough here, so no worker starts): the
    LPs it reports are those of one search, not the budget's plus a fresh search's."""
    import smug_opt.certify as certify_module

    p = _covering(2, 12, 30)
    fresh = prove_optimum(p, verify(p, solve(p, "highs", time_limit=30, certify=False).x), Deadline.after(60))
    assert fresh.proven and fresh.lps > 100
    monkeypatch.setattr(certify_module, "SEARCH_LPS", 60)
    monkeypatch.setattr(certify_module, "search_workers", lambda: workers)
    monkeypatch.setattr("smug_opt.safe_search.parallel._Workers.__init__", _no_workers)
    r = solve(p, "highs", time_limit=60, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact", r.message
    assert "branch-and-bound with safe LP bounds" in r.message
    lps = int(r.message.split(" LPs")[0].rsplit(" ", 1)[1])
    assert lps < fresh.lps + 60, r.message


def _no_workers(self, count: int) -> None:
    raise AssertionError("no worker should start")


@pytest.mark.slow
def test_certify_splits_a_search_that_goes_on_past_its_lps_alone_s(monkeypatch) -> None:
    """Not closed within ``ALONE_LPS`` more LPs, the search goes on split among two
    processes from where it stopped, and proves the optimum."""
    import smug_opt.certify as certify_module

    p = _covering(2, 12, 30)
    monkeypatch.setattr(certify_module, "SEARCH_LPS", 60)
    monkeypatch.setattr(certify_module, "ALONE_LPS", 5)
    monkeypatch.setattr(certify_module, "search_workers", lambda: 2)
    r = solve(p, "highs", time_limit=120, certify=True)
    assert r.status is Status.OPTIMAL and r.proof == "exact", r.message
    assert "branch-and-bound with safe LP bounds" in r.message
    fresh = prove_optimum(p, None, Deadline.after(120))
    assert fresh.proven and fresh.best is not None and verify(p, r.x).objective == fresh.best.objective
