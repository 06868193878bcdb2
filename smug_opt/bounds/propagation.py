"""Sound linear bound propagation over a :class:`~smug_opt.network.flat.FlatNetwork`.

:func:`propagate` bounds every layer's output over an input domain
(:mod:`smug_opt.bounds.domain`): interval arithmetic layer by layer, and with
``method="crown"`` each input of a piecewise-linear layer (for the neurons whose interval
straddles a kink) and the last layer are bounded by back-substitution (CROWN, Zhang et al.
2018; DeepPoly, Singh et al. 2019): a linear function ``Λ·y_k`` is rewritten layer by layer
into a linear function of the input plus a constant, through the exact affine maps and
residual sums and the linear relaxations of :mod:`smug_opt.bounds.relaxation` (which use
the bounds already found for earlier layers), and then minimised over the domain.
:meth:`FlatBounds.linear` does the same for any linear function of the output (e.g. the
rows ``logit[label] − logit[l]``). Each step is one matrix product per layer (numpy/scipy).

Rigour in float64. The invariant kept is ``Λ·y_k >= Σ_j Λ_j·y_j + c − e`` for every input
of the domain, with exact arithmetic on the float values of ``Λ_j`` and ``c``, and ``e`` a
float error allowance. Every relaxation's coefficients are floats valid exactly (chords
rounded outward). When a step computes ``Λ' = Λ·W`` and ``c' = c + Λ·b`` in float, the
exact products differ from the float ones by at most ``γ·|Λ|·|W|`` entrywise (``γ`` from
:func:`~smug_opt.exact.dot_error_bound`), and each layer's values lie in ``[-m, m]`` with
``m`` the larger end of its (already rigorous) interval, so replacing exact by float
coefficients costs at most ``γ·|Λ|·(|W|·m + |b|)``, which is added to ``e``; likewise for the
relaxation steps, sums of pending coefficients and the additions into ``c``. At the input,
the domain returns its float minimum and its error; the result is ``c + min − e``, with
``e`` scaled by :data:`~smug_opt.bounds.rounding.ACCUMULATED` and the last subtraction
rounded down. A NaN (from an overflow to inf) becomes an infinite bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.cone import reached
from smug_opt.bounds.domain import Box, Domain, Masks
from smug_opt.bounds.relaxation import elementwise, is_unstable, maxpool_choice
from smug_opt.bounds.rounding import ACCUMULATED, down, slack, up
from smug_opt.exact import TINY, UNIT_ROUNDOFF
from smug_opt.network.flat import FlatLayer, FlatNetwork

__all__ = ["METHODS", "FlatBounds", "propagate"]

METHODS = ("interval", "crown")

CHUNK_ENTRIES = 2**22
"""Back-substitution runs over at most this many coefficients at once (rows × widest layer)."""

_ELEMENTWISE = ("relu", "leaky_relu", "clip")
_DENSE_ABOVE = 0.1  # a linear layer with more nonzeros than this fraction is multiplied dense


@dataclass(frozen=True, eq=False)
class FlatBounds:
    """Rigorous intervals ``lo[k] <= y_k <= hi[k]`` of every layer's output ``y_k`` (layer
    0: the input) over ``domain``, found by ``method`` in ``seconds``. The input interval
    of a non-linear layer ``k`` is that of ``network.layers[k].inputs[0]``
    (:meth:`pre_activation`)."""

    network: FlatNetwork
    domain: Domain
    lo: tuple[np.ndarray, ...]
    hi: tuple[np.ndarray, ...]
    method: str
    seconds: float

    def pre_activation(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The interval of layer ``k``'s (first) input."""
        src = self.network.layers[k].inputs[0]
        return self.lo[src], self.hi[src]

    def unstable(self) -> dict[int, int]:
        """Per ``relu``/``leaky_relu``/``clip`` layer, how many neurons straddle a kink."""
        return {k: int(is_unstable(layer, *self.pre_activation(k)).sum())
                for k, layer in enumerate(self.network.layers) if layer.kind in _ELEMENTWISE}

    def linear(self, rows: np.ndarray, offset: np.ndarray | None = None,
               slopes: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rigorous bounds on ``rows @ y_last + offset`` over the domain, by back-substitution
        (whatever ``method`` found the intervals); ``slopes``: per ReLU layer, the lower slopes
        ``(2·rows, n)`` in ``[0, 1]`` to use (the lower bounds' rows, then the upper ones'; see
        :mod:`~smug_opt.bounds.alpha_flat`), CROWN's elsewhere."""
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        last = len(self.network.layers) - 1
        if rows.shape[1] != self.network.layers[last].size:
            raise ValueError(f"rows have {rows.shape[1]} columns but the network has "
                             f"{self.network.layers[last].size} outputs")
        offset = np.zeros(rows.shape[0]) if offset is None else np.asarray(offset, dtype=np.float64)
        walk = _BackSubstitution(self.network, self.domain, list(self.lo), list(self.hi),
                                 _Matrices(self.domain.support))
        walk.slopes = slopes or {}
        lower = walk.lower(last, np.vstack([rows, -rows]), np.zeros(2 * rows.shape[0]), start_at=last)
        r = rows.shape[0]
        with np.errstate(invalid="ignore", over="ignore"):
            return down(lower[:r] + offset), up(-lower[r:] + offset)


def propagate(network: FlatNetwork, domain: Domain, *, method: str = "crown",
              prior: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] | None = None,
              settled: frozenset[int] = frozenset(), sparse_rows: bool = False,
              reuse: FlatBounds | None = None) -> FlatBounds:
    """Bounds on every layer of ``network`` over ``domain`` (:class:`Box` or :class:`Masks`
    on its input): ``method`` ``"interval"`` or ``"crown"`` (back-substitution, never looser).

    ``prior``: intervals already known for some layers (``({k: lo}, {k: hi})``, e.g. from
    LPs), intersected with each layer's as soon as it is found, so later layers use them;
    the results then hold wherever the prior ones do. ``settled``: layers whose prior
    interval is taken as it is (already back-substituted: not again). ``sparse_rows``: the
    back-substitution carries its coefficients as sparse rows (for layers whose neurons read
    few others, as convolutions and pooling tournaments: far fewer products than dense rows).
    ``reuse``: bounds of the same network over another :class:`Box`; the neurons that no
    input where the two boxes differ reaches (:func:`~smug_opt.bounds.cone.reached`) take
    over their intervals (over both boxes they take the same values), only the others are
    computed."""
    if method not in METHODS:
        raise ValueError(f"bounds method must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(domain, (Box, Masks)):
        raise TypeError(f"domain must be a Box or Masks, got {type(domain).__name__}")
    if domain.size != network.num_inputs:
        raise ValueError(f"the domain has {domain.size} inputs but the network takes {network.num_inputs}")
    t0 = time.perf_counter()
    layers = network.layers
    unset = np.empty(0)  # each layer's interval is set before any layer reads it
    lo, hi = [unset] * len(layers), [unset] * len(layers)
    lo[0], hi[0] = domain.interval()
    refine = _rows_to_refine(network) if method == "crown" else {}
    matrices = _Matrices(domain.support)
    walk = _BackSubstitution(network, domain, lo, hi, matrices, sparse_rows=sparse_rows)
    kept = None if reuse is None else _unreached(network, domain, reuse)
    for k in range(1, len(layers)):
        lo[k], hi[k] = _interval(layers[k], lo, hi, matrices)
        if kept is not None and reuse is not None:
            lo[k], hi[k] = np.where(kept[k], reuse.lo[k], lo[k]), np.where(kept[k], reuse.hi[k], hi[k])
        if prior is not None and k in prior[0]:
            lo[k], hi[k] = np.maximum(lo[k], prior[0][k]), np.minimum(hi[k], prior[1][k])
        rows = None if k in settled else refine.get(k)
        if rows is not None:
            selected = np.flatnonzero(rows(lo[k], hi[k]) if kept is None else rows(lo[k], hi[k]) & ~kept[k])
            if selected.size:
                l_new, h_new = walk.bounds(k, selected)
                lo[k][selected] = np.maximum(lo[k][selected], l_new)
                hi[k][selected] = np.minimum(hi[k][selected], h_new)
    return FlatBounds(network, domain, tuple(lo), tuple(hi), method, time.perf_counter() - t0)


def _unreached(network: FlatNetwork, domain: Domain, reuse: FlatBounds) -> list[np.ndarray]:
    """Per layer, the neurons whose intervals ``reuse`` (over another box) gives for ``domain``."""
    if reuse.network is not network or not (isinstance(domain, Box) and isinstance(reuse.domain, Box)):
        raise ValueError("bounds are reused only from the same network over another Box")
    old = reuse.domain
    return [~m for m in reached(network, (old.lo != domain.lo) | (old.hi != domain.hi))]


RowChoice = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""Given a layer's interval (lo, hi), which of its neurons to bound by back-substitution."""


def _rows_to_refine(network: FlatNetwork) -> dict[int, RowChoice]:
    """Per layer bounded by back-substitution, which of its neurons to bound: those that an
    elementwise layer reading it has unstable; all for max pooling, the last layer and a
    linear layer on the input."""
    consumers: dict[int, list[FlatLayer]] = {}
    for layer in network.layers[1:]:
        if layer.kind in (*_ELEMENTWISE, "maxpool"):
            consumers.setdefault(layer.inputs[0], []).append(layer)
    last = len(network.layers) - 1
    refine: dict[int, RowChoice] = {}
    for k, layer in enumerate(network.layers):
        if layer.kind not in ("linear", "add"):
            continue
        if k == last or layer.inputs == (0,):  # the first layers' are cheap: no product
            refine[k] = _every_row
        elif k in consumers:
            readers = consumers[k]
            refine[k] = _unstable_for_any(readers)
    return refine


def _unstable_for_any(readers: list[FlatLayer]) -> RowChoice:
    return lambda low, high: np.logical_or.reduce([is_unstable(r, low, high) for r in readers])


def _every_row(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.ones(low.shape, dtype=bool)


def _interval(layer: FlatLayer, lo: list, hi: list, matrices: _Matrices) -> tuple[np.ndarray, np.ndarray]:
    """Interval arithmetic for one layer from its inputs' intervals, rounded outward."""
    low_in, high_in = lo[layer.inputs[0]], hi[layer.inputs[0]]
    with np.errstate(invalid="ignore", over="ignore"):
        if layer.kind == "linear":
            W, bias = matrices[layer], layer.affine[1]
            if layer.inputs[0] == 0:
                low_in, high_in = low_in[matrices.support], high_in[matrices.support]
            low = W.pos @ low_in + W.neg @ high_in + bias
            high = W.pos @ high_in + W.neg @ low_in + bias
            m = np.maximum(np.abs(low_in), np.abs(high_in))
            err = slack(W.matrix.shape[1] + 1, W.abs @ m + np.abs(bias))
            return low - err, high + err
        if layer.kind == "relu":
            return np.maximum(low_in, 0.0), np.maximum(high_in, 0.0)
        if layer.kind == "leaky_relu":
            a = layer.alpha
            if not a >= 0:
                raise ValueError(f"leaky_relu needs alpha >= 0 (a monotone activation), got {a!r}")
            return (np.where(low_in >= 0, low_in, down(a * low_in)),
                    np.where(high_in >= 0, high_in, up(a * high_in)))
        if layer.kind == "clip":
            return np.clip(low_in, layer.lo, layer.hi), np.clip(high_in, layer.lo, layer.hi)
        if layer.kind == "maxpool":
            pad_l, pad_h = np.append(low_in, -np.inf), np.append(high_in, -np.inf)
            return pad_l[layer.windows].max(axis=1), pad_h[layer.windows].max(axis=1)
        if layer.kind == "add":
            l2, h2 = lo[layer.inputs[1]], hi[layer.inputs[1]]
            return down(low_in + l2), up(high_in + h2)
    raise ValueError(f"unknown flat layer kind {layer.kind!r}")


def _dense(rows: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Coefficient rows as a dense array."""
    return rows.toarray() if sp.issparse(rows) else rows  # type: ignore[union-attr]


@dataclass(frozen=True, eq=False)
class _Matrix:
    """A linear layer's matrix (dense when dense enough) with its absolute, positive and
    negative parts."""

    matrix: np.ndarray | sp.csr_matrix
    abs: np.ndarray | sp.csr_matrix
    pos: np.ndarray | sp.csr_matrix
    neg: np.ndarray | sp.csr_matrix


class _Matrices:
    """The linear layers' matrices, prepared once per propagation; a layer that reads the
    input keeps only the columns of the domain's support (the other inputs are 0)."""

    def __init__(self, support: np.ndarray) -> None:
        self.support = support
        self._cache: dict[int, _Matrix] = {}

    def __getitem__(self, layer: FlatLayer) -> _Matrix:
        key = id(layer)
        if key not in self._cache:
            W = layer.affine[0]
            if layer.inputs[0] == 0:
                W = W[:, self.support]
            if W.nnz > _DENSE_ABOVE * W.shape[0] * W.shape[1]:
                W = W.toarray()
                self._cache[key] = _Matrix(W, np.abs(W), np.maximum(W, 0.0), np.minimum(W, 0.0))
            else:
                self._cache[key] = _Matrix(W, abs(W), W.maximum(0), W.minimum(0))
        return self._cache[key]


class _BackSubstitution:
    """Lower bounds of linear functions of a layer's output, by walking the layers back to
    the input with the intervals found so far (``lo``/``hi``, read as they grow)."""

    def __init__(self, network: FlatNetwork, domain: Domain, lo: list, hi: list, matrices: _Matrices,
                 sparse_rows: bool = False) -> None:
        self.sparse_rows = sparse_rows
        self.layers = network.layers
        self.domain = domain
        self.lo, self.hi = lo, hi
        # the widest coefficient matrix a walk down from layer k holds: layers below k
        sizes = [self.domain.support.size] + [layer.size for layer in network.layers[1:]]
        self.width_below = np.maximum.accumulate(sizes)
        self.support = domain.support
        self.matrices = matrices
        self.slopes: dict[int, np.ndarray] = {}  # per ReLU layer, α lower slopes per row (dense rows)

    def _magnitude(self, j: int) -> np.ndarray:
        m = np.maximum(np.abs(self.lo[j]), np.abs(self.hi[j]))
        return m[self.support] if j == 0 else m

    def bounds(self, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``y_k[rows]``, in chunks of rows."""
        layer = self.layers[k]
        width = self.width_below[k - 1 if layer.kind == "linear" else k]  # a linear layer: start below it
        chunk = max(1, CHUNK_ENTRIES // (2 * int(width)))
        lows, highs = [], []
        for begin in range(0, rows.size, chunk):
            part = rows[begin:begin + chunk]
            r = part.size
            if layer.kind == "linear" and layer.inputs[0] == 0:  # the domain takes the rows as they are
                matrix, bias = layer.affine
                coeff = matrix[part][:, self.support]
                lower = self.lower(0, sp.vstack([coeff, -coeff]).tocsr(),
                                   np.concatenate([bias[part], -bias[part]]), start_at=0)
            elif layer.kind == "linear":  # start below the layer: its rows are exact coefficients
                matrix, bias = layer.affine
                rows_of = matrix[part]
                both = (sp.vstack([rows_of, -rows_of]).tocsr() if self.sparse_rows
                        else np.vstack([rows_of.toarray(), -rows_of.toarray()]))
                lower = self.lower(layer.inputs[0], both, np.concatenate([bias[part], -bias[part]]),
                                   start_at=layer.inputs[0])
            else:
                eye = sp.csr_matrix((np.ones(r), (np.arange(r), part)), shape=(r, layer.size))
                both = sp.vstack([eye, -eye]).tocsr()
                start = both if self.sparse_rows else both.toarray()
                lower = self.lower(k, start, np.zeros(2 * r), start_at=k)
            lows.append(lower[:r])
            highs.append(-lower[r:])
        return np.concatenate(lows), np.concatenate(highs)

    def lower(self, node: int, lam: np.ndarray, const: np.ndarray, *, start_at: int) -> np.ndarray:
        """A rigorous lower bound of ``lam @ y_node + const`` per row over the domain."""
        pending: dict[int, np.ndarray] = {node: lam}
        const = np.array(const, dtype=np.float64)
        err = np.zeros(const.size)

        def push(j: int, coeff: np.ndarray) -> None:
            nonlocal err
            if j == 0 and coeff.shape[1] != self.support.size:
                coeff = coeff[:, self.support]  # the other inputs are 0
            if j in pending:
                held = pending[j]
                if sp.issparse(held) != sp.issparse(coeff):  # sparse and dense rows: add dense
                    held, coeff = _dense(held), _dense(coeff)
                total = held + coeff
                err = err + 2.0 * UNIT_ROUNDOFF * (abs(total) @ self._magnitude(j)) + TINY
                pending[j] = total
            else:
                pending[j] = coeff

        with np.errstate(invalid="ignore", over="ignore"):
            for k in range(start_at, 0, -1):
                L = pending.pop(k, None)
                if L is None:
                    continue
                layer = self.layers[k]
                src = layer.inputs[0]
                if layer.kind == "add":
                    push(src, L)
                    push(layer.inputs[1], L)
                    continue
                if layer.kind == "linear":
                    W, (matrix, bias) = self.matrices[layer], layer.affine
                    product = L @ W.matrix
                    push(src, sp.csr_matrix(product) if sp.issparse(L) else np.asarray(product))
                    t = L @ bias
                    m = self._magnitude(src)
                    e = (slack(layer.size + 1, abs(L) @ (W.abs @ m + np.abs(bias)))
                         + TINY * (matrix.nnz + m.size) * m.max(initial=0.0))
                elif layer.kind == "maxpool":
                    t, e = self._maxpool(layer, L, push)
                else:
                    rel = elementwise(layer, self.lo[src], self.hi[src])
                    if k in self.slopes and layer.kind == "relu":  # α in [0, 1] where unstable
                        alpha = np.clip(self.slopes[k], 0.0, 1.0)
                        a_lo = np.where(is_unstable(layer, self.lo[src], self.hi[src]), alpha, rel.a_lo)
                        rel = replace(rel, a_lo=a_lo, a_hi=np.broadcast_to(rel.a_hi, a_lo.shape))
                        L = _dense(L)
                    if sp.issparse(L):  # scipy.sparse is untyped: issparse does not narrow L
                        pos, neg = L.maximum(0), L.minimum(0)  # type: ignore[union-attr,attr-defined,unused-ignore]
                        push(src, sp.csr_matrix(pos.multiply(rel.a_lo) + neg.multiply(rel.a_hi)))
                    else:
                        pos, neg = np.maximum(L, 0.0), np.minimum(L, 0.0)
                        push(src, pos * rel.a_lo + neg * rel.a_hi)
                    t = pos @ rel.b_lo + neg @ rel.b_hi
                    a = np.maximum(np.abs(rel.a_lo), np.abs(rel.a_hi))
                    a = a.max(axis=0) if a.ndim == 2 else a  # per-row α: the largest of any row
                    b = np.maximum(np.abs(rel.b_lo), np.abs(rel.b_hi))
                    e = slack(2 * layer.size + 2, abs(L) @ (a * self._magnitude(src) + b))
                const = const + t
                err = err + e + 2.0 * UNIT_ROUNDOFF * np.abs(const) + TINY
            L0 = pending.pop(0, None)
            if L0 is None:
                value, e0 = np.zeros(const.size), np.zeros(const.size)
            else:
                value, e0 = self.domain.minimum(L0)
            total = const + value
            rounding = 2.0 * UNIT_ROUNDOFF * (np.abs(const) + np.abs(value))
            allowance = (err + e0 + rounding) * ACCUMULATED + TINY
            result = down(total - allowance)
        return np.where(np.isnan(result), -np.inf, result)

    def _maxpool(self, layer: FlatLayer, L: np.ndarray, push) -> tuple[np.ndarray, np.ndarray]:
        """``y >= v[choice]`` for positive coefficients; for negative ones ``y <= v[choice]``
        where that input dominates its window, else ``y <=`` the window's largest upper bound."""
        src = layer.inputs[0]
        L = _dense(L)
        choice, dominates, top = maxpool_choice(layer.pool_windows, self.lo[src], self.hi[src])
        pos, neg = np.maximum(L, 0.0), np.minimum(L, 0.0)
        on_input = pos + np.where(dominates, neg, 0.0)  # disjoint supports: exact
        n_src = self.layers[src].size
        pick = sp.csr_matrix((np.ones(layer.size), (np.arange(layer.size), choice)),
                             shape=(layer.size, n_src))
        push(src, np.asarray(on_input @ pick))
        ceiling = np.where(dominates, 0.0, top)
        t = np.where(dominates, 0.0, neg) @ ceiling
        e = slack(2 * layer.size + 2, np.abs(L) @ (self._magnitude(src)[choice] + np.abs(ceiling)))
        return t, e
