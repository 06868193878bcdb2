"""The masked-MLP bounds of the whole-network encoder in every mode: valid for every mask
that keeps the label (brute force), and each tighter mode inside the looser ones."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from smug_opt.encode.bounds import MODES, network_bounds


def _instance(seed: int):
    rng = np.random.default_rng(seed)
    sizes = [12, 8, 8, 3]
    layers = [(rng.normal(size=(a, b)), rng.normal(scale=0.5, size=b)) for a, b in itertools.pairwise(sizes)]
    x = rng.uniform(0.1, 1.0, size=12)
    A1 = x[:, None] * layers[0][0]  # one cell per input
    masks = ((np.arange(2**12)[:, None] >> np.arange(12)) & 1).astype(np.float64)
    pre, value = [], masks @ A1 + layers[0][1]
    pre.append(value)
    for W, b in layers[1:-1]:
        value = np.maximum(value, 0.0) @ W + b
        pre.append(value)
    logits = np.maximum(value, 0.0) @ layers[-1][0] + layers[-1][1]
    label = int(np.argmax(logits[-1]))  # the full mask's class
    W, b = layers[-1]
    others = np.delete(np.arange(3), label)
    out_rows, out_rhs = W[:, label][None, :] - W[:, others].T, -(b[label] - b[others])
    keeps = (np.maximum(value, 0.0) @ out_rows.T - out_rhs).min(axis=1) > 1e-9
    return A1, layers[0][1], layers[1:-1], out_rows, out_rhs, masks, pre, keeps


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_ones", [None, 5])
def test_every_mode_holds_for_every_mask_that_keeps_the_label(seed, max_ones):
    A1, b1, hidden, out_rows, out_rhs, masks, pre, keeps = _instance(seed)
    allowed = keeps & (masks.sum(axis=1) <= (12 if max_ones is None else max_ones))
    found = {}
    for mode in MODES:
        nb = network_bounds(A1, b1, hidden, out_rows, out_rhs, mode, max_ones=max_ones)
        for k, z in enumerate(pre):
            assert np.all(z[allowed] >= nb.lo[k]) and np.all(z[allowed] <= nb.hi[k]), (mode, k)
            assert np.all(z >= nb.global_lo[k]) and np.all(z <= nb.global_hi[k]), (mode, k)
        found[mode] = nb
    for tight, loose in (("crown", "interval"), ("crown+lp", "crown")):
        for k in range(len(pre)):  # (enumeration's rounding allowance differs from propagation's)
            room = 1e-12 * (1.0 + np.abs(found[loose].lo[k]) + np.abs(found[loose].hi[k]))
            assert np.all(found[tight].lo[k] >= found[loose].lo[k] - room), (tight, loose, k)
            assert np.all(found[tight].hi[k] <= found[loose].hi[k] + room), (tight, loose, k)


def test_lp_tightening_keeps_to_its_budget():
    A1, b1, hidden, out_rows, out_rhs, *_ = _instance(0)
    none = network_bounds(A1, b1, hidden, out_rows, out_rhs, "crown+lp", lp_budget=0.0)
    assert none.lps == 0
    some = network_bounds(A1, b1, hidden, out_rows, out_rhs, "crown+lp")
    assert some.lps > 0


def test_unknown_mode_is_named():
    A1, b1, hidden, out_rows, out_rhs, *_ = _instance(0)
    with pytest.raises(ValueError, match="crown, crown\\+lp, interval, lp"):
        network_bounds(A1, b1, hidden, out_rows, out_rhs, "alpha")
