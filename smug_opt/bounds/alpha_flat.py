"""α-CROWN on the last layer of a :class:`~smug_opt.network.flat.FlatNetwork` whose layers
form a chain of linear layers, ReLUs and max pooling (the MNIST CNNs): the lower slope of
each unstable ReLU, any value in ``[0, 1]``, is chosen per row by projected gradient ascent
(Adam) on the bound, over a :class:`~smug_opt.bounds.propagation.FlatBounds`' intervals
(kept as they are: only the last layer's back-substitution is optimised).

The steps run a float32 copy of CROWN's back-substitution without error allowance (not
rigorous; :class:`_Plan`), the max pooling relaxed as in
:mod:`~smug_opt.bounds.propagation`; the slopes that gave each row its best estimate are
then evaluated by :meth:`FlatBounds.linear` in float64 with its error allowance, and that
rigorous bound is what :func:`alpha_lower` returns (never below CROWN's: the rows keep
CROWN's where it is the larger).

Measured on the VeriVital max-pool CNN at ε = 0.05 over the boxes an explanation ends on
(benchmarks/robust/README.md): the single-value queries CROWN leaves open are closed with a
margin of ~0.5–0.9.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from smug_opt.bounds.domain import Box
from smug_opt.bounds.propagation import FlatBounds
from smug_opt.bounds.relaxation import maxpool_choice
from smug_opt.network.flat import FlatNetwork
from smug_opt.threads import one_thread

__all__ = ["ALPHA_STEPS", "alpha_lower", "default_steps", "supports"]

ALPHA_STEPS = 20
"""Gradient steps (on VeriVital's all-free boxes 100 steps gain nothing over 20)."""
LR = 0.1


def default_steps(net: FlatNetwork) -> int:
    """:data:`ALPHA_STEPS` on a network with max pooling, else 0: on fully connected nets
    branch and bound (α-CROWN at its root) decides the queries, and α-CROWN in every bound
    round cost ``mnist-10x2`` 3.6 → 5.4 CPU s per image and 7/7 → 4/7 subset-minimal
    (benchmarks/robust/README.md)."""
    return ALPHA_STEPS if any(layer.kind == "maxpool" for layer in net.layers) else 0


def supports(bounds: FlatBounds) -> bool:
    """Whether :func:`alpha_lower` takes ``bounds``' network and domain: a box, and layers
    each reading the one before, linear, ``relu`` or ``maxpool``, with some ReLU."""
    layers = bounds.network.layers[1:]
    return (isinstance(bounds.domain, Box) and any(layer.kind == "relu" for layer in layers)
            and all(layer.inputs == (k,) and layer.kind in ("linear", "relu", "maxpool")
                    for k, layer in enumerate(layers)))


def f32(a: np.ndarray | bool) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a, dtype=np.float32))


def _sparse(matrix: sp.csr_matrix) -> torch.Tensor:
    m = matrix.tocoo().astype(np.float32)
    indices = torch.from_numpy(np.vstack([m.row, m.col]).astype(np.int64))
    values = torch.from_numpy(m.data)
    return torch.sparse_coo_tensor(indices, values, m.shape, check_invariants=False).coalesce()


