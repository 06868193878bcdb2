"""The stress-case encoding: optima against brute force over every mask, on every backend;
bounds that never cut off a feasible mask; the real-model check; clear errors."""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from tiny_problems import MLP_INPUTS, random_input, random_mlp

import smug_opt
from smug_opt.encode import full_network
from smug_opt.ir import Sense
from smug_opt.models.grid import regular_grid
from smug_opt.models.mlp import as_mlp, verify_mask_in_model

fn = sys.modules["smug_opt.encode.full_network"]

FIRST_PARTY = [i.name for i in smug_opt.backend_infos() if i.usable and i.distribution == "smug-opt"]
MODES = ("none", "interval", "lp", "crown", "crown+lp")


def _all_masks(n: int) -> np.ndarray:
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)


def _exact_margin(layers, x, mask, label) -> Fraction:
    """``logit[label] − max other`` in exact rational arithmetic."""
    value = [Fraction(float(v)) * int(m) for v, m in zip(x, mask, strict=True)]
    for k, (W, b) in enumerate(layers):
        value = [sum((Fraction(float(W[i, j])) * value[i] for i in range(W.shape[0])), Fraction(float(b[j])))
                 for j in range(W.shape[1])]
        if k + 1 < len(layers):
            value = [max(v, Fraction(0)) for v in value]
    return value[label] - max(v for j, v in enumerate(value) if j != label)


def _brute_force(layers, x, label) -> tuple[np.ndarray, np.ndarray]:
    """``(masks, feasible)`` over all 2^n masks; float64, with near-ties decided exactly."""
    masks = _all_masks(x.size)
    value = masks * x
    for k, (W, b) in enumerate(layers):
        value = value @ W + b
        if k + 1 < len(layers):
            value = np.maximum(value, 0.0)
    margin = value[:, label] - np.delete(value, label, axis=1).max(axis=1)
    feasible = margin > 0
    for i in np.flatnonzero(np.abs(margin) < 1e-9):
        feasible[i] = _exact_margin(layers, x, masks[i], label) > 0
    return masks, feasible


def _instance(seed: int, hidden: tuple[int, ...] = (8,)
              ) -> tuple[list, np.ndarray, int, np.ndarray, np.ndarray]:
    layers, x = random_mlp(seed, hidden), random_input(seed)
    label = as_mlp(layers).predicted(as_mlp(layers).logits(x[None]))[0]
    masks, feasible = _brute_force(layers, x, int(label))
    return layers, x, int(label), masks, feasible


def _optimum(masks: np.ndarray, feasible: np.ndarray) -> int:
    return int(masks[feasible].sum(axis=1).min())


# seeds whose optimum is not trivial (the empty mask does not keep the label)
SEEDS = [s for s in range(40) if _optimum(*_instance(s)[3:]) >= 2][:3]
DEEP_SEEDS = [s for s in range(40) if _optimum(*_instance(s, (8, 8))[3:]) >= 2][:2]
ONE_PIXEL_SEEDS = [s for s in range(40) if _optimum(*_instance(s)[3:]) == 1][:2]


def _problem_feasible(problem: smug_opt.Problem, masks: np.ndarray) -> np.ndarray:
    """Which pixel masks the problem accepts (its binaries are the nonzero pixels), by a
    float64 evaluation of its ReLUs, declared bounds and rows; a mask whose outcome a
    near-tie could flip goes to the exact verifier."""
    cells = np.asarray(problem.metadata["cells"])
    X = np.zeros((masks.shape[0], problem.num_vars))
    X[:, : cells.size] = masks[:, cells]
    slacks = []  # per requirement, >= 0 (or > 0 where strict) when it holds
    relu_in = problem.relu_in.toarray()
    for r, out in enumerate(problem.relu_out):
        z = X @ relu_in[r] + problem.relu_const[r]
        slacks += [z - problem.relu_lo[r], problem.relu_hi[r] - z]
        X[:, out] = np.maximum(z, 0.0)
    activity = X @ problem.A.toarray().T - problem.rhs
    sign = np.where((problem.senses == Sense.LE) | (problem.senses == Sense.LT), -1.0, 1.0)
    slack = np.column_stack([*slacks, activity * sign]) if slacks else activity * sign
    strict = np.concatenate([np.zeros(len(slacks), dtype=bool), problem.senses == Sense.GT])
    holds = np.where(strict, slack > 0, slack >= 0).all(axis=1)
    clearly_broken = (slack < -1e-9).any(axis=1)
    near = (np.abs(slack) <= 1e-9).any(axis=1)
    for i in np.flatnonzero(near & ~clearly_broken):
        holds[i] = smug_opt.verify(problem, X[i]).ok
    return holds


