"""A cheap search for counterexamples before any solver: projected sign-gradient descent
(PGD) on the float64 forward pass of a :class:`~smug_opt.network.flat.FlatNetwork`, from
the box's centre, its corners towards the gradient and random points, in model input units.

The loss of an input is how far its outputs are from the unsafe region:
``min over disjuncts of max over rows (c·y − d)``, at most 0 inside (a non-strict row met
with equality is inside: a tie at 0 behind a ReLU on the logits is a counterexample; a
strict row met with equality counts as just outside). A point the attack
returns is only a candidate: :mod:`smug_opt.robustness.decide` confirms it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from smug_opt.deadline import Deadline
from smug_opt.network.flat import FlatLayer, FlatNetwork, Preprocess
from smug_opt.vnnlib import Conjunct

__all__ = ["AttackResult", "attack", "flat_gradient", "unsafe_loss"]


@dataclass(frozen=True)
class AttackResult:
    """The best input found (model input units, flat), its loss (<= 0: in the unsafe region
    by float64) and the forward passes spent."""

    x: np.ndarray
    loss: float
    forwards: int


def flat_gradient(net: FlatNetwork, values: list[np.ndarray], grad_out: np.ndarray) -> np.ndarray:
    """The gradient with respect to the affine input of ``Σ grad_out ⊙ scores``, for the
    batch whose layer outputs :meth:`FlatNetwork.forward` gave as ``values`` (subgradients
    at kinks: 0 for ReLU at 0, the first maximum for max pooling)."""
    grads: list[np.ndarray | None] = [None] * len(net.layers)
    grads[-1] = np.asarray(grad_out, dtype=np.float64)
    for index in range(len(net.layers) - 1, 0, -1):
        g = grads[index]
        if g is None:
            continue
        layer = net.layers[index]
        src = layer.inputs[0]
        v = values[src]
        if layer.kind == "linear":
            back = np.asarray(layer.affine[0].T @ g.T).T
        elif layer.kind == "relu":
            back = g * (v > 0)
        elif layer.kind == "leaky_relu":
            back = g * np.where(v >= 0, 1.0, layer.alpha)
        elif layer.kind == "clip":
            back = g * ((v > layer.lo) & (v < layer.hi))
        elif layer.kind == "maxpool":
            windows = layer.pool_windows
            padded = np.concatenate([v, np.full((v.shape[0], 1), -np.inf)], axis=1)
            winner = np.take_along_axis(windows[None, :, :].repeat(v.shape[0], 0),
                                        padded[:, windows].argmax(axis=2)[:, :, None], 2)[:, :, 0]
            back = np.zeros_like(v)
            rows = np.repeat(np.arange(v.shape[0]), winner.shape[1])
            np.add.at(back, (rows, winner.ravel()), g.ravel())
        elif layer.kind == "add":
            other = layer.inputs[1]
            grads[other] = g if grads[other] is None else grads[other] + g
            back = g
        else:
            raise ValueError(f"no gradient rule for flat layer kind {layer.kind!r}")
        grads[src] = back if grads[src] is None else grads[src] + back
    return grads[0] if grads[0] is not None else np.zeros_like(values[0])


def unsafe_loss(scores: np.ndarray, disjuncts: tuple[Conjunct, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per input, the loss (see the module docstring) and its gradient with respect to the
    scores (the active row of the closest disjunct; strict rows count a 0 as outside)."""
    batch = scores.shape[0]
    best = np.full(batch, np.inf)
    grad = np.zeros_like(scores)
    for d in disjuncts:
        excess = scores @ d.matrix.T - d.rhs
        excess = np.where(d.strict & (excess == 0), np.finfo(float).tiny, excess)
        worst = excess.argmax(axis=1)
        value = excess[np.arange(batch), worst]
        better = value < best
        best = np.where(better, value, best)
        grad[better] = d.matrix[worst[better]]
    return best, grad


DENSE_ABOVE = 0.05
"""Linear layers with more nonzeros than this fraction run dense in the attack (BLAS)."""


def _dense_if_it_pays(layer: FlatLayer) -> FlatLayer:
    if layer.kind != "linear":
        return layer
    matrix = layer.affine[0]
    if matrix.nnz <= DENSE_ABOVE * np.prod(matrix.shape):
        return layer
    return replace(layer, matrix=matrix.toarray())


def _dense_where_it_pays(net: FlatNetwork) -> FlatNetwork:
    return replace(net, layers=tuple(_dense_if_it_pays(layer) for layer in net.layers))


def attack(net: FlatNetwork, preprocess: Preprocess, lo: np.ndarray, hi: np.ndarray,
           disjuncts: tuple[Conjunct, ...], *, steps: int = 200, restarts: int = 16,
           seed: int = 0, start: np.ndarray | None = None, until: float = 0.0,
           deadline: Deadline | None = None) -> AttackResult:
    """PGD over the box ``[lo, hi]`` (model input units, flat) for ``steps`` steps with a
    step size decaying from a quarter of the box's width; stops early once a point's loss
    is at most ``until`` (0: inside the unsafe region; -inf: never, to go deep inside) or
    ``deadline`` has passed (the starting points are always evaluated).
    ``start`` adds a starting point."""
    rng = np.random.default_rng(seed)
    net = _dense_where_it_pays(net)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    width = hi - lo
    points = [0.5 * (lo + hi)]
    if start is not None:
        points.append(np.clip(np.asarray(start, dtype=np.float64).reshape(-1), lo, hi))
    points += list(lo + width * rng.random((max(restarts - len(points), 0), lo.size)))
    x = np.array(points)
    best_x, best_loss, forwards = x[0].copy(), np.inf, 0
    for step in range(steps + 1):
        values = net.forward(preprocess(x))
        forwards += x.shape[0]
        loss, g_scores = unsafe_loss(values[-1], disjuncts)
        i = int(loss.argmin())
        if loss[i] < best_loss:
            best_x, best_loss = x[i].copy(), float(loss[i])
        if best_loss <= until or step == steps or (deadline is not None and deadline.passed()):
            break
        g_affine = flat_gradient(net, values, g_scores)
        g_model = preprocess.backward(g_affine, x.shape[1])
        size = 0.25 * width * (1.0 - step / steps) + 1e-3 * width
        x = np.clip(x - size * np.sign(g_model), lo, hi)
        if step == 0:  # the corner the first gradient points to, as one more restart
            x[-1] = np.where(g_model[0] > 0, lo, hi)
    return AttackResult(best_x, best_loss, forwards)
