"""A query budget counted in work (smug_opt.query_work.Work): branch and bound stops at
its domain count with a cover to continue from, and an explanation built with it is the same
however the clock runs (a leaping clock cuts every wall-clock query instead)."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from flat_nets import chain_of, covered, mlp

from smug_opt.deadline import Deadline
from smug_opt.network.flat import Preprocess
from smug_opt.query_work import Work, parse_work
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.robustness.bab import Unfinished, branch_and_bound
from smug_opt.robustness.explanation import label_changes, robust_explanation

IN_PROCESS = {"isolate": False}


def _leaping(monkeypatch: pytest.MonkeyPatch, leap: float) -> None:
    """Every read of the monotonic clock jumps ``leap`` seconds further (a machine so loaded
    that each step of a query takes that long)."""
    real, reads = time.monotonic, itertools.count(1)
    monkeypatch.setattr(time, "monotonic", lambda: real() + leap * next(reads))


def _explain(seed: int, eps: float, **kw):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [6, 16, 16, 3])
    x = rng.uniform(0, 1, 6)
    return robust_explanation(net, Preprocess(np.arange(6), np.ones(6), np.zeros(6)), x, eps=eps,
                              batch=2, solve_options=IN_PROCESS, **kw)


@pytest.mark.parametrize("seed, eps", [(0, 0.3), (5, 0.6)])
def test_a_work_budget_gives_the_same_explanation_under_a_leaping_clock(seed, eps, monkeypatch):
    """Same set, same counts, with the clock as it is and with every read a second later;
    the same leaps change what a wall-clock query budget gives (so they do reach the queries)."""
    work = Work(domains=64, milp_nodes=50)
    calm = _explain(seed, eps, query_work=work)
    assert calm.subset_minimal and calm.size < 6  # something is freed by a full query's proof
    _leaping(monkeypatch, 1.0)
    leaped = _explain(seed, eps, query_work=work)
    assert np.array_equal(leaped.fixed, calm.fixed)
    counts = [(r.necessary, r.undecided, r.queries) for r in (calm, leaped)]
    assert counts[0] == counts[1]
    timed = _explain(seed, eps, query_time=2.0)
    assert timed.undecided > 0 and not np.array_equal(timed.fixed, calm.fixed)


@pytest.mark.parametrize("seed", range(2))
def test_branch_and_bound_stops_at_its_work_with_a_cover_that_finishes_the_proof(seed):
    """At most ``work`` domains bounded, ``unknown`` for the work limit, and the search
    continued from the open leaves answers as the whole search does (which
    test_bab_leaves checks against the exact minimum)."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 6, 6, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    lo, hi = x0 - 1.0, x0 + 1.0
    cb = chain_of(net, lo, hi)
    cut = 0
    for j in (j for j in range(3) if j != label):
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0
        args = (cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.none())
        whole = branch_and_bound(*args, root_steps=0)
        if whole.domains <= 3:
            continue
        for work in (2, 4):  # an even count: the last split's two children would overshoot
            assert branch_and_bound(*args, root_steps=0, work=work).domains <= work
        first = branch_and_bound(*args, root_steps=0, work=3)
        assert first.domains <= 3 and first.status == "unknown"
        assert first.unfinished is Unfinished.WORK_LIMIT and first.open_leaves is not None
        cut += 1
        assert covered(net, first.leaves, lo + (hi - lo) * rng.random((5000, 2))).all()
        rest = branch_and_bound(*args, root_steps=0, start=first.open_leaves)
        assert rest.status == whole.status
    assert cut  # some search needs more than 3 domains


def test_without_milp_nodes_a_query_branch_and_bound_leaves_open_stays_unknown():
    rng = np.random.default_rng(0)
    net = mlp(rng, [2, 6, 6, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    query = RobustnessQuery(net, Preprocess(np.arange(2), np.ones(2), np.zeros(2)), x0 - 1.0, x0 + 1.0,
                            label_changes(3, label))
    solved = [s["solver"] for s in decide(query, lean=True, time_limit=None, work=Work(1, 50),
                                          solve_options=IN_PROCESS).solves]
    assert "bab" in solved and set(solved) - {"bab"}  # branch and bound ran out; the MILP ran
    left = decide(query, lean=True, time_limit=None, work=Work(1, 0), solve_options=IN_PROCESS)
    assert left.answer == "unknown" and {s["solver"] for s in left.solves} == {"bab"}


def test_a_work_budget_is_counted_in_integers_on_a_backend_with_a_node_limit():
    with pytest.raises(ValueError, match="domains must be an integer >= 1"):
        Work(domains=0, milp_nodes=10)
    with pytest.raises(ValueError, match="milp_nodes must be an integer >= 0"):
        Work(domains=10, milp_nodes=2.5)  # type: ignore[arg-type]
    assert Work(8, 10).solver_extras("highs") == {"mip_max_nodes": 10}
    assert Work(8, 10).solver_extras("scip") == {"limits/nodes": 10}
    assert parse_work(" 2048,500") == Work(2048, 500)
    assert parse_work("2048,500,1048576") == Work(2048, 500, 2**20)
    for bad in ("2048", "2048,500,1,1", "a,b", "-1,5"):
        with pytest.raises(ValueError, match="DOMAINS,NODES"):
            parse_work(bad)
    assert Work(8, 0).solver_extras("z3") == {}  # no MILP: any backend
    with pytest.raises(ValueError, match="needs a backend with a node limit"):
        Work(8, 10).solver_extras("z3")
    with pytest.raises(ValueError, match="needs a backend with a node limit"):
        _explain(0, 0.3, query_work=Work(8, 10), backend="highs,scip")


def test_a_relu_domain_cap_scales_the_domains_down_on_a_wide_network():
    """Domains times the network's ReLUs at most: the MLPs keep their count, the VeriVital
    rewrite's 57,888 ReLUs get 18; in a query, branch and bound stops at the capped count
    where the uncapped budget searches further."""
    budget = Work(2048, 500, 2**20)
    assert [budget.domains_for(n) for n in (20, 512, 57_888, 10**7)] == [2048, 2048, 18, 1]
    assert budget.share(4) == Work(512, 125, 2**18) and Work(8, 0).share(4) == Work(2, 0)
    with pytest.raises(ValueError, match="relu_domains must be an integer >= 1"):
        Work(8, 0, 0)
    rng = np.random.default_rng(0)
    net = mlp(rng, [2, 6, 6, 3])  # 12 ReLUs
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    query = RobustnessQuery(net, Preprocess(np.arange(2), np.ones(2), np.zeros(2)), x0 - 1.0, x0 + 1.0,
                            label_changes(3, label))

    def domains(work: Work) -> int:
        verdict = decide(query, lean=True, time_limit=None, work=work, solve_options=IN_PROCESS)
        return sum(s["domains"] for s in verdict.solves if s["solver"] == "bab")

    assert domains(Work(64, 0, relu_domains=36)) <= 3 < domains(Work(64, 0))  # 36 // 12 = 3