# --------------------------------------------------------------------------- optima


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("backend", FIRST_PARTY)
def test_every_backend_finds_the_brute_force_optimum(seed: int, backend: str) -> None:
    """Every first-party backend proves the optimum that brute force over all 2^16 masks
    finds. z3 (SMT) may run out of time on these 13-binary, 8-ReLU problems; whatever it
    returns must still agree."""
    layers, x, label, masks, feasible = _instance(seed)
    problem = full_network(layers, x, label)
    result = smug_opt.solve(problem, backend, time_limit=15 if backend == "z3" else 60)
    if backend == "z3" and not result.status.has_solution:
        assert result.status in (smug_opt.Status.NO_SOLUTION, smug_opt.Status.ERROR)
        assert result.bound is None or result.bound <= _optimum(masks, feasible)
        return
    assert result.status is smug_opt.Status.OPTIMAL or backend == "z3", (backend, result)
    assert result.objective >= _optimum(masks, feasible)
    if result.status is smug_opt.Status.OPTIMAL:
        assert result.objective == _optimum(masks, feasible)
    mask = fn.solution_mask(problem, result.x).reshape(-1)
    assert verify_mask_in_model(layers, x, mask, label)
    assert feasible[int((mask.astype(int) << np.arange(MLP_INPUTS)).sum())]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bounds", MODES)
@pytest.mark.parametrize("max_cells", [None, "greedy"])
def test_problem_accepts_exactly_the_feasible_masks(seed: int, bounds: str, max_cells: str | None) -> None:
    """Bounds and neuron elimination never cut off a feasible mask nor admit an infeasible one:
    the problem's feasible set is the network's (within the greedy size limit, if any), and
    each feasible mask's pre-activations lie within the declared bounds."""
    layers, x, label, masks, feasible = _instance(seed)
    problem = full_network(layers, x, label, bounds=bounds, max_cells=max_cells, strengthen=False)
    expected = feasible.copy()
    limit = problem.metadata["max_cells"]
    if limit is not None:
        assert limit >= _optimum(masks, feasible)
        expected &= masks[:, x != 0].sum(axis=1) <= limit
    # masks differing only on zero pixels are the same binary assignment
    relevant = masks[:, x == 0].sum(axis=1) == 0
    accepted = _problem_feasible(problem, masks[relevant])
    np.testing.assert_array_equal(accepted, expected[relevant])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("max_cells", [None, "greedy"])
def test_bounds_hold_for_every_feasible_mask(seed: int, max_cells: str | None) -> None:
    """Declared first-layer bounds contain the pre-activation of every feasible mask (within
    the size limit, if any), eliminated neurons never fire on one, and LP bounds lie inside
    interval bounds, as do propagated ones."""
    layers, x, label, masks, feasible = _instance(seed)
    W1, b1 = layers[0]
    previous = None
    for bounds in ("interval", "lp", "crown"):
        problem = full_network(layers, x, label, bounds=bounds, max_cells=max_cells)
        ok = feasible.copy()
        if problem.metadata["max_cells"] is not None:
            ok &= masks[:, x != 0].sum(axis=1) <= problem.metadata["max_cells"]
        z = (masks[ok] * x) @ W1 + b1
        kept = np.asarray(problem.metadata["neurons"][0]["kept"])
        lo = np.full(W1.shape[1], -np.inf)
        hi = np.zeros(W1.shape[1])  # eliminated: proven never to fire
        lo[kept] = problem.relu_lo[: kept.size]
        hi[kept] = problem.relu_hi[: kept.size]
        assert np.all(z >= lo) and np.all(z <= hi), bounds
        if bounds != "interval":  # (an eliminated neuron's lo is -inf here: no claim)
            both = np.isfinite(lo) & np.isfinite(previous[0])
            assert np.all(lo[both] >= previous[0][both]) and np.all(hi <= previous[1])
        previous = previous or (lo, hi)  # the interval bounds


