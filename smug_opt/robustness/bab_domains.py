"""The open domains of :mod:`~smug_opt.robustness.bab` and how each is split: a batch of
domains (split states per ReLU layer, warm-start α and β, the chosen neuron), the
last-in-first-out stack of them, and filtered smart branching choosing the neuron."""

from __future__ import annotations

import torch

from smug_opt.bounds.relu_chain import ChainBounds

__all__ = ["CANDIDATES", "Domains", "Stack"]

CANDIDATES = 4
"""Neurons per domain whose children are bounded before the split is chosen (FSB)."""


class Domains:
    """A batch of domains with their warm-start α, β, the neuron each will split on, and
    (with per-domain intervals, :mod:`~smug_opt.bounds.refine`) each one's ReLU input
    intervals ``(B, n_i)`` per layer, else None."""

    def __init__(self, splits, alphas, betas, choice, intervals=None) -> None:
        self.splits, self.alphas, self.betas, self.choice = splits, alphas, betas, choice
        self.intervals: tuple[list[torch.Tensor], list[torch.Tensor]] | None = intervals

    def subset(self, keep: torch.Tensor | slice) -> Domains:
        """The domains ``keep`` selects (a mask or a slice)."""
        intervals = self.intervals
        if intervals is not None:
            intervals = ([t[keep] for t in intervals[0]], [t[keep] for t in intervals[1]])
        return Domains([s[keep] for s in self.splits], [a[keep] for a in self.alphas],
                        [b[keep] for b in self.betas], (self.choice[0][keep], self.choice[1][keep]),
                        intervals)

    def children(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """Two children per domain (the chosen neuron active, inactive); every domain has
        a neuron left to split."""
        layer, index = self.choice
        n = layer.numel()
        sign = torch.cat([torch.ones(n, dtype=torch.int8), -torch.ones(n, dtype=torch.int8)])
        splits = _with_splits(self.splits, torch.arange(n).repeat(2), layer.repeat(2), index.repeat(2), sign)
        alphas = [torch.cat([a, a]).to(torch.float64) for a in self.alphas]
        betas = [torch.cat([b, b]).to(torch.float64) for b in self.betas]
        return splits, alphas, betas

    def child_intervals(self) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
        """The parents' intervals for :meth:`children` (valid on each child), or None."""
        if self.intervals is None:
            return None
        lo, hi = self.intervals
        return [torch.cat([t, t]) for t in lo], [torch.cat([t, t]) for t in hi]


class Stack:
    """Open domains, last in first out, with each one's branching choice."""

    def __init__(self, bounds: ChainBounds, C: torch.Tensor, d: torch.Tensor,
                 shallow_first: bool = False) -> None:
        self.bounds, self.C, self.d, self.shallow_first = bounds, C, d, shallow_first
        self.items: list[Domains] = []
        self.counts: list[int] = []

    @property
    def size(self) -> int:
        return sum(self.counts)

    def push(self, splits, alphas, betas, bound, coefficients, bounds: ChainBounds | None = None) -> None:
        """Open domains (``bounds``: their per-domain intervals, if any; else the box's)."""
        bounds = bounds or self.bounds
        alphas = [a.to(torch.float32) for a in alphas]
        betas = [b.to(torch.float32) for b in betas]
        choice = _choose_splits(bounds, splits, alphas, betas, bound, coefficients, self.C, self.d,
                               CANDIDATES, self.shallow_first)
        intervals = None
        if bounds.batched:
            sides = [bounds.interval(i) for i in range(len(splits))]
            intervals = ([lo for lo, _ in sides], [hi for _, hi in sides])
        self.items.append(Domains(splits, alphas, betas, choice, intervals))
        self.counts.append(splits[0].shape[0])

    def domains(self) -> list[tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]]:
        """The open domains' splits, α and β, per pushed batch."""
        return [(item.splits, item.alphas, item.betas) for item in self.items]

    def pop(self, batch: int) -> Domains:
        top = self.items[-1]
        n = self.counts[-1]
        if n <= batch:
            self.items.pop()
            self.counts.pop()
            return top
        cut = n - batch
        head, tail = top.subset(slice(None, cut)), top.subset(slice(cut, None))
        self.items[-1], self.counts[-1] = head, cut
        return tail


