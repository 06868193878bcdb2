"""α-CROWN (and β-CROWN) optimisation over a :class:`~smug_opt.bounds.relu_chain.ChainBounds`:
projected gradient ascent (Adam) on the rigorous bound itself, over the lower slopes α in
``[0, 1]`` and the split multipliers β ``>= 0``. Every bound returned was computed with
clamped parameters by :meth:`ChainBounds.lower`, so it is rigorous whatever the optimiser
did; the best one found per domain and row is kept with its parameters.

:func:`tighten` runs it on the intervals of every ReLU layer's input, layer by layer (each
later layer's relaxation then uses the tighter intervals): the intermediate bounds of
α-CROWN.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from smug_opt.bounds.relu_chain import ChainBounds, one_thread
from smug_opt.deadline import Deadline

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
    alphas = [a.detach().to(torch.float64).clone().requires_grad_(True) for a in alphas]
    opt = _Adam(alphas, LR_ALPHA)
    if betas is not None:
        betas = [b.detach().to(torch.float64).clone().requires_grad_(True) for b in betas]
        opt.add(betas, LR_BETA)
    best = None
    best_alphas = [a.detach().clone() for a in alphas]
    best_betas = None if betas is None else [b.detach().clone() for b in betas]
    for step in range(steps + 1):
        last = step == steps or (deadline is not None and deadline.passed())
        with torch.set_grad_enabled(not last):
            bound, _ = bounds.lower(top, C, rhs, alphas, betas, splits)
        value = bound.detach()
        if best is None:
            best = value.clone()
            improved = torch.ones_like(value, dtype=torch.bool)
        else:
            improved = value > best
            best = torch.where(improved, value, best)
        _keep(best_alphas, alphas, improved)
        if betas is not None and best_betas is not None:
            _keep(best_betas, betas, improved)
        done = stop_above is not None and bool(torch.all(torch.any(best > stop_above, dim=-1)))
        if last or done:
            break
        finite = torch.where(torch.isfinite(bound), bound, torch.zeros_like(bound))
        opt.ascend(finite.sum())
        with torch.no_grad():
            for a in alphas:
                a.clamp_(0.0, 1.0)
            for b in betas or []:
                b.clamp_(min=0.0)
    with torch.no_grad():
        bound, coefficients = bounds.lower(top, C, rhs, best_alphas, best_betas, splits)
    return Optimised(bound, best_alphas, best_betas, coefficients)


class _Adam:
    """Adam (Kingma and Ba, 2015) ascending an objective, in place on its tensors (torch.optim's
    first step imports the compiler stack: seconds per process)."""

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.groups: list[tuple[list[torch.Tensor], float]] = []
        self.moments: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.t = 0
        self.add(params, lr)

    def add(self, params: list[torch.Tensor], lr: float) -> None:
        self.groups.append((params, lr))
        self.moments += [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]

    def ascend(self, objective: torch.Tensor, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        params = [p for group, _ in self.groups for p in group]
        lrs = [lr for group, lr in self.groups for _ in group]
        grads = torch.autograd.grad(objective, params, allow_unused=True)
        self.t += 1
        with torch.no_grad():
            for p, g, lr, (m, v) in zip(params, grads, lrs, self.moments, strict=True):
                if g is None:
                    continue
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                step = lr * (1 - b2**self.t) ** 0.5 / (1 - b1**self.t)
                p.add_(step * m / (v.sqrt() + eps))


def _keep(best: list[torch.Tensor], current: list[torch.Tensor], improved: torch.Tensor) -> None:
    """Copy the parameters of the (domain, row) pairs that improved."""
    mask = improved.unsqueeze(-1)
    for b, c in zip(best, current, strict=True):
        b.copy_(torch.where(mask, c.detach(), b))


def tighten(bounds: ChainBounds, *, steps: int = 20, deadline: Deadline | None = None) -> ChainBounds:
    """Tighter rigorous intervals of every ReLU layer's input (after the first, whose
    interval over the box is exact up to rounding): α-CROWN on its unstable neurons."""
    lo, hi = list(bounds.lo), list(bounds.hi)
    current = bounds
    for i in range(1, len(lo)):
        if deadline is not None and deadline.passed():
            break
        rows = torch.nonzero(current.unstable(i)).flatten()
        k = rows.numel()
        if k == 0:
            continue
        C = torch.zeros(2 * k, lo[i].numel(), dtype=torch.float64)
        C[torch.arange(k), rows] = 1.0
        C[k + torch.arange(k), rows] = -1.0
        alphas = [current.initial_alpha(j, 1, 2 * k) for j in range(i)]
        found = optimise(current, i, C, torch.zeros(2 * k, dtype=torch.float64), steps=steps,
                         alphas=alphas, deadline=deadline).bound[0]
        lo[i] = lo[i].clone()
        hi[i] = hi[i].clone()
        lo[i][rows] = torch.maximum(lo[i][rows], found[:k])
        hi[i][rows] = torch.minimum(hi[i][rows], -found[k:])
        current = ChainBounds(bounds.chain, bounds.x_lo, bounds.x_hi, tuple(lo), tuple(hi))
    return current