@pytest.mark.parametrize("seed", DEEP_SEEDS)
def test_deeper_network_agrees_across_bound_modes(seed: int) -> None:
    """On a 16-8-8-3 network every bound mode gives the brute-force optimum on HiGHS."""
    layers, x, label, masks, feasible = _instance(seed, (8, 8))
    for bounds in MODES:
        result = smug_opt.solve(full_network(layers, x, label, bounds=bounds), "highs", time_limit=60)
        assert result.status is smug_opt.Status.OPTIMAL
        assert result.objective == _optimum(masks, feasible), bounds
        problem = full_network(layers, x, label, bounds=bounds, strengthen=False)
        relevant = masks[:, x == 0].sum(axis=1) == 0
        expected = feasible[relevant]
        if problem.metadata["max_cells"] is not None:
            expected &= masks[relevant][:, x != 0].sum(axis=1) <= problem.metadata["max_cells"]
        np.testing.assert_array_equal(_problem_feasible(problem, masks[relevant]), expected)


@pytest.mark.parametrize("seed", [*SEEDS, *DEEP_SEEDS])
def test_strengthening_rows_hold_for_every_mask(seed: int) -> None:
    """The rows ``h <= max(0, b) + Σ max(0, w)·v`` added by ``strengthen`` hold for every
    mask, feasible or not (they are valid inequalities, not restrictions)."""
    hidden = (8,) if seed in SEEDS else (8, 8)
    layers, x, label, masks, _ = _instance(seed, hidden)
    plain = full_network(layers, x, label, bounds="none", max_cells=None, strengthen=False)
    strong = full_network(layers, x, label, bounds="none", max_cells=None)
    assert strong.num_rows > plain.num_rows
    cells = np.asarray(strong.metadata["cells"])
    X = np.zeros((masks.shape[0], strong.num_vars))
    X[:, : cells.size] = masks[:, cells]
    relu_in = strong.relu_in.toarray()
    for r, out in enumerate(strong.relu_out):
        X[:, out] = np.maximum(X @ relu_in[r] + strong.relu_const[r], 0.0)
    cuts = slice(0, strong.num_rows - plain.num_rows)  # added before the output rows
    activity = X @ strong.A[cuts].toarray().T - strong.rhs[cuts]
    assert np.all(strong.senses[cuts] == Sense.LE) and np.all(activity <= 1e-12)


def test_cells_on_a_grid_share_one_binary() -> None:
    """A 4x4 input with 2x2 cells has one binary per nonempty cell; the optimum over cells
    matches brute force over the 2^4 cell masks."""
    layers, x = random_mlp(SEEDS[0]), random_input(SEEDS[0])
    x = x.copy()
    x[[10, 11, 14, 15]] = 0.0  # the bottom-right cell is empty
    label = int(np.argmax(as_mlp(layers).logits(x[None])[0]))
    problem = full_network(layers, x, label, cell=2, shape=(4, 4))
    assert problem.metadata["cells"] == [0, 1, 2]
    pixel_cell = regular_grid((4, 4), 2).cell_of
    mlp = as_mlp(layers)
    best = min(sum(c) for c in itertools.product((0, 1), repeat=3)
               if mlp.keeps(mlp.logits((x * np.isin(pixel_cell, np.flatnonzero(c)))[None]), label)[0])
    result = smug_opt.solve(problem, "highs", time_limit=30)
    assert result.objective == best
    assert verify_mask_in_model(layers, x.reshape(4, 4), fn.solution_mask(problem, result.x), label)


def test_metadata_records_provenance() -> None:
    layers, x, label, _, _ = _instance(SEEDS[0])
    problem = full_network(layers, x, bounds="interval", name="toy")
    meta = problem.metadata
    assert meta["encoding"] == "full-network" and meta["model"] == "toy" and len(meta["model_digest"]) == 16
    assert meta["label"] == label == meta["predicted"]
    assert meta["bounds"] == "interval" and meta["cell"] == 1 and meta["layer_sizes"] == [16, 8, 3]
    assert meta["nonzero_inputs"] == 13 == int(problem.binary.sum())
    layer = meta["neurons"][0]
    assert layer["dead"] + layer["active"] + layer["unstable"] == 8 == layer["n"]
    assert meta["unstable"] + meta["stable"] == 8
    assert problem.objective[problem.binary].tolist() == [1.0] * 13


