"""Intervals of a chain's ReLU inputs re-bounded per subdomain of branch and bound.

Branch and bound (:mod:`smug_opt.robustness.bab`) splits unstable ReLUs; on a subdomain the
neurons above a split see a narrower set of inputs than over the whole box, so their
intervals, and with them the upper chords of the relaxation, can shrink (β-CROWN with
intermediate bound refinement, Wang et al. 2021). :func:`refine` recomputes, per domain of a
batch, the interval of every unstable neuron of the layers above its new split: CROWN's
back-substitution (:meth:`~smug_opt.bounds.relu_chain.ChainBounds.lower`, rigorous, the
split neurons' relaxations fixed, CROWN's lower slopes) over the intervals of the layers
below already re-bounded for the domain, layer by layer. Each result is intersected with the
interval the domain had (its parent's, or the box's), so it is never looser.
"""

from __future__ import annotations

import torch

from smug_opt.bounds.relu_chain import ChainBounds

__all__ = ["refine"]

CHUNK_ENTRIES = 2**21
"""Domains are re-bounded in chunks of at most this many rows times layer width (each
back-substitution holds a few ``(domains, rows, width)`` float64 tensors)."""


def refine(bounds: ChainBounds, splits: list[torch.Tensor], changed: torch.Tensor,
           *, layers: int | None = None) -> ChainBounds:
    """Per-domain intervals for the domains ``splits`` (``(B, n_i)`` in {-1, 0, 1} per ReLU
    layer): ``bounds`` (the box's, or per domain: the intervals each domain starts from)
    with, for each domain ``d``, the unstable neurons of every layer above
    ``changed[d]`` (the lowest layer whose splits are new to the intervals) re-bounded;
    ``layers``: only the lowest that many layers above the lowest change of the batch."""
    with torch.no_grad():
        return _refine(bounds, splits, changed, layers)


def _refine(bounds: ChainBounds, splits: list[torch.Tensor], changed: torch.Tensor,
            layers: int | None) -> ChainBounds:
    root = bounds.root or bounds
    B = splits[0].shape[0]
    lo, hi = [], []
    for i in range(len(splits)):
        low, high = bounds.interval(i)
        lo.append(low.expand(B, -1).clone())
        hi.append(high.expand(B, -1).clone())
    first = int(changed.min()) + 1 if changed.numel() else len(splits)
    last = len(splits) if layers is None else min(len(splits), first + layers)
    for k in range(first, last):
        todo = torch.nonzero(changed < k).flatten()
        current = root.per_domain(lo, hi)
        open_ = ((lo[k] < 0) & (hi[k] > 0) & (splits[k] == 0))[todo].any(dim=0)
        known, slopes = root.slopes.get(k, (torch.arange(open_.numel()), None))
        pick = torch.nonzero(open_[known]).flatten()  # the positions in known of the open neurons
        rows, u = known[pick], pick.numel()
        if u == 0:
            continue
        C = torch.zeros(2 * u, lo[k].shape[-1], dtype=torch.float64)
        C[torch.arange(u), rows] = 1.0
        C[u + torch.arange(u), rows] = -1.0
        warm = None if slopes is None else [a[:, torch.cat([pick, pick + known.numel()])] for a in slopes]
        widest = max(t.shape[-1] for t in [*lo[: k + 1], bounds.x_lo])
        step = max(1, CHUNK_ENTRIES // (2 * u * widest))
        for part in torch.split(todo, step):
            sub = current.select(part)
            alphas = warm or [(sub.hi[j] >= -sub.lo[j]).to(torch.float64) for j in range(k)]
            found, _ = sub.lower(k, C, torch.zeros(2 * u, dtype=torch.float64), alphas,
                                 None, [s[part] for s in splits])
            cols = rows.expand(part.numel(), -1)
            lo[k][part[:, None], cols] = torch.maximum(lo[k][part[:, None], cols], found[:, :u])
            hi[k][part[:, None], cols] = torch.minimum(hi[k][part[:, None], cols], -found[:, u:])
    return root.per_domain(lo, hi)
