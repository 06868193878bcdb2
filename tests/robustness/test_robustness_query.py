"""The robustness query: answers against dense sampling on tiny nets (a counterexample is
found wherever sampling finds one; ``unsat`` never where sampling finds one), the per-
disjunct problems on every backend, and the bound-only path."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import usable_first_party
from flat_nets import every_kind, mlp

from smug_opt import solve
from smug_opt.network.flat import FlatNetwork, Preprocess
from smug_opt.robustness import RobustnessQuery, decide
from smug_opt.vnnlib import Conjunct


def _label_changes(net: FlatNetwork, label: int) -> tuple[Conjunct, ...]:
    """The unsafe region 'some other class scores at least the label's'."""
    out = []
    for j in range(net.num_outputs):
        if j != label:
            row = np.zeros((1, net.num_outputs))
            row[0, label], row[0, j] = 1.0, -1.0
            out.append(Conjunct(row, np.zeros(1), np.zeros(1, dtype=bool)))
    return tuple(out)


def _query(seed: int, eps: float) -> tuple[RobustnessQuery, np.ndarray]:
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 8, 8, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    pre = Preprocess(np.arange(2), np.ones(2), np.zeros(2))
    return RobustnessQuery(net, pre, x0 - eps, x0 + eps, _label_changes(net, label)), x0


def _sampled_unsafe(query: RobustnessQuery, points: np.ndarray) -> list[bool]:
    scores = query.net.forward(query.preprocess(points))[-1]
    return [bool(np.any(np.all(scores @ d.matrix.T <= d.rhs, axis=1))) for d in query.disjuncts]


def _grid(query: RobustnessQuery, n: int = 301) -> np.ndarray:
    axes = [np.linspace(lo, hi, n) for lo, hi in zip(query.lo, query.hi, strict=True)]
    return np.array(np.meshgrid(*axes)).reshape(len(axes), -1).T


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("eps", [0.1, 0.4, 1.0])
def test_answers_agree_with_dense_sampling(seed, eps):
    query, _ = _query(seed, eps)
    sampled = _sampled_unsafe(query, _grid(query))
    verdict = decide(query, time_limit=30)
    assert verdict.answer == ("sat" if any(sampled) else "unsat"), (sampled, verdict)
    if verdict.answer == "sat":
        x = verdict.x
        assert np.all((query.lo <= x) & (x <= query.hi))
        assert any(d.holds(query.net.forward(x[None])[-1][0]) for d in query.disjuncts)


@pytest.mark.parametrize("seed", [0, 2, 3, 5])
def test_solver_finds_what_sampling_finds_per_disjunct(seed):
    """Without the attack: each disjunct's problem is feasible where sampling hits it, and
    its solution is a counterexample by the float64 forward pass."""
    query, _ = _query(seed, 1.0)
    sampled = _sampled_unsafe(query, _grid(query))
    for k, hit in enumerate(sampled):
        result = solve(query.problem(k), "highs", time_limit=20)
        if hit:
            assert result.has_solution, (k, result)
        if result.status.name == "INFEASIBLE":
            assert not hit
        if result.has_solution:
            xa = query.affine_input(result.values())
            excess = query.disjuncts[k].matrix @ query.net.forward(xa[None])[-1][0] - query.disjuncts[k].rhs
            assert np.all(excess <= 1e-9)


def test_every_layer_kind_and_a_preprocessing():
    """Conv, leaky ReLU, max pooling, clip, residual add; inputs scaled and shifted before
    the network (the box is mapped outward): the answer agrees with random sampling."""
    rng = np.random.default_rng(7)
    net = every_kind(rng)
    pre = Preprocess(np.arange(50), np.full(50, 0.5), np.full(50, 0.1))
    x0 = rng.uniform(0, 1, 50)
    label = int(net.forward(pre(x0[None]))[-1][0].argmax())
    for eps, expected in ((0.01, None), (0.6, None)):
        query = RobustnessQuery(net, pre, x0 - eps, x0 + eps, _label_changes(net, label))
        points = query.lo + (query.hi - query.lo) * rng.random((20000, 50))
        corners = np.where(rng.random((5000, 50)) < 0.5, query.lo, query.hi)
        sampled = _sampled_unsafe(query, np.vstack([points, corners]))
        verdict = decide(query, time_limit=60)
        assert verdict.answer in ("sat", "unsat"), verdict
        if any(sampled) or expected == "sat":
            assert verdict.answer == "sat"
        if verdict.answer == "sat":
            y = net.forward(pre(verdict.x[None]))[-1][0]
            assert any(d.holds(y) for d in query.disjuncts)
            assert np.all((query.lo <= verdict.x) & (verdict.x <= query.hi))


def test_bounds_alone_prove_a_small_box():
    query, _ = _query(0, 0.01)
    verdict = decide(query, time_limit=10)
    assert verdict.answer == "unsat" and verdict.proof == "exact"
    assert set(verdict.decided_by) == {"bounds"} and verdict.solves == ()


