"""α-CROWN (and β-CROWN) optimisation over a :class:`~smug_opt.bounds.relu_chain.ChainBounds`:
projected gradient ascent (Adam) on the bound, over the lower slopes α in ``[0, 1]`` and
the split multipliers β ``>= 0``. The steps use the bound's float32 computation (without
its error allowance: :meth:`ChainBounds.estimate`); the parameters that gave each domain
and row its best value are then
evaluated rigorously by :meth:`ChainBounds.lower`, and that is the bound returned: valid
whatever the optimiser did. Domains whose bound passes ``stop_above`` leave the batch.

:func:`tighten` runs it on the intervals of every ReLU layer's input, layer by layer (each
later layer's relaxation then uses the tighter intervals): the intermediate bounds of
α-CROWN.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from smug_opt.bounds.relu_chain import ChainBounds
from smug_opt.deadline import Deadline
from smug_opt.threads import one_thread

__all__ = ["Optimised", "optimise", "tighten"]

LR_ALPHA = 0.1
LR_BETA = 0.05


@dataclass(frozen=True, eq=False)
class Optimised:
    """The best rigorous bound per domain and row, the α and β that gave it, and the
    back-substitution's coefficients on each ReLU output for them."""

    bound: torch.Tensor
    alphas: list[torch.Tensor]
    betas: list[torch.Tensor] | None
    coefficients: list[torch.Tensor]


def optimise(bounds: ChainBounds, top: int, C: torch.Tensor, rhs: torch.Tensor, *, steps: int,
             alphas: list[torch.Tensor], betas: list[torch.Tensor] | None = None,
             splits: list[torch.Tensor] | None = None, stop_above: torch.Tensor | None = None,
             deadline: Deadline | None = None) -> Optimised:
    """Maximise the lower bound of ``C·z_top − rhs`` (see :meth:`ChainBounds.lower`) from
    the given α (and β, with ``splits``) for up to ``steps`` gradient steps; stops early once
    every domain has a row above ``stop_above`` (per row, e.g. 0 for a refutation)."""
    with one_thread():
        return _optimise(bounds, top, C, rhs, steps, alphas, betas, splits, stop_above, deadline)


def _optimise(bounds: ChainBounds, top: int, C: torch.Tensor, rhs: torch.Tensor, steps: int,
              alphas: list[torch.Tensor], betas: list[torch.Tensor] | None,
              splits: list[torch.Tensor] | None, stop_above: torch.Tensor | None,
              deadline: Deadline | None) -> Optimised:
    n_alpha = len(alphas)
    params = [a.detach().to(torch.float32).clone() for a in alphas + (betas or [])]
    opt = _Adam(params, [LR_ALPHA] * n_alpha + [LR_BETA] * (len(params) - n_alpha))
    best_params = [p.clone() for p in params]
    best = torch.full((params[0].shape[0], C.shape[-2]), -torch.inf, dtype=torch.float32)
    index = torch.arange(best.shape[0])  # the domains still optimised (the others are closed)
    part_splits, part_C, part_bounds = splits, C, bounds
    for step in range(steps + 1):
        last = step == steps or (deadline is not None and deadline.passed())
        current = opt.params
        with torch.set_grad_enabled(not last):
            bound = part_bounds.estimate(top, part_C, rhs, current[:n_alpha],
                                    None if betas is None else current[n_alpha:], part_splits)
        value = bound.detach()
        improved = value > best[index]
        best[index] = torch.where(improved, value, best[index])
        for kept, p in zip(best_params, current, strict=True):
            kept[index] = torch.where(improved.unsqueeze(-1), p.detach(), kept[index])
        if last:
            break
        open_ = torch.ones(index.numel(), dtype=torch.bool)
        if stop_above is not None:
            open_ = ~torch.any(best[index] > stop_above, dim=-1)
            if not bool(open_.any()):
                break
        finite = torch.where(torch.isfinite(bound), bound, torch.zeros_like(bound))
        opt.ascend(finite.sum(), clamp=[(0.0, 1.0)] * n_alpha + [(0.0, None)] * (len(params) - n_alpha))
        if float(open_.to(torch.float64).mean()) < 0.75:  # drop the closed domains
            keep = torch.nonzero(open_).flatten()
            index = index[keep]
            opt.narrow(keep)
            part_splits = None if splits is None else [t[index] for t in splits]
            part_C = C if C.dim() == 2 else C[index]
            part_bounds = bounds.select(index)
    best_params = [p.to(torch.float64) for p in best_params]  # in [0, 1] and >= 0: valid as they are
    best_alphas, best_betas = best_params[:n_alpha], (None if betas is None else best_params[n_alpha:])
    with torch.no_grad():
        bound, coefficients = bounds.lower(top, C, rhs, best_alphas, best_betas, splits)
    return Optimised(bound, best_alphas, best_betas, coefficients)


