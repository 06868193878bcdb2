"""Branch and bound started from an earlier proof's leaves (smug_opt.robustness.bab.Leaves):
the kept leaves cover the new box, and the answers over a chain of growing and moving boxes
match the exact minimum (every activation pattern's LP) as from the root."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flat_nets import chain_of, covered, exact_minimum, mlp

from smug_opt.deadline import Deadline
from smug_opt.robustness.bab import branch_and_bound


@pytest.mark.parametrize("seed", range(4))
def test_leaves_reused_over_other_boxes_give_the_exact_answer(seed):
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 4, 3, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    boxes = [(x0 - r, x0 + r) for r in (0.3, 0.5, 0.8)]
    boxes.append((x0 - 0.3 + 0.1, x0 + 0.3 + 0.1))  # moved, not nested
    reused = 0
    for j in (j for j in range(3) if j != label):
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0
        leaves = None
        for lo, hi in boxes:
            cb = chain_of(net, lo, hi)
            if leaves is not None:
                kept = leaves.for_box(cb)
                points = lo + (hi - lo) * rng.random((2000, 2))
                assert covered(net, kept, points).all(), (seed, j)
            exact = exact_minimum(net, lo, hi, c)
            if abs(exact) < 1e-6:
                continue
            args = (cb, c[None], np.zeros(1), np.zeros(1, dtype=bool), Deadline.after(30))
            warm = branch_and_bound(*args, batch=4, root_steps=0, start=leaves)
            cold = branch_and_bound(*args, batch=4, root_steps=0)
            expected = "unsat" if exact > 0 else "candidate"
            assert warm.status == cold.status == expected, (seed, j, exact, warm, cold)
            if expected == "candidate":
                assert c @ net.forward(warm.x[None])[-1][0] <= 0
                assert np.all((lo <= warm.x) & (warm.x <= hi))
            else:
                assert warm.leaves is not None and warm.leaves.count >= 1
                reused += leaves is not None
                leaves = warm.leaves
    assert reused >= 1 or seed >= 3  # the first seeds exercise a warm start


def _random_tree(rng: np.random.Generator, widths: list[int], splits: int):
    """The leaves of a random complete split tree (``splits`` splits), as a Leaves."""
    from smug_opt.robustness.bab import Leaves

    leaves = [[np.zeros(n, dtype=np.int8) for n in widths]]
    for _ in range(splits):
        leaf = leaves.pop(int(rng.integers(len(leaves))))
        free = [(i, k) for i, s in enumerate(leaf) for k in np.flatnonzero(s == 0)]
        i, k = free[int(rng.integers(len(free)))]
        for sign in (1, -1):
            child = [s.copy() for s in leaf]
            child[i][k] = sign
            leaves.append(child)
    splits_t = [torch.from_numpy(np.array([leaf[i] for leaf in leaves])) for i in range(len(widths))]
    shape = lambda n: torch.zeros(len(leaves), 1, n)  # noqa: E731
    return Leaves(splits_t, [shape(n) for n in widths], [shape(n) for n in widths])


@pytest.mark.parametrize("seed", range(6))
def test_kept_leaves_of_any_complete_tree_cover_a_smaller_box(seed):
    """Leaves dropped for a box that makes split neurons stable leave no point uncovered,
    and some are dropped."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 6, 6, 3])
    tree = _random_tree(rng, [6, 6], 14)
    x0 = rng.uniform(-1, 1, 2)
    lo, hi = x0 - 0.1, x0 + 0.1
    kept = tree.for_box(chain_of(net, lo, hi))
    assert kept.count < tree.count
    assert covered(net, kept, lo + (hi - lo) * rng.random((5000, 2))).all()


class _AfterChecks(Deadline):
    """A deadline that passes at its ``n``-th check (a search cut after a fixed amount of work)."""

    def __init__(self, n: int) -> None:
        super().__init__(None)
        object.__setattr__(self, "checks", [n])

    def passed(self, margin: float = 0.0) -> bool:
        self.checks[0] -= 1
        return self.checks[0] < 0


@pytest.mark.parametrize("seed, radius", [(0, 1.0), pytest.param(1, 0.6, marks=pytest.mark.slow),
                                          pytest.param(1, 1.0, marks=pytest.mark.slow)])
def test_a_search_cut_short_leaves_a_cover_that_finishes_the_proof(seed, radius):
    """Cut by the time limit, the closed and open leaves cover the box, and a search started
    from them, or from the open ones alone (a continuation), answers as the exact minimum says."""
    rng = np.random.default_rng(seed)
    net = mlp(rng, [2, 6, 6, 3])
    x0 = rng.uniform(-1, 1, 2)
    label = int(net.forward(x0[None])[-1][0].argmax())
    lo, hi = x0 - radius, x0 + radius
    cb = chain_of(net, lo, hi)
    cut = 0
    for j in (j for j in range(3) if j != label):
        c = np.zeros(3)
        c[label], c[j] = 1.0, -1.0
        args = (cb, c[None], np.zeros(1), np.zeros(1, dtype=bool))
        first = branch_and_bound(*args, _AfterChecks(8), batch=1, root_steps=0)
        if first.status != "unknown" or first.leaves is None:
            continue
        cut += 1
        assert covered(net, first.leaves, lo + (hi - lo) * rng.random((5000, 2))).all()
        exact = exact_minimum(net, lo, hi, c)
        if abs(exact) < 1e-6:
            continue
        second = branch_and_bound(*args, Deadline.after(60), batch=1, root_steps=0, start=first.leaves)
        assert second.status == ("unsat" if exact > 0 else "candidate"), (seed, j, exact, second)
        rest = branch_and_bound(*args, Deadline.after(60), batch=1, root_steps=0, start=first.open_leaves)
        assert rest.status == second.status, (seed, j, exact, rest)  # the closed ones hold no point
        refined = branch_and_bound(*args, Deadline.after(60), batch=1, root_steps=0, start=first.open_leaves,
                                   refine_layers=None)  # the start's intervals re-bounded under its splits
        assert refined.status == second.status, (seed, j, exact, refined)
    assert cut >= 1
