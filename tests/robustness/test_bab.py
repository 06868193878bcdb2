"""Branch and bound over ReLU splits (smug_opt.robustness.bab) against the exact answer on
tiny nets (every activation pattern's LP), and inside decide on a random MLP where the
plain bounds leave disjuncts open."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flat_nets import exact_minimum, mlp

from smug_opt.bounds import Box, propagate
from smug_opt.bounds.alpha_crown import optimise
from smug_opt.bounds.relu_chain import ChainBounds, ReluChain
from smug_opt.deadline import Deadline
from smug_opt.network.flat import Preprocess
from smug_opt.robustness import RobustnessQuery, bab_domains, decide
from smug_opt.robustness.bab import Unfinished, branch_and_bound
from smug_opt.vnnlib import Conjunct


@pytest.mark.parametrize("root_steps", [60, 0])
@pytest.mark.parametrize("seed", range(6))
def test_answers_match_the_exact_minimum(seed, root_steps):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 3, 4, 3])
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - 0.5, x0 + 0.5
    fb = propagate(net, Box(lo, hi), method="crown")
    cb = ChainBounds.of(ReluChain.from_flat(net), lo, hi, [fb.lo[1], fb.lo[3]], [fb.hi[1], fb.hi[3]])
    label = int(net.forward(x0[None])[-1][0].argmax())
    for j in range(3):
        if j == label:
            continue
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0  # unsafe: y_label - y_j <= 0
        exact = exact_minimum(net, lo, hi, c)
        if abs(exact) < 1e-6:
            continue
        result = branch_and_bound(cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(30),
                                  batch=4, root_steps=root_steps)
        if exact > 0:
            assert result.status == "unsat", (seed, j, exact, result)
        else:
            assert result.status == "candidate", (seed, j, exact, result)
            y = net.forward(result.x[None])[-1][0]
            assert c @ y <= 0 and np.all((lo <= result.x) & (result.x <= hi))


def test_decide_closes_what_the_bounds_leave_open():
    """A deeper random MLP and a box where CROWN leaves a disjunct open and no counterexample
    exists: branch and bound closes it (``"bab"``), with an exact proof."""
    rng = np.random.default_rng(7)
    net = mlp(rng, [5, 24, 24, 24, 4])
    x0 = rng.uniform(-1, 1, 5)
    label = int(net.forward(x0[None])[-1][0].argmax())
    rows = []
    for j in range(4):
        if j != label:
            row = np.zeros((1, 4))
            row[0, label], row[0, j] = 1.0, -1.0
            rows.append(Conjunct(row, np.zeros(1), np.zeros(1, dtype=bool)))
    pre = Preprocess(np.arange(5), np.ones(5), np.zeros(5))
    query = RobustnessQuery(net, pre, x0 - 0.3, x0 + 0.3, tuple(rows))
    assert not query.refuted().all()
    verdict = decide(query, time_limit=60)
    assert verdict.answer == "unsat" and verdict.proof == "exact", verdict
    assert "bab" in verdict.decided_by


def _chain_case(seed: int, sizes: list[int], radius: float):
    """A random MLP, a box around a random point, its CROWN-bounded chain and the label."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, sizes)
    x0 = rng.uniform(-1, 1, sizes[0])
    lo, hi = x0 - radius, x0 + radius
    fb = propagate(net, Box(lo, hi), method="crown")
    relus = range(len(sizes) - 2)
    cb = ChainBounds.of(ReluChain.from_flat(net), lo, hi, [fb.lo[2 * i + 1] for i in relus],
                        [fb.hi[2 * i + 1] for i in relus])
    return net, lo, hi, cb, int(net.forward(x0[None])[-1][0].argmax())


@pytest.mark.parametrize(("refine_layers", "shallow_first"),
                         [(0, False), (None, False), (None, True), (0, True)])
@pytest.mark.parametrize("seed", range(2))
def test_filtered_branching_on_three_layers_matches_the_exact_minimum(seed, refine_layers, shallow_first,
                                                                      monkeypatch):
    """More candidates than unstable neurons (some not usable) on a 3-hidden-layer net, with
    and without every layer above a split re-bounded per domain, splitting by score or
    shallowest layer first: every answer agrees with the minimum over all 2^9 activation
    patterns."""
    monkeypatch.setattr(bab_domains, "CANDIDATES", 16)
    net, lo, hi, cb, label = _chain_case(seed, [2, 3, 3, 3, 3], 0.6)
    for j in (j for j in range(3) if j != label):
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0
        exact = exact_minimum(net, lo, hi, c)
        if abs(exact) < 1e-6:
            continue
        result = branch_and_bound(cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(30),
                                  batch=3, root_steps=0, refine_layers=refine_layers,
                                  shallow_first=shallow_first)
        assert result.status == ("unsat" if exact > 0 else "candidate"), (seed, j, exact, result)
        if exact < 0:
            assert c @ net.forward(result.x[None])[-1][0] <= 0