def _with_splits(splits: list[torch.Tensor], parents: torch.Tensor, layer: torch.Tensor,
                 neuron: torch.Tensor, sign: torch.Tensor) -> list[torch.Tensor]:
    """Per ReLU layer, the split states of new domains: domain ``j`` copies domain
    ``parents[j]`` with neuron ``neuron[j]`` of layer ``layer[j]`` fixed to ``sign[j]``
    (1 active, -1 inactive)."""
    out = []
    for i, s in enumerate(splits):
        t = s[parents]  # advanced indexing: a copy
        here = torch.nonzero(layer == i).flatten()
        t[here, neuron[here]] = sign[here]
        out.append(t)
    return out


def _scores(bounds: ChainBounds, splits, alphas, bound, coefficients,
            shallow_first: bool = False) -> list[torch.Tensor]:
    """Per ReLU layer, each neuron's BaBSR-like score per domain (see the module docstring)
    on the row with the best bound; -1 where the neuron is stable or already split, and with
    ``shallow_first`` in every layer above the domain's first one with a neuron left."""
    row = bound.argmax(dim=-1)
    picks = torch.arange(bound.shape[0])
    seen = torch.zeros(bound.shape[0], dtype=torch.bool)  # a layer below has a free neuron
    scores = []
    for i, lam_all in enumerate(coefficients):
        lam = lam_all[picks, row]
        lo, hi = bounds.interval(i)
        free = bounds.unstable(i) & (splits[i] == 0)
        intercept = torch.where(free, -lo * hi / (hi - lo), torch.zeros_like(lo))
        alpha = alphas[i][picks, row].to(torch.float64).clamp(0.0, 1.0)
        gap = torch.minimum(-alpha * lo, (1.0 - alpha) * hi)
        score = (lam.clamp(max=0.0).abs() * intercept + lam.clamp(min=0.0) * gap).clamp(min=0.0)
        if shallow_first:
            free = free & ~seen.unsqueeze(-1)
            seen = seen | free.any(dim=-1)
        scores.append(torch.where(free, score + 1e-12 * intercept, torch.full_like(score, -1.0)))
    return scores


def _choose_splits(bounds: ChainBounds, splits, alphas, betas, bound, coefficients, C: torch.Tensor,
                   d: torch.Tensor, candidates: int,
                   shallow_first: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per domain, the (layer, neuron) to split; layer -1 when none is left. Filtered smart
    branching (De Palma et al. 2021): the ``candidates`` neurons with the largest scores
    (:func:`_scores`) each give two children, bounded once with the parent's α and β
    (float32, no steps); the neuron whose worse child has the best bound is chosen."""
    scores = _scores(bounds, splits, alphas, bound, coefficients, shallow_first)
    flat = torch.cat(scores, dim=-1)  # (B, sum of widths)
    offsets = torch.tensor([0] + [s.shape[-1] for s in scores]).cumsum(0)
    k = min(candidates, flat.shape[-1])
    value, index = flat.topk(k, dim=-1)  # (B, k), best first
    layer = torch.bucketize(index, offsets[1:], right=True)
    neuron = index - offsets[layer]
    usable = value >= 0
    if k > 1 and bool(usable[:, 1].any()):
        n = flat.shape[0]
        rows = torch.arange(n).repeat_interleave(2 * k)
        trial_layer = layer.repeat_interleave(2, dim=-1).reshape(-1)
        trial_neuron = neuron.repeat_interleave(2, dim=-1).reshape(-1)
        sign = torch.tensor([1, -1], dtype=torch.int8).repeat(n * k)
        trial_splits = _with_splits(splits, rows, trial_layer, trial_neuron, sign)
        with torch.no_grad():
            child = bounds.select(rows).estimate(len(bounds.chain.weights) - 1, C, d,
                                                 [a[rows] for a in alphas], [b[rows] for b in betas],
                                                 trial_splits)
        worse = child.max(dim=-1).values.reshape(n, k, 2).min(dim=-1).values
        worse = torch.where(usable, worse, torch.full_like(worse, -torch.inf))
        pick = worse.argmax(dim=-1, keepdim=True)  # ties: the first, the largest score
    else:
        pick = torch.zeros(flat.shape[0], 1, dtype=torch.long)
    chosen_layer = torch.where(usable.gather(1, pick), layer.gather(1, pick), -1).flatten()
    return chosen_layer, neuron.gather(1, pick).flatten()