def test_zero_hidden_layers_is_a_linear_problem() -> None:
    """A network with no hidden layer gives rows straight over the binaries."""
    layers = random_mlp(3, ())
    x = random_input(3)
    problem = full_network(layers, x)
    assert problem.num_relus == 0 and problem.num_vars == 13
    masks, feasible = _brute_force(layers, x, problem.metadata["label"])
    assert smug_opt.solve(problem, "highs", time_limit=30).objective == _optimum(masks, feasible)


# ------------------------------------------------------------------- model check


def test_verify_mask_in_model_is_strict() -> None:
    W = np.array([[1.0, 1.0]])
    layers = [(np.eye(1), np.zeros(1)), (W, np.zeros(2))]
    assert not verify_mask_in_model(layers, np.array([1.0]), np.array([1]), 0)  # a tie is not a win
    layers = [(np.eye(1), np.zeros(1)), (np.array([[1.0, 0.5]]), np.zeros(2))]
    assert verify_mask_in_model(layers, np.array([1.0]), np.array([1]), 0)
    assert not verify_mask_in_model(layers, np.array([1.0]), np.array([0]), 0)


def test_keras_model_and_its_weights_give_the_same_problem() -> None:
    keras = pytest.importorskip("keras")
    from smug_opt.models.mlp import mlp_layers

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    x = random_input(0).reshape(4, 4, 1)
    from_model = full_network(model, x, bounds="interval")
    from_layers = full_network(mlp_layers(model), x, bounds="interval")
    assert from_model.metadata["model_digest"] == from_layers.metadata["model_digest"]
    assert (from_model.relu_in != from_layers.relu_in).nnz == 0
    assert from_model.metadata["grid"] == [4, 4]
    result = smug_opt.solve(from_model, "highs", time_limit=30)
    mask = fn.solution_mask(from_model, result.x)
    label = from_model.metadata["label"]
    assert verify_mask_in_model(model, x, mask, label)
    assert np.argmax(model.predict((x * mask[..., None])[None], verbose=0)[0]) == label


# ------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": np.full(15, 0.5)}, "15 values"),
        ({"x": np.array([np.nan] * 16)}, "NaN"),
        ({"label": 3}, "label must be an int in"),
        ({"bounds": "milp"}, "bounds must be one of"),
        ({"cell": 0}, "cell must be a positive int"),
        ({"max_cells": -1}, "max_cells must be"),
        ({"shape": (3, 5)}, "grid does not divide"),
    ],
)
def test_bad_input_is_named(kwargs: dict, message: str) -> None:
    args = {"model_or_layers": random_mlp(0), "x": random_input(0), **kwargs}
    with pytest.raises(ValueError, match=message):
        full_network(**args)


def test_non_mlp_is_rejected() -> None:
    W, b = random_mlp(0)[0]
    with pytest.raises(ValueError, match="ReLU hidden layers"):
        full_network([(W, b, "tanh"), (np.ones((8, 3)), np.zeros(3))], random_input(0))
    with pytest.raises(ValueError, match="takes 9 inputs"):
        full_network([(W, b), (np.ones((9, 3)), np.zeros(3))], random_input(0))
    with pytest.raises(ValueError, match="NaN or inf weights"):
        full_network([(W * np.nan, b), (np.ones((8, 3)), np.zeros(3))], random_input(0))


@pytest.mark.parametrize(("outputs", "tied"), [(3, "classes 0, 1, 2 at 0"), (1, "classes 0, 1 at 0")])
def test_tied_logits_need_an_explicit_label(outputs: int, tied: str) -> None:
    """Every logit 0 (one logit 0: a sigmoid's even odds) predicts no class."""
    W, b = random_mlp(0)[0]
    layers = [(W, b), (np.zeros((8, outputs)), np.zeros(outputs))]
    with pytest.raises(ValueError, match=rf"tie for the top class \({tied}\); give label explicitly"):
        full_network(layers, random_input(0))


