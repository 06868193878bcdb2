"""Rigorous α-CROWN and β-CROWN bounds on a chain of dense layers with ReLUs, in batches.

A :class:`ReluChain` is a :class:`~smug_opt.network.flat.FlatNetwork` of the form
``linear, relu, linear, relu, ..., linear`` (the fully connected nets of VNN-COMP's
``mnistfc``), held as dense float64 torch tensors. :class:`ChainBounds` adds an input box
and rigorous intervals of every ReLU's input (pre-activation) over it, and bounds linear
functions ``C·z_top − rhs`` of a linear layer's output by back-substitution (CROWN, Zhang
et al. 2018) with, per domain, row and neuron:

- **α**: the lower slope of each unstable ReLU, any value in ``[0, 1]`` (``α·z <= relu(z)``
  for every ``z``); α-CROWN (Xu et al. 2021) picks them by gradient ascent on the bound;
- **splits**: a neuron fixed active (``z >= 0``: ``relu(z) = z``) or inactive (``z <= 0``:
  ``relu(z) = 0``) on a subdomain of branch and bound;
- **β >= 0**: the Lagrangian of each split's constraint (β-CROWN, Wang et al. 2021): on the
  subdomain ``f >= f − β·z`` for an active split and ``f >= f + β·z`` for an inactive one, so
  the bound of the right side bounds ``f`` there.

Whatever α (clamped to ``[0, 1]``) and β (clamped to ``>= 0``) the optimiser found, the
bound computed with them is rigorous: the arithmetic is float64 with the same error
allowance as :mod:`smug_opt.bounds.propagation` (every product and sum ``Λ·W``, ``Λ·b``, the
relaxation steps and the β additions add ``γ·|Λ|·(|W|·m + |b|)``-type terms, ``m`` the
magnitude of the layer's values over the box; the total scaled by
:data:`~smug_opt.bounds.rounding.ACCUMULATED` and subtracted, and the result rounded down),
and the upper chords of unstable ReLUs are rounded outward. Gradients flow through the
same computation (the allowance is a smooth function of the coefficients).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from smug_opt.bounds.rounding import ACCUMULATED, upper_chord
from smug_opt.bounds.sparse_weight import SparseWeight, matmul
from smug_opt.exact import TINY, UNIT_ROUNDOFF
from smug_opt.network.flat import FlatNetwork

__all__ = ["ChainBounds", "ReluChain"]

MAX_DENSE_ENTRIES = 2**24
"""A chain is held dense only up to this many weights (128 MiB in float64); a larger one
holds its layers of more than :data:`SMALL_LAYER` entries sparse (:class:`SparseWeight`)."""
SMALL_LAYER = 2**20


def _slack(terms: int, magnitude: torch.Tensor) -> torch.Tensor:
    """:func:`~smug_opt.exact.dot_error_bound` on tensors without its ``(terms + 1)·TINY``,
    which the caller adds once as a scalar (tensors of subnormal numbers run 100x slower)."""
    return 2.0 * (terms + 3) * UNIT_ROUNDOFF * magnitude


@dataclass(frozen=True, eq=False)
class ReluChain:
    """``z_0 = W_0·x + b_0``, ``z_j = W_j·relu(z_{j−1}) + b_j``; the last ``z`` is the output."""

    weights: tuple[torch.Tensor | SparseWeight, ...]
    biases: tuple[torch.Tensor, ...]

    @classmethod
    def from_flat(cls, net: FlatNetwork) -> ReluChain | None:
        """The chain of ``net``, or None when ``net`` is not one."""
        layers = net.layers[1:]
        if not layers or len(layers) % 2 == 0:
            return None
        for k, layer in enumerate(layers, start=1):
            if layer.inputs != (k - 1,) or layer.kind != ("linear" if k % 2 else "relu"):
                return None
        linear = [layer.affine for layer in layers[::2]]
        dense = sum(W.shape[0] * W.shape[1] for W, _ in linear) <= MAX_DENSE_ENTRIES
        return cls(tuple(torch.from_numpy(W.toarray()) if dense or W.shape[0] * W.shape[1] <= SMALL_LAYER
                         else SparseWeight(W.astype(np.float64)) for W, _ in linear),
                   tuple(torch.from_numpy(np.array(b, dtype=np.float64)) for _, b in linear))

    @property
    def widths(self) -> list[int]:
        """The sizes of the ReLU layers."""
        return [w.shape[0] for w in self.weights[:-1]]


@dataclass(frozen=True, eq=False)
class ChainBounds:
    """A chain over the box ``[x_lo, x_hi]`` with rigorous intervals ``[lo[i], hi[i]]`` of
    the input of ReLU layer ``i`` over the box (see the module docstring): ``(n_i,)`` for
    the whole box, or ``(B, 1, n_i)`` per domain of a batch (:meth:`per_domain`: each
    domain's own, on its subdomain only; the error allowances then take the magnitudes of
    ``root``'s, which hold on every subdomain)."""

    chain: ReluChain
    x_lo: torch.Tensor
    x_hi: torch.Tensor
    lo: tuple[torch.Tensor, ...]
    hi: tuple[torch.Tensor, ...]
    root: ChainBounds | None = None
    slopes: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = field(default_factory=dict)
    """Per ReLU layer ``k`` whose intervals α-CROWN tightened
    (:func:`~smug_opt.bounds.alpha_crown.tighten`): the neurons it bounded (``u`` of them) and
    the lower slopes ``(1, 2u, n_j)`` of each layer ``j < k`` that gave their lower bounds
    (rows ``:u``) and upper ones (rows ``u:``), a warm start for re-bounding them."""
    # fixed per box and bounds, set by __post_init__
    _chord: tuple[list[torch.Tensor], list[torch.Tensor]] = field(init=False, repr=False)
    _mags: list[torch.Tensor] = field(init=False, repr=False)
    _linear_err: list[torch.Tensor] = field(init=False, repr=False)
    _tiny: list[float] = field(init=False, repr=False)
    _pre_mags: list[torch.Tensor] = field(init=False, repr=False)
    _relu_err: list[torch.Tensor] = field(init=False, repr=False)
    _float32: dict[str, Any] = field(init=False, repr=False)  # the float32 copies, by name

    @classmethod
    def of(cls, chain: ReluChain, x_lo: np.ndarray, x_hi: np.ndarray,
           lo: list[np.ndarray], hi: list[np.ndarray]) -> ChainBounds:
        """From numpy arrays (e.g. a :class:`~smug_opt.bounds.propagation.FlatBounds`' linear
        layers' intervals)."""
        if len(lo) != len(chain.widths) or len(hi) != len(lo):
            raise ValueError(f"the chain has {len(chain.widths)} ReLU layers, got {len(lo)} intervals")
        t = lambda a: torch.from_numpy(np.array(a, dtype=np.float64))  # noqa: E731
        return cls(chain, t(x_lo), t(x_hi), tuple(t(v) for v in lo), tuple(t(v) for v in hi))

    # ----------------------------------------------------------- fixed per box and bounds
    def __post_init__(self) -> None:
        chord_s, chord_t = [], []
        for lo, hi in zip(self.lo, self.hi, strict=True):
            unstable = (lo < 0) & (hi > 0)
            l_np = np.where(unstable, lo.numpy(), -1.0)
            h_np = np.where(unstable, hi.numpy(), 1.0)
            s, b = upper_chord(l_np, np.zeros_like(l_np), h_np, h_np)
            chord_s.append(torch.from_numpy(np.where(unstable, s, 0.0)))
            chord_t.append(torch.from_numpy(np.where(unstable, b, 0.0)))
        object.__setattr__(self, "_chord", (chord_s, chord_t))
        if self.root is not None:  # per domain: the whole box's magnitudes bound the domains'
            for name in ("_mags", "_linear_err", "_tiny", "_pre_mags"):
                object.__setattr__(self, name, getattr(self.root, name))
        else:
            m_in = torch.maximum(self.x_lo.abs(), self.x_hi.abs())
            mags = [m_in] + [torch.clamp(hi, min=0.0) for hi in self.hi]  # each linear layer's input
            linear_err = []
            for W, b, m in zip(self.chain.weights, self.chain.biases, mags, strict=True):
                linear_err.append(matmul(m, W.abs().T) + b.abs())
            object.__setattr__(self, "_mags", mags)
            object.__setattr__(self, "_linear_err", linear_err)
            object.__setattr__(self, "_tiny", [TINY * (W.numel() + m.numel()) * float(m.max())
                                               for W, m in zip(self.chain.weights, mags, strict=True)])
            object.__setattr__(self, "_pre_mags", [torch.maximum(lo.abs(), hi.abs())
                                                   for lo, hi in zip(self.lo, self.hi, strict=True)])
        pre = self._pre_mags
        single = lambda ts: [t.to(torch.float32) for t in ts]  # noqa: E731
        object.__setattr__(self, "_float32", {
            "weights": single(self.chain.weights), "biases": single(self.chain.biases),
            "lo": single(self.lo), "hi": single(self.hi), "slope": single(chord_s),
            "intercept": single(chord_t), "x_lo": self.x_lo.to(torch.float32),
            "x_hi": self.x_hi.to(torch.float32)})
        object.__setattr__(self, "_relu_err", [torch.clamp(s, min=1.0) * m + t
                                               for s, t, m in zip(chord_s, chord_t, pre, strict=True)])

    @property
    def batched(self) -> bool:
        """Whether the intervals are per domain (:meth:`per_domain`)."""
        return self.root is not None

    def per_domain(self, lo: list[torch.Tensor], hi: list[torch.Tensor]) -> ChainBounds:
        """The chain with intervals ``(B, n_i)`` per domain of a batch, each valid on its
        domain (a subdomain of this box) and within this one's."""
        root = self.root or self
        return ChainBounds(self.chain, self.x_lo, self.x_hi, tuple(t.unsqueeze(1) for t in lo),
                           tuple(t.unsqueeze(1) for t in hi), root)

    def select(self, index: torch.Tensor) -> ChainBounds:
        """The domains ``index`` of a batch (``self`` when the intervals are the box's)."""
        if self.root is None:
            return self
        new = object.__new__(ChainBounds)  # the per-domain fields indexed, not recomputed
        pick = lambda ts: [t[index] for t in ts]  # noqa: E731
        fields = {"chain": self.chain, "x_lo": self.x_lo, "x_hi": self.x_hi, "lo": tuple(pick(self.lo)),
                  "hi": tuple(pick(self.hi)), "root": self.root, "slopes": self.slopes,
                  "_chord": (pick(self._chord[0]), pick(self._chord[1])), "_mags": self._mags,
                  "_linear_err": self._linear_err, "_tiny": self._tiny, "_pre_mags": self._pre_mags,
                  "_relu_err": pick(self._relu_err),
                  "_float32": {**self._float32, **{name: pick(self._float32[name])
                                                   for name in ("lo", "hi", "slope", "intercept")}}}
        for name, value in fields.items():
            object.__setattr__(new, name, value)
        return new

    def interval(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """ReLU layer ``i``'s input interval: ``(n_i,)``, or ``(B, n_i)`` per domain."""
        if self.root is None:
            return self.lo[i], self.hi[i]
        return self.lo[i].squeeze(1), self.hi[i].squeeze(1)

    def unstable(self, i: int) -> torch.Tensor:
        """Which neurons of ReLU layer ``i`` straddle 0 (``(B, n_i)`` per domain)."""
        lo, hi = self.interval(i)
        return (lo < 0) & (hi > 0)

    def initial_alpha(self, i: int, batch: int, rows: int) -> torch.Tensor:
        """CROWN's lower slopes for ReLU layer ``i``: 1 where the interval is mostly positive."""
        a = (self.hi[i] >= -self.lo[i]).to(torch.float64)
        return a.expand(batch, rows, -1).clone()

    # ------------------------------------------------------------------ the bound
    def lower(self, top: int, C: torch.Tensor, rhs: torch.Tensor, alphas: list[torch.Tensor],
              betas: list[torch.Tensor] | None = None, splits: list[torch.Tensor] | None = None
              ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """A rigorous lower bound, per domain and row, of ``C·z_top − rhs`` over the box
        (and the subdomain of ``splits``), and the coefficients ``Λ_i`` the back-substitution
        put on each ReLU layer's output (before its relaxation; for branching).

        ``C``: ``(B, R, n_top)`` or ``(R, n_top)``; ``rhs``: ``(R,)`` or ``(B, R)``;
        ``alphas[i]``: ``(B, R, n_i)`` (clamped to [0, 1] here); ``splits[i]``: ``(B, n_i)``
        in {-1, 0, 1}; ``betas[i]``: ``(B, R, n_i)`` or ``(B, 1, n_i)`` (clamped to >= 0),
        for the ReLU layers below ``top``."""
        chain = self.chain
        lam = C if C.dim() == 3 else C.unsqueeze(0)
        if alphas:
            lam = lam.expand(alphas[0].shape[0], -1, -1)
        const = -rhs.expand(lam.shape[0], lam.shape[1]).clone()
        err = torch.zeros_like(const)
        tiny = 0.0  # the TINY allowances, summed apart (a scalar: see _slack)
        coefficients: list[torch.Tensor] = [torch.empty(0)] * top
        s_chord, t_chord = self._chord
        for j in range(top, -1, -1):
            W, b = chain.weights[j], chain.biases[j]
            const = const + lam @ b
            terms = max(W.shape) + 1  # lam·W sums over W's rows (was read as its columns)
            err = err + _slack(terms, lam.abs() @ self._linear_err[j])
            err = err + 2.0 * UNIT_ROUNDOFF * const.abs()
            tiny += self._tiny[j] + (terms + 2) * TINY
            lam = matmul(lam, W)
            if j == 0:
                break
            i = j - 1  # the ReLU below linear layer j
            coefficients[i] = lam
            lo, hi = self.lo[i], self.hi[i]
            active, inactive = lo >= 0, hi <= 0
            if splits is not None:
                active = active | (splits[i] > 0).unsqueeze(1)
                inactive = inactive | (splits[i] < 0).unsqueeze(1)
            else:
                active, inactive = active.expand_as(lam), inactive.expand_as(lam)
            free = ~(active | inactive)
            alpha = alphas[i].clamp(0.0, 1.0)
            ones = torch.ones((), dtype=torch.float64)
            a_lo = torch.where(active, ones, torch.where(inactive, 0.0 * ones, alpha))
            a_hi = torch.where(active, ones, torch.where(inactive, 0.0 * ones, s_chord[i]))
            t_hi = torch.where(free, t_chord[i], 0.0 * ones)
            pos, neg = lam.clamp(min=0.0), lam.clamp(max=0.0)
            const = const + (neg * t_hi).sum(-1)
            relu_err = self._relu_err[i]
            err = err + _slack(2 * lam.shape[-1] + 2, lam.abs() @ relu_err if relu_err.dim() == 1
                               else (lam.abs() * relu_err).sum(-1))
            err = err + 2.0 * UNIT_ROUNDOFF * const.abs()
            tiny += (2 * lam.shape[-1] + 4) * TINY
            lam = pos * a_lo + neg * a_hi
            if betas is not None and splits is not None:
                lam = lam - splits[i].unsqueeze(1).to(torch.float64) * betas[i].clamp(min=0.0)
                err = err + 2.0 * UNIT_ROUNDOFF * (lam.abs() @ self._pre_mags[i])
                tiny += TINY
        value = lam.clamp(min=0.0) @ self.x_lo + lam.clamp(max=0.0) @ self.x_hi
        e0 = _slack(self.x_lo.numel(), lam.abs() @ self._mags[0])
        tiny += (self.x_lo.numel() + 1) * TINY
        total = const + value
        rounding = 2.0 * UNIT_ROUNDOFF * (const.abs() + value.abs())
        allowance = (err + e0 + rounding) * ACCUMULATED + (tiny * ACCUMULATED + 2 * TINY)
        result = total - allowance
        result = result - 2.0 * UNIT_ROUNDOFF * result.abs() - TINY  # the subtraction's rounding
        result = torch.where(torch.isnan(result), torch.full_like(result, -torch.inf), result)
        return result, coefficients

    def estimate(self, top: int, C: torch.Tensor, rhs: torch.Tensor, alphas: list[torch.Tensor],
                 betas: list[torch.Tensor] | None = None, splits: list[torch.Tensor] | None = None
                 ) -> torch.Tensor:
        """:meth:`lower`'s float computation in float32 without its error allowance (not
        rigorous, about twice as fast): what the optimiser ascends."""
        f = self._float32
        lam = C.to(torch.float32)
        lam = lam if lam.dim() == 3 else lam.unsqueeze(0)
        lam = lam.expand(alphas[0].shape[0], -1, -1) if alphas else lam
        const = -rhs.to(torch.float32).expand(lam.shape[0], lam.shape[1])
        for j in range(top, -1, -1):
            const = const + lam @ f["biases"][j]
            lam = matmul(lam, f["weights"][j])
            if j == 0:
                break
            i = j - 1
            active, inactive = f["lo"][i] >= 0, f["hi"][i] <= 0
            if splits is not None:
                active = active | (splits[i] > 0).unsqueeze(1)
                inactive = inactive | (splits[i] < 0).unsqueeze(1)
            alpha = alphas[i].clamp(0.0, 1.0)
            a_lo = torch.where(active, 1.0, torch.where(inactive, 0.0, alpha))
            a_hi = torch.where(active | inactive, a_lo.detach(), f["slope"][i])
            t_hi = torch.where(active | inactive, 0.0, f["intercept"][i])
            neg = lam.clamp(max=0.0)
            const = const + (neg * t_hi).sum(-1)
            lam = lam.clamp(min=0.0) * a_lo + neg * a_hi
            if betas is not None and splits is not None:
                lam = lam - splits[i].unsqueeze(1).to(lam.dtype) * betas[i].clamp(min=0.0)
        return const + lam.clamp(min=0.0) @ f["x_lo"] + lam.clamp(max=0.0) @ f["x_hi"]

    def minimiser(self, top: int, C: torch.Tensor, alphas: list[torch.Tensor],
                  betas: list[torch.Tensor] | None = None, splits: list[torch.Tensor] | None = None
                  ) -> torch.Tensor:
        """Per domain and row, the box corner minimising the bound's linear function of the
        input (a candidate counterexample to try): ``(B, R, n_in)``."""
        chain = self.chain
        with torch.no_grad():
            lam = C if C.dim() == 3 else C.unsqueeze(0)
            for j in range(top, -1, -1):
                lam = matmul(lam, chain.weights[j])
                if j == 0:
                    break
                i = j - 1
                lo, hi = self.lo[i], self.hi[i]
                active, inactive = lo >= 0, hi <= 0
                if splits is not None:
                    active = active | (splits[i] > 0).unsqueeze(1)
                    inactive = inactive | (splits[i] < 0).unsqueeze(1)
                alpha = alphas[i].clamp(0.0, 1.0)
                a_lo = torch.where(active, 1.0, torch.where(inactive, 0.0, alpha))
                a_hi = torch.where(active, 1.0, torch.where(inactive, 0.0, self._chord[0][i]))
                lam = lam.clamp(min=0.0) * a_lo + lam.clamp(max=0.0) * a_hi
                if betas is not None and splits is not None:
                    lam = lam - splits[i].unsqueeze(1).to(torch.float64) * betas[i].clamp(min=0.0)
            return torch.where(lam > 0, self.x_lo, self.x_hi)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The chain's output (float64) on a batch of inputs ``(..., n_in)``."""
        v = x
        for j, (W, b) in enumerate(zip(self.chain.weights, self.chain.biases, strict=True)):
            v = matmul(v, W.T) + b
            if j < len(self.chain.weights) - 1:
                v = v.clamp(min=0.0)
        return v