class _Plan:
    """The back-substitution's steps from the last layer down, in float32."""

    def __init__(self, bounds: FlatBounds) -> None:
        net = bounds.network
        self.steps: list[tuple] = []
        self.relus: list[int] = []  # the ReLU layers, top first
        self.initial: list[torch.Tensor] = []
        for k in range(len(net.layers) - 1, 0, -1):
            layer = net.layers[k]
            lo, hi = bounds.lo[k - 1], bounds.hi[k - 1]
            if layer.kind == "linear":
                matrix, bias = layer.affine
                self.steps.append(("linear", _sparse(matrix.T.tocsr()), f32(bias)))
            elif layer.kind == "relu":
                unstable = (lo < 0) & (hi > 0)
                low, high = np.where(unstable, lo, -1.0), np.where(unstable, hi, 1.0)
                slope = high / (high - low)
                self.steps.append(("relu", torch.from_numpy(lo >= 0), torch.from_numpy(hi <= 0),
                                   f32(np.where(unstable, slope, 0.0)),
                                   f32(np.where(unstable, -slope * low, 0.0))))
                self.relus.append(k)
                self.initial.append(f32(hi >= -lo))  # CROWN's lower slopes
            else:
                choice, dominates, top = maxpool_choice(layer.pool_windows, lo, hi)
                self.steps.append(("maxpool", torch.from_numpy(choice), torch.from_numpy(dominates),
                                   f32(np.where(dominates, 0.0, top)), net.layers[k - 1].size))
        box = bounds.domain
        assert isinstance(box, Box)
        self.x_lo, self.x_hi = f32(box.lo), f32(box.hi)

    def estimate(self, C: torch.Tensor, alphas: list[torch.Tensor]) -> torch.Tensor:
        """Per row of ``C``, the (float32, not rigorous) lower bound with slopes ``alphas``."""
        lam, const = C, torch.zeros(C.shape[0])
        relu = iter(alphas)
        for step in self.steps:
            if step[0] == "linear":
                const = const + lam @ step[2]
                lam = (step[1] @ lam.T).T
                continue
            pos, neg = lam.clamp(min=0.0), lam.clamp(max=0.0)
            if step[0] == "relu":
                active, inactive, slope, intercept = step[1:]
                alpha = next(relu).clamp(0.0, 1.0)
                a_lo = torch.where(active, 1.0, torch.where(inactive, 0.0, alpha))
                a_hi = torch.where(active, 1.0, torch.where(inactive, 0.0, slope))
                const = const + (neg * intercept).sum(-1)
                lam = pos * a_lo + neg * a_hi
            else:
                choice, dominates, ceiling, n_src = step[1:]
                const = const + (torch.where(dominates, 0.0, neg) * ceiling).sum(-1)
                on_input = pos + torch.where(dominates, neg, 0.0)
                lam = torch.zeros(lam.shape[0], n_src).index_add(1, choice, on_input)
        return const + lam.clamp(min=0.0) @ self.x_lo + lam.clamp(max=0.0) @ self.x_hi


def alpha_lower(bounds: FlatBounds, rows: np.ndarray, offset: np.ndarray, *, steps: int = ALPHA_STEPS,
                stop_above: np.ndarray | None = None) -> np.ndarray:
    """Rigorous lower bounds of ``rows @ y_last + offset`` over ``bounds``' domain, α-CROWN's
    where they beat CROWN's (see the module docstring; ``supports(bounds)`` must hold). The
    ascent stops once every row passes ``stop_above`` (per row)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    crown, _ = bounds.linear(rows, offset)
    with one_thread(), torch.no_grad():
        plan = _Plan(bounds)
        C, shift = torch.from_numpy(rows.astype(np.float32)), torch.from_numpy(offset.astype(np.float32))
        params = [a.expand(rows.shape[0], -1).clone() for a in plan.initial]
        best = [p.clone() for p in params]
        best_value = plan.estimate(C, params) + shift
        moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
        target = None if stop_above is None else torch.from_numpy(np.asarray(stop_above, dtype=np.float32))
        for t in range(1, steps + 1):
            if target is not None and bool((best_value > target).all()):
                break
            with torch.enable_grad():
                for p in params:
                    p.requires_grad_(True)
                value = plan.estimate(C, params) + shift
                grads = torch.autograd.grad(value.sum(), params)
            _keep_best(best, best_value, params, value.detach())
            params = [_adam(p.detach(), g, m, t) for p, g, m in zip(params, grads, moments, strict=True)]
        _keep_best(best, best_value, params, plan.estimate(C, params) + shift)
    slopes = {k: np.vstack([a.numpy().astype(np.float64)] * 2) for k, a in zip(plan.relus, best, strict=True)}
    optimised, _ = bounds.linear(rows, offset, slopes=slopes)
    return np.maximum(crown, optimised)


def _keep_best(best: list[torch.Tensor], best_value: torch.Tensor, params: list[torch.Tensor],
               value: torch.Tensor) -> None:
    better = value > best_value
    best_value[better] = value[better]
    for kept, p in zip(best, params, strict=True):
        kept[better] = p[better]


def _adam(p: torch.Tensor, g: torch.Tensor, moments: tuple[torch.Tensor, torch.Tensor], t: int,
          b1: float = 0.9, b2: float = 0.999) -> torch.Tensor:
    """One projected Adam ascent step on ``p`` (moments updated in place), clamped to [0, 1]."""
    m, v = moments
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    return (p + LR * (1 - b2**t) ** 0.5 / (1 - b1**t) * m / (v.sqrt() + 1e-8)).clamp(0.0, 1.0)