def test_shallow_first_splits_the_first_layer_with_a_neuron_left():
    """With ``shallow_first`` each domain's split is an unstable, unsplit neuron of the
    shallowest layer that has one (here: layer 0 until all its unstable neurons are split)."""
    _, _, _, cb, label = _chain_case(2, [2, 3, 3, 3, 3], 0.6)  # unstable per layer: 3, 2, 2
    unstable = [torch.nonzero(cb.unstable(i)).flatten() for i in range(3)]
    assert unstable[0].numel() and sum(u.numel() for u in unstable[1:])
    c = torch.zeros(1, 3, dtype=torch.float64)
    c[0, label], c[0, (label + 1) % 3] = 1.0, -1.0
    splits = [torch.zeros(2, n, dtype=torch.int8) for n in cb.chain.widths]
    splits[0][1, unstable[0]] = 1  # domain 1: layer 0 all split
    alphas = [cb.initial_alpha(i, 2, 1) for i in range(3)]
    betas = [torch.zeros(2, 1, n, dtype=torch.float64) for n in cb.chain.widths]
    found = optimise(cb, 3, c, torch.zeros(1, dtype=torch.float64), steps=0, alphas=alphas,
                     betas=betas, splits=splits)
    stack = bab_domains.Stack(cb, c, torch.zeros(1, dtype=torch.float64), shallow_first=True)
    stack.push(splits, found.alphas, betas, found.bound, found.coefficients)
    layer, neuron = stack.pop(2).choice
    first_left = next(i for i in range(1, 3) if unstable[i].numel())
    assert layer.tolist() == [0, first_left], layer
    assert int(neuron[0]) in unstable[0].tolist() and int(neuron[1]) in unstable[first_left].tolist()


@pytest.mark.parametrize("seed", [2, 3])  # seed 2 leaves 6 linear regions open, seed 3 finds a candidate
def test_linear_regions_left_open_never_give_unsat(seed):
    """Without α/β steps the bound of a fully split domain ignores the splits' constraints,
    so linear regions without counterexamples can stay open: the answer is then unknown
    (or a confirmed candidate), never unsat unless the exact minimum is positive."""
    net, lo, hi, cb, label = _chain_case(seed, [2, 4, 4, 3], 0.8)
    for j in (j for j in range(3) if j != label):
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0
        exact = exact_minimum(net, lo, hi, c)
        result = branch_and_bound(cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(30),
                                  batch=2, root_steps=0, steps=0)
        if result.status == "unsat":
            assert exact > 0, (seed, j, exact, result)
        elif result.status == "candidate":
            assert c @ net.forward(result.x[None])[-1][0] <= 0 and exact <= 0
        else:
            assert result.unfinished is Unfinished.LINEAR_REGIONS_OPEN, result
            assert "every ReLU split" in result.message, result


def test_a_passed_deadline_is_reported_as_a_time_limit():
    """The typed outcome: a search out of time says ``Unfinished.TIME_LIMIT`` (here the
    deadline has passed before the first split)."""
    *_, cb, label = _chain_case(7, [5, 24, 24, 24, 4], 0.3)
    c = np.zeros(4)
    for j in (j for j in range(4) if j != label):
        c[:] = 0.0
        c[label], c[j] = 1.0, -1.0
        result = branch_and_bound(cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(0.0),
                                  root_steps=0)
        if result.status == "unknown":
            assert result.unfinished is Unfinished.TIME_LIMIT and "time limit" in result.message
            return
    pytest.skip("every disjunct was settled at the root")


def _exact_min_max(net, lo: np.ndarray, hi: np.ndarray, C: np.ndarray) -> float:
    """min over the box of max_r C_r·y (y the chain's output): one LP per activation pattern
    in the variables (x, t), minimising t with t >= C_r·y for every row."""
    import itertools

    from scipy.optimize import linprog

    linear = [layer.affine for layer in net.layers[1::2]]
    widths = [W.shape[0] for W, _ in linear[:-1]]
    best = np.inf
    for pattern in itertools.product([0, 1], repeat=sum(widths)):
        masks = np.split(np.array(pattern, dtype=float), np.cumsum(widths)[:-1])
        A, b = np.eye(lo.size), np.zeros(lo.size)
        rows, rhs = [], []
        for (W, bias), m in zip(linear[:-1], masks, strict=True):
            zA, zb = W.toarray() @ A, W.toarray() @ b + bias
            sign = np.where(m == 1, -1.0, 1.0)
            rows.append(np.hstack([sign[:, None] * zA, np.zeros((m.size, 1))]))
            rhs.append(-sign * zb)
            A, b = m[:, None] * zA, m * zb
        W, bias = linear[-1]
        out_A, out_b = C @ W.toarray() @ A, C @ (W.toarray() @ b + bias)
        rows.append(np.hstack([out_A, -np.ones((C.shape[0], 1))]))  # C_r·y - t <= 0
        rhs.append(-out_b)
        objective = np.zeros(lo.size + 1)
        objective[-1] = 1.0
        res = linprog(objective, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs),
                      bounds=[*zip(lo, hi, strict=True), (None, None)], method="highs")
        if res.status == 0:
            best = min(best, float(res.fun))
    return best


@pytest.mark.parametrize("seed", range(6, 12))  # seed 9 reaches the disjunct, 7 and 10 nearly
def test_two_row_disjuncts_match_the_exact_answer(seed):
    """Disjuncts of two rows (both other classes at least the label's score; the descents
    start from each weak domain's corner for its binding row): every answer agrees with the
    exact min-max over all activation patterns, a candidate meets both rows."""
    net, lo, hi, cb, label = _chain_case(seed, [2, 4, 3, 3], 1.2)
    others = [j for j in range(3) if j != label]
    C = np.zeros((2, 3))
    C[:, label] = 1.0
    C[0, others[0]], C[1, others[1]] = -1.0, -1.0
    exact = _exact_min_max(net, lo, hi, C)
    if abs(exact) < 1e-6:
        pytest.skip("the exact answer sits on the boundary")
    result = branch_and_bound(cb, C, np.zeros(2), np.zeros(2, dtype=bool), Deadline.after(30),
                              batch=2, root_steps=0)
    assert result.status == ("unsat" if exact > 0 else "candidate"), (seed, exact, result)
    if exact < 0:
        assert np.all(C @ net.forward(result.x[None])[-1][0] <= 0)