# ------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("seed", range(5))
def test_safe_lp_bound_holds_for_any_multipliers(seed: int) -> None:
    """The dual bound is a valid lower bound on the LP minimum for arbitrary multipliers,
    and tight for the optimal ones."""
    from scipy.optimize import linprog

    from smug_opt.bounds.lp import safe_min as _safe_min

    rng = np.random.default_rng(seed)
    A = sp.csr_matrix(rng.normal(size=(6, 5)))
    row_lo = np.where(rng.uniform(size=6) < 0.5, -np.inf, -1.0)
    row_hi = np.where(np.isinf(row_lo), 1.0, np.inf)
    col_lb, col_ub = -np.ones(5), 2.0 * np.ones(5)
    c = rng.normal(size=5)
    le, ge = np.isfinite(row_hi), np.isfinite(row_lo)
    res = linprog(c, A_ub=sp.vstack([A[le], -A[ge]]), b_ub=np.concatenate([row_hi[le], -row_lo[ge]]),
                  bounds=np.column_stack([col_lb, col_ub]), method="highs")
    assert res.status == 0
    y = np.zeros(6)
    y[le] = res.ineqlin.marginals[: le.sum()]
    y[ge] = -res.ineqlin.marginals[le.sum():]
    At, abs_At = A.T.tocsr(), abs(A).T.tocsr()
    assert _safe_min(c, At, abs_At, row_lo, row_hi, col_lb, col_ub, y) == pytest.approx(res.fun, abs=1e-9)
    for _ in range(20):
        assert _safe_min(c, At, abs_At, row_lo, row_hi, col_lb, col_ub, rng.normal(size=6) * 3) <= res.fun


def test_the_greedy_mask_is_attached_as_a_verified_start() -> None:
    layers, x, _, _, _ = _instance(SEEDS[0])
    problem = full_network(layers, x, bounds="interval")
    start = np.asarray(problem.metadata["start"], dtype=float)
    assert start.size == int(problem.binary.sum()) == len(problem.metadata["cells"])
    assert start.sum() == problem.metadata["greedy_cells"] == problem.metadata["max_cells"]
    full = np.zeros(problem.num_vars)
    full[problem.binary] = start
    assert smug_opt.verify(problem, full).ok
    assert "start" not in full_network(layers, x, bounds="interval", max_cells=None).metadata


def _enumeration_inputs(seed: int) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray]:
    """``(A1, b1, hidden, D, d)`` of a 16-8-8-3 instance as the bound enumeration takes them
    (rows of A1: the nonzero pixels ``nz``), and its brute-force masks and feasibility."""
    layers, x, label, masks, feasible = _instance(seed, (8, 8))
    (W1, b1), hidden, (W_out, b_out) = layers[0], layers[1:-1], layers[-1]
    nz = np.flatnonzero(x)
    others = np.delete(np.arange(W_out.shape[1]), label)
    D, d = (W_out[:, label][None, :] - W_out[:, others].T), -(b_out[label] - b_out[others])
    return (x[nz, None] * W1[nz], b1, hidden, D, d), nz, masks, feasible


@pytest.mark.parametrize("seed", range(6))
def test_enumerated_bounds_contain_every_small_mask_that_keeps_the_label(seed: int) -> None:
    from smug_opt.encode.enumeration import enumerated_bounds

    (A1, b1, hidden, D, d), nz, masks, feasible = _enumeration_inputs(seed)
    for max_ones in (1, 2, 3):
        out = enumerated_bounds(A1, b1, hidden, D, d, max_ones)
        small = feasible & (masks[:, nz].sum(axis=1) <= max_ones)
        if out is None:
            assert not small.any()
            continue
        lo, hi, fewest = out
        if small.any():  # no feasible mask has fewer ones than the proven minimum
            assert masks[small][:, nz].sum(axis=1).min() >= fewest
        z = masks[small][:, nz] @ A1 + b1
        for k in range(len(lo)):
            assert np.all(z >= lo[k]) and np.all(z <= hi[k]), (seed, max_ones, k)
            W, b = hidden[k] if k < len(hidden) else (None, None)
            if W is not None:
                z = np.maximum(z, 0.0) @ W + b