_SLOW_BACKENDS = {"z3", "cpsat"}  # minutes here: z3 times out on the ReLU chains, CP-SAT scales


@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.slow) if b in _SLOW_BACKENDS else b
                                     for b in usable_first_party()])
def test_every_backend_agrees_on_feasibility(backend):
    """Each disjunct's problem of a few queries: a backend that answers agrees with z3's
    exact answer (or, without z3, with sampling); a solution it returns is a
    counterexample by the forward pass."""
    for seed, eps in ((0, 1.0), (2, 0.4), (3, 0.4), (4, 0.4)):
        query, _ = _query(seed, eps)
        sampled = _sampled_unsafe(query, _grid(query, 201))
        for k, hit in enumerate(sampled):
            result = solve(query.problem(k), backend, time_limit=30)
            assert result.status.name != "ERROR" or result.message, result
            if result.status.name == "INFEASIBLE":
                assert not hit, (backend, seed, eps, k)
            if result.has_solution:
                xa = query.affine_input(result.values())
                d = query.disjuncts[k]
                assert np.all(d.matrix @ query.net.forward(xa[None])[-1][0] - d.rhs <= 1e-9)
            elif hit:
                assert result.status.name in ("NO_SOLUTION", "ERROR"), (backend, result)


@pytest.mark.parametrize("seed", range(3))
def test_encoding_bounds_are_alpha_crown_tightened_and_hold_on_samples(seed):
    """On a ReLU chain the problems' encoding declares CROWN's intervals intersected with
    α-CROWN's: never wider, and every sampled input's layer values lie inside."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, [3, 12, 12, 12, 3])
    x0 = rng.uniform(-1, 1, 3)
    label = int(net.forward(x0[None])[-1][0].argmax())
    pre = Preprocess(np.arange(3), np.ones(3), np.zeros(3))
    query = RobustnessQuery(net, pre, x0 - 0.4, x0 + 0.4, _label_changes(net, label))
    crown, tight = query.bounds, query.encoding_bounds()
    assert np.sum(tight.hi[5] - tight.lo[5]) < np.sum(crown.hi[5] - crown.lo[5])  # the third linear layer
    points = x0 + rng.uniform(-0.4, 0.4, (4000, 3))
    for k, values in enumerate(net.forward(points)):
        assert np.all(tight.lo[k] >= crown.lo[k]) and np.all(tight.hi[k] <= crown.hi[k])
        assert np.all(values >= tight.lo[k]) and np.all(values <= tight.hi[k]), k


def test_a_tie_on_a_relu_of_the_logits_is_a_counterexample_the_attack_finds():
    """With a ReLU on the logits (ERAN's nets) the unsafe region 'another class scores at
    least the label's' is often reached only by a tie at 0: the closed region's boundary is
    inside it, so the attack's point there is a counterexample, not a near miss."""
    from flat_nets import linear

    from smug_opt.network.flat import FlatLayer

    scores = linear(0, np.array([[-2.0, 0.0], [0.0, 0.0]]), np.array([1.0, -1.0]))  # 1 - 2·x0 and -1
    layers = (FlatLayer("input", (), 2), scores, FlatLayer("relu", (1,), 2))
    net = FlatNetwork(layers, (2,))
    pre = Preprocess(np.arange(2), np.ones(2), np.zeros(2))
    query = RobustnessQuery(net, pre, np.zeros(2), np.ones(2), _label_changes(net, 0))
    verdict = decide(query, time_limit=30)
    assert verdict.answer == "sat" and verdict.decided_by == ("attack",), verdict
    assert np.array_equal(net.forward(verdict.x[None])[-1][0], [0.0, 0.0])  # the tie


def test_bounds_cover_the_real_closure_of_a_strict_box_and_points_stay_in_floats():
    """``X_0 < 1`` holds for the floats up to below(1) and for the reals up to 1: the bounds
    (and so an ``unsat``) cover the reals, a counterexample is a float that satisfies it."""
    from smug_opt.vnnlib import parse_vnnlib

    net = mlp(np.random.default_rng(3), [2, 4, 2])
    pre = Preprocess(np.arange(2), np.ones(2), np.zeros(2))
    spec = parse_vnnlib("(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)"
                        "(declare-const Y_1 Real)(assert (>= X_0 0))(assert (< X_0 1))"
                        "(assert (>= X_1 0))(assert (<= X_1 1))(assert (>= Y_0 Y_1))")
    query = RobustnessQuery.from_spec(net, pre, spec)
    assert query.affine_box.hi.tolist() == [1.0, 1.0]
    assert query.model_input(np.array([1.0, 1.0])).tolist() == [np.nextafter(1.0, 0.0), 1.0]
    scaled = RobustnessQuery.from_spec(net, Preprocess(np.arange(2), np.full(2, 2.0), np.zeros(2)), spec)
    assert scaled.affine_box.hi[0] >= 2.0  # the closure's image, rounded outward
    with pytest.raises(ValueError, match="closure"):
        RobustnessQuery(net, pre, spec.lo, spec.hi, spec.disjuncts, closure=(spec.lo, spec.lo))