class _Adam:
    """Adam (Kingma and Ba, 2015) ascending an objective, projected onto boxes after each
    step (torch.optim's first step imports the compiler stack: seconds per process);
    :meth:`narrow` keeps some domains (rows of the first dimension) only."""

    def __init__(self, params: list[torch.Tensor], lrs: list[float]) -> None:
        self.params = [p.requires_grad_(True) for p in params]
        self.lrs = lrs
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
        self.t = 0

    def narrow(self, keep: torch.Tensor) -> None:
        self.params = [p.detach()[keep].requires_grad_(True) for p in self.params]
        self.moments = [(m[keep], v[keep]) for m, v in self.moments]

    def ascend(self, objective: torch.Tensor, clamp: list[tuple[float, float | None]],
               b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        grads = torch.autograd.grad(objective, self.params, allow_unused=True)
        self.t += 1
        with torch.no_grad():
            for p, g, lr, (m, v), (low, high) in zip(self.params, grads, self.lrs, self.moments, clamp,
                                                      strict=True):
                if g is None:
                    continue
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                step = lr * (1 - b2**self.t) ** 0.5 / (1 - b1**self.t)
                p.add_(step * m / (v.sqrt() + eps))
                p.clamp_(low, high)


SLOPES_KEPT = 2**20
"""A layer's optimised slopes are kept (:attr:`ChainBounds.slopes`) only up to this many
(8 MiB; ``mnistfc`` 256x6's last layer: 655,360); larger layers are re-bounded per domain
with CROWN's slopes."""
TIGHTEN_ENTRIES = 2**22
"""A layer is tightened only while its rows times the widest layer below stay under this
many coefficients (a CNN's layers keep their CROWN intervals: 2 rows per unstable neuron
over 23,328-wide layers would take gigabytes)."""


def tighten(bounds: ChainBounds, *, steps: int = 20, deadline: Deadline | None = None) -> ChainBounds:
    """Tighter rigorous intervals of every ReLU layer's input (after the first, whose
    interval over the box is exact up to rounding): α-CROWN on its unstable neurons (see
    :data:`TIGHTEN_ENTRIES`); each layer's slopes are kept as :attr:`ChainBounds.slopes`
    (see :data:`SLOPES_KEPT`)."""
    lo, hi = list(bounds.lo), list(bounds.hi)
    current = bounds
    slopes: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}
    widest = bounds.x_lo.numel()
    for i in range(1, len(lo)):
        widest = max(widest, lo[i - 1].numel())
        if deadline is not None and deadline.passed():
            break
        rows = torch.nonzero(current.unstable(i)).flatten()
        k = rows.numel()
        if k == 0 or 2 * k * widest > TIGHTEN_ENTRIES:
            continue
        C = torch.zeros(2 * k, lo[i].numel(), dtype=torch.float64)
        C[torch.arange(k), rows] = 1.0
        C[k + torch.arange(k), rows] = -1.0
        alphas = [current.initial_alpha(j, 1, 2 * k) for j in range(i)]
        optimised = optimise(current, i, C, torch.zeros(2 * k, dtype=torch.float64), steps=steps,
                             alphas=alphas, deadline=deadline)
        found = optimised.bound[0]
        if sum(a.numel() for a in optimised.alphas) <= SLOPES_KEPT:
            slopes[i] = (rows, [a.detach() for a in optimised.alphas])
        lo[i] = lo[i].clone()
        hi[i] = hi[i].clone()
        lo[i][rows] = torch.maximum(lo[i][rows], found[:k])
        hi[i][rows] = torch.minimum(hi[i][rows], -found[k:])
        current = ChainBounds(bounds.chain, bounds.x_lo, bounds.x_hi, tuple(lo), tuple(hi), slopes=slopes)
    return current