@pytest.mark.parametrize("seed", range(3))
def test_enumeration_keeps_a_mask_that_fails_by_less_than_the_row_margin(seed: int) -> None:
    """A mask dropped by the enumeration is one that fails a row by more than its error
    bound and the rows' own rounding margin: raising the threshold just past the best
    size-1 mask's slack rules size 1 out with no margin, and not with one that covers it."""
    from smug_opt.encode.enumeration import enumerated_bounds

    (A1, b1, hidden, D, d), _, _, _ = _enumeration_inputs(seed)
    z = A1 + b1
    for W, b in hidden:
        z = np.maximum(z, 0.0) @ W + b
    best = float((np.maximum(z, 0.0) @ D.T - d).min(axis=1).max())
    raised = d + best + 1e-6  # every single cell now fails by at least 1e-6
    empty = np.maximum(b1, 0.0)
    for W, b in hidden:
        empty = np.maximum(empty @ W + b, 0.0)
    if (empty @ D.T - raised).min() > -1e-3:
        pytest.skip("the empty mask is near acceptance here")
    plain = enumerated_bounds(A1, b1, hidden, D, raised, 1)
    assert plain is None  # no mask of at most one cell may satisfy the rows
    widened = enumerated_bounds(A1, b1, hidden, D, raised, 1, row_margin=np.full(d.size, 1e-5))
    assert widened is not None and widened[2] == 1


@pytest.mark.parametrize("seed", ONE_PIXEL_SEEDS)
def test_an_mlp_s_minimum_size_never_rules_out_a_mask_within_rounding_of_acceptance(seed) -> None:
    """Near-ties: with the margin within a few ulps of the best single pixel's float64 slack,
    rounding decides whether that pixel keeps the label, and the proven minimum size must
    not rule it out (the MLP path's proof counts its rows' rounding and the problem's, as
    the other networks' does); with the margin clearly past it, size 1 is ruled out and the
    problem's exact check agrees."""
    layers, x, label, _, _ = _instance(seed)
    mlp = as_mlp(layers)
    nz = np.flatnonzero(x)
    singles = np.zeros((nz.size, x.size))
    singles[np.arange(nz.size), nz] = 1.0
    logits = mlp.logits(singles * x)
    slack = logits[:, label] - np.delete(logits, label, axis=1).max(axis=1)
    best = int(np.argmax(slack))
    for ulps in (-3, 0, 3):
        margin = float(slack[best])
        for _ in range(abs(ulps)):
            margin = float(np.nextafter(margin, np.inf if ulps > 0 else -np.inf))
        assert full_network(layers, x, label, margin=margin, strengthen=False).metadata["min_cells"] <= 1
    margin = float(slack[best]) + 1e-3
    problem = full_network(layers, x, label, margin=margin, strengthen=False)
    assert problem.metadata["min_cells"] == 2
    plain = full_network(layers, x, label, margin=margin, bounds="interval", max_cells=None, strengthen=False)
    start = np.zeros(plain.num_vars)
    start[list(problem.metadata["cells"]).index(int(nz[best]))] = 1.0
    assert not smug_opt.verify(plain, start).ok


@pytest.mark.parametrize("seed", SEEDS)
def test_crown_proves_a_size_where_the_masks_up_to_the_limit_are_too_many(seed, monkeypatch) -> None:
    """On an MLP whose masks up to the greedy size are not all evaluated, ``crown`` still
    evaluates the smaller sizes within its work budget, once (the pass that looks for a
    smaller start proves them): a proven minimum size (the problem's cardinality row, never
    above the brute-force optimum) and the same feasible masks."""
    from smug_opt.encode import flat_enumeration, layer_bounds

    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(args[1])
        return flat_enumeration.smaller_masks(*args, **kwargs)

    layers, x, label, masks, feasible = _instance(seed)
    monkeypatch.setattr(layer_bounds, "ENUMERATION_WORK", 0.0)  # never every mask up to the limit
    monkeypatch.setattr(fn, "smaller_masks", counted)
    monkeypatch.setattr(layer_bounds, "smaller_masks", counted)
    problem = full_network(layers, x, label, strengthen=False)
    assert len(calls) == 1
    assert "sizes below" in problem.metadata["bounds_source"]
    assert 0 < problem.metadata["min_cells"] <= _optimum(masks, feasible)
    monkeypatch.setattr(flat_enumeration, "SEARCH_WORK", 0.0)  # and no smaller size either
    assert full_network(layers, x, label, strengthen=False).metadata["min_cells"] == 0
    relevant = masks[:, x == 0].sum(axis=1) == 0
    expected = feasible & (masks[:, x != 0].sum(axis=1) <= problem.metadata["max_cells"])
    np.testing.assert_array_equal(_problem_feasible(problem, masks[relevant]), expected[relevant])


def test_smaller_masks_finds_the_optimum_the_greedy_mask_misses() -> None:
    """Random 10-cell networks: trying every smaller mask gives a brute-force optimal mask,
    including where the greedy one has more cells (which happens: checked)."""
    from smug_opt.encode.flat_enumeration import smaller_masks
    from smug_opt.encode.masked import MaskedNetwork, flat_mlp
    from smug_opt.encode.masks import greedy_mask

    masks = _all_masks(10)
    missed = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        # scores D·h − d over the last hidden layer, each required > 0
        layers = [(rng.normal(size=(10, 6)), rng.normal(size=6) - 0.5),
                  (rng.normal(size=(6, 6)), 0.3 * rng.normal(size=6)),
                  (rng.normal(size=(2, 6)).T, -(rng.normal(size=2) + 0.5))]
        network = MaskedNetwork(flat_mlp(layers), np.ones(10), np.arange(10), sp.identity(10, format="csr"),
                                np.eye(2), np.zeros(2))
        greedy = greedy_mask(network)
        slack = network.slack(masks)
        if greedy is None or np.abs(slack).min() < 1e-6:  # no mask, or a near-tie: skip
            continue
        optimum = int(masks[slack > 0].sum(axis=1).min())
        found = smaller_masks(network, int(greedy.sum())).found
        better = greedy if found is None else found
        assert better.sum() == optimum and network.slack(better[None, :])[0] > 0, seed
        missed += int(greedy.sum()) > optimum
    assert missed >= 2


def test_beam_search_finds_masks_smaller_than_greedy_s_and_never_a_wrong_one() -> None:
    """Random 12-cell networks: every mask the beam search returns is accepted and never
    smaller than the brute-force optimum; it beats a greedy mask that misses the optimum on
    some (checked)."""
    from smug_opt.encode.masked import MaskedNetwork, flat_mlp
    from smug_opt.encode.masks import beam_mask, greedy_mask

    masks = _all_masks(12)
    improved = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        layers = [(rng.normal(size=(12, 8)), rng.normal(size=8) - 0.5),
                  (rng.normal(size=(8, 8)), 0.3 * rng.normal(size=8)),
                  (rng.normal(size=(2, 8)).T, -(rng.normal(size=2) + 0.5))]
        network = MaskedNetwork(flat_mlp(layers), np.ones(12), np.arange(12), sp.identity(12, format="csr"),
                                np.eye(2), np.zeros(2))
        greedy = greedy_mask(network)
        slack = network.slack(masks)
        if greedy is None or np.abs(slack).min() < 1e-6:
            continue
        optimum = int(masks[slack > 0].sum(axis=1).min())
        found = beam_mask(network, greedy, width=8)
        assert network.slack(found[None, :])[0] > 0 and optimum <= found.sum() <= greedy.sum(), seed
        improved += int(found.sum() < greedy.sum())
    assert improved >= 2


def test_enumeration_gives_way_to_lps_beyond_its_cap() -> None:
    from smug_opt.encode.enumeration import MAX_ENUMERATED_MASKS, enumerated_bounds

    rng = np.random.default_rng(0)
    A1 = rng.normal(size=(2000, 4))
    assert sum(math.comb(2000, k) for k in range(3)) > MAX_ENUMERATED_MASKS
    assert enumerated_bounds(A1, np.zeros(4), [], np.ones((1, 4)), np.zeros(1), 2) is None


def test_bound_lps_come_from_a_backend_s_lp_solver() -> None:
    from smug_opt.bounds.lp import lp_solver as _lp_solver

    solver = _lp_solver("highs")  # the default: HiGHS, through its backend
    A = sp.csr_matrix(np.array([[1.0, 1.0]]))
    assert solver.load(A, np.array([1.0]), np.array([np.inf]), np.zeros(2), np.ones(2))
    y = solver.minimize(0, 1.0, 5.0)  # min v0 s.t. v0 + v1 >= 1: 0, multiplier 0
    assert y is not None and y.shape == (1,)
    with pytest.raises(ValueError, match="provides no LP solver"):
        _lp_solver("z3")
