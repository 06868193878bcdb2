"""The constraints of a masked :class:`~smug_opt.network.flat.FlatNetwork`, layer by layer.

Every layer's value is kept as an affine expression over the problem's variables (cell
binaries, ReLU outputs, max-pool outputs and their selection binaries), so linear layers
and residual sums add no variable. ReLUs are the IR's ReLU constraints with their bounds
(neurons proven dead dropped); leaky ReLU is ``α·v + (1−α)·relu(v)``; clip is
``lo + relu(v − lo) − relu(v − hi)``; max pooling is exact, a chain of ReLUs
``m ← m + relu(v_k − m)`` (each ReLU's phase binary says whether ``v_k`` beats the inputs
before it; big-M from the bounds; inputs another's lower bound dominates dropped, a single
survivor taken as it is). Every continuous variable is a ReLU output, so the binaries
determine everything and exact verification recomputes it. Bounds on each value are interval arithmetic over
the variables' boxes (widened past float64 rounding, the mask-size limit counted on the
binaries), intersected with the bounds given per layer (:mod:`smug_opt.encode.layer_bounds`).

The given bounds are about the network whose linear layers that read the input have the
matrices ``matrix @ inputs.coef`` as float64 computes them (what
:func:`smug_opt.bounds.cells.on_cells` builds; an identity input: the network itself).
Later coefficients are float64 products and sums too, so each layer's expression carries a
rigorous bound on its distance to the network's exact values
(:mod:`smug_opt.encode.deviation`), by which the given bounds are widened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.bounds.rounding import ACCUMULATED, up
from smug_opt.encode.deviation import (
    carried,
    constant_shift_deviation,
    product_deviation,
    sum_deviation,
    widen,
)
from smug_opt.encode.layer_bounds import LayerBounds
from smug_opt.encode.masked import MaskedNetwork
from smug_opt.exact import TINY, dot_error_bound
from smug_opt.ir import ProblemBuilder
from smug_opt.network.flat import FlatNetwork

__all__ = ["Expression", "NetworkEncoding", "encode_layers", "encode_network"]


@dataclass(frozen=True, eq=False)
class Expression:
    """Values ``coef @ x[:width] + const`` of a layer, one row per value; ``deviation``
    bounds, per row, how far they may lie from the network's exact values of that layer
    (the float64 rounding of the coefficients, :mod:`smug_opt.encode.deviation`; None: 0)."""

    coef: sp.csr_matrix
    const: np.ndarray
    deviation: np.ndarray | None = None

    @property
    def off(self) -> np.ndarray:
        """:attr:`deviation` as an array (zeros for None)."""
        return np.zeros(self.const.size) if self.deviation is None else self.deviation

    def widened(self, width: int) -> sp.csr_matrix:
        coef = self.coef.copy()
        coef.resize((coef.shape[0], width))
        return coef


@dataclass(eq=False)
class NetworkEncoding:
    """What :func:`encode_network` added: the class scores' expression, per ReLU layer the
    neuron counts, and the variables' boxes."""

    scores: Expression
    neurons: list[dict[str, Any]] = field(default_factory=list)
    maxpools: list[dict[str, Any]] = field(default_factory=list)
    row_deviation: np.ndarray | None = None
    """Per output row (:func:`encode_network`), a bound on how far its slack may lie from
    the network's exact ``out_rows·scores − out_rhs``."""


class _Encoder:
    def __init__(self, builder: ProblemBuilder, net: FlatNetwork, inputs: Expression, lb: np.ndarray,
                 ub: np.ndarray, bounds: LayerBounds, *, declare: bool, strengthen: bool,
                 max_ones: int | None, n_cells: int = 0) -> None:
        self.builder, self.net, self.inputs, self.bounds = builder, net, inputs, bounds
        self.declare, self.strengthen, self.max_ones = declare, strengthen, max_ones
        self.n_cells = n_cells
        self.lb: list[np.ndarray] = [np.asarray(lb, dtype=np.float64)]
        self.ub: list[np.ndarray] = [np.asarray(ub, dtype=np.float64)]
        self.result = NetworkEncoding(Expression(sp.csr_matrix((0, 0)), np.zeros(0)))

    # ----------------------------------------------------------------- variables and bounds
    def _add_vars(self, lb: np.ndarray, ub: np.ndarray, *, binary: bool = False) -> np.ndarray:
        idx = self.builder.add_binaries(lb.size) if binary else self.builder.add_continuous(lb.size, lb, ub)
        self.lb.append(np.asarray(lb, dtype=np.float64))
        self.ub.append(np.asarray(ub, dtype=np.float64))
        return idx

    def _reach(self, width: int) -> np.ndarray:
        """``max(|lb|, |ub|)`` of the first ``width`` variables."""
        return np.maximum(np.abs(np.concatenate(self.lb)[:width]), np.abs(np.concatenate(self.ub)[:width]))

    def deviation_of_rows(self, rows: np.ndarray, rhs: np.ndarray, expr: Expression) -> np.ndarray:
        """Per row of ``rows·expr >= rhs`` as the problem states it (``rows @ coef`` and
        ``rhs − rows @ const`` in float64), a bound on its slack's distance to the network's."""
        reach = self._reach(expr.coef.shape[1])
        local = product_deviation(sp.csr_matrix(rows), expr.coef, reach, expr.const, rhs)
        through = carried(sp.csr_matrix(rows), expr.deviation)
        return local if through is None else local + through

    def _interval(self, expr: Expression, *, cardinality: bool) -> tuple[np.ndarray, np.ndarray]:
        """Rigorous bounds on each value of ``expr`` over the variables' boxes (and, with
        ``cardinality``, at most ``max_ones`` cell binaries set)."""
        width = expr.coef.shape[1]
        lb, ub = np.concatenate(self.lb)[:width], np.concatenate(self.ub)[:width]
        pos, neg = expr.coef.maximum(0), expr.coef.minimum(0)
        lo = expr.const + pos @ lb + neg @ ub
        hi = expr.const + pos @ ub + neg @ lb
        terms = np.diff(expr.coef.indptr)
        magnitude = np.abs(expr.const) + abs(expr.coef) @ np.maximum(np.abs(lb), np.abs(ub))
        # a row of zero magnitude is exact (a constant, or terms that are all 0)
        slack = np.where(magnitude > 0, dot_error_bound(terms + 1, magnitude), 0.0)
        if cardinality and self.max_ones is not None and self.max_ones < self.n_cells:
            lo, hi = self._cardinality(expr.coef, lo, hi, self.max_ones)
            slack = 4.0 * slack  # three sums of terms of at most that magnitude, and two subtractions
        return lo - slack, hi + slack

    def _cardinality(self, coef: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray, max_ones: int
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Replace the cell binaries' part of the bounds by the sum of each row's
        ``max_ones`` largest (smallest) coefficients on them."""
        coo = coef.tocoo()
        on_cells = coo.col < self.n_cells
        rows, data = coo.row[on_cells], coo.data[on_cells]
        k = int(max_ones)
        for sign, bound in ((1.0, hi), (-1.0, lo)):
            values = np.maximum(sign * data, 0.0)
            order = np.lexsort((-values, rows))
            ranked_rows = rows[order]
            first = np.searchsorted(ranked_rows, ranked_rows, side="left")
            keep = (np.arange(order.size) - first) < k
            top = np.bincount(ranked_rows[keep], values[order][keep], minlength=coef.shape[0])
            full = np.bincount(rows, values, minlength=coef.shape[0])
            bound -= sign * (full - top)  # all cells' positive part counted before: keep the top k
        return lo, hi

    def _layer_bounds(self, index: int, expr: Expression, shift: float = 0.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(lo, hi)`` for feasible masks and ``(global_lo, global_hi)`` for every mask of
        ``expr``, the values of layer ``index`` minus ``shift``."""
        g_lo, g_hi = self._interval(expr, cardinality=False)
        lo, hi = self._interval(expr, cardinality=True)
        lo, hi = np.maximum(lo, g_lo), np.minimum(hi, g_hi)
        for given_lo, given_hi, which in ((self.bounds.global_lo, self.bounds.global_hi, "global"),
                                          (self.bounds.lo, self.bounds.hi, "feasible")):
            if index not in given_lo:
                continue
            low = np.nextafter(given_lo[index] - shift, -np.inf) if shift else given_lo[index]
            high = np.nextafter(given_hi[index] - shift, np.inf) if shift else given_hi[index]
            if expr.deviation is not None:  # the network's bounds, for the problem's values
                low, high = widen(low, high, expr.deviation)
            if which == "global":
                g_lo, g_hi = np.maximum(g_lo, low), np.minimum(g_hi, high)
            else:
                lo, hi = np.maximum(lo, low), np.minimum(hi, high)
        lo, hi = np.maximum(lo, g_lo), np.minimum(hi, g_hi)
        return np.minimum(lo, hi), hi, g_lo, g_hi

    # ----------------------------------------------------------------------------- layers
    def run(self) -> NetworkEncoding:
        net = self.net
        values: list[Expression] = [self.inputs]
        for index, layer in enumerate(net.layers[1:], start=1):
            src = values[layer.inputs[0]]
            if layer.kind == "linear":
                out = Expression(sp.csr_matrix(layer.matrix @ src.coef),
                                 layer.matrix @ src.const + layer.bias,
                                 None if layer.inputs[0] == 0 else self._linear_deviation(layer.affine, src))
            elif layer.kind == "relu":
                out = self._relu(layer.inputs[0], src, str(index))
            elif layer.kind == "leaky_relu":
                rect = self._relu(layer.inputs[0], src, str(index))
                alpha = float(layer.alpha)
                out = Expression(sp.csr_matrix(alpha * src.widened(rect.coef.shape[1])
                                               + (1.0 - alpha) * rect.coef), alpha * src.const,
                                 self._leaky_deviation(alpha, src, rect))
            elif layer.kind == "clip":
                out = self._clip(layer.inputs[0], src, float(layer.lo), float(layer.hi), index)
            elif layer.kind == "maxpool":
                out = self._maxpool(layer.inputs[0], src, layer.pool_windows, index)
            elif layer.kind == "add":
                other = values[layer.inputs[1]]
                width = max(src.coef.shape[1], other.coef.shape[1])
                local = sum_deviation(src.widened(width), other.widened(width), src.const, other.const,
                                      self._reach(width))
                out = Expression(sp.csr_matrix(src.widened(width) + other.widened(width)),
                                 src.const + other.const, _nonzero(src.off + other.off + local))
            else:
                raise ValueError(f"the encoder has no rule for flat layer {index} of kind {layer.kind!r}")
            values.append(out)
        self.result.scores = values[-1]
        return self.result

    def _relu(self, index: int, src: Expression, name: str, shift: float = 0.0) -> Expression:
        """``relu(src − shift)`` as an expression over new ReLU outputs (dead neurons: 0);
        ``src`` holds the values of layer ``index``, whose given bounds apply."""
        if shift:
            src = Expression(src.coef, src.const - shift,
                             _nonzero(src.off + constant_shift_deviation(src.const, shift)))
        lo, hi, _, g_hi = self._layer_bounds(index, src, shift)
        dead, active = hi <= 0, lo >= 0
        kept = ~dead if self.declare else np.ones(lo.size, dtype=bool)
        out = self._add_vars(np.maximum(lo[kept], 0.0), np.maximum(hi[kept], 0.0))
        coef = src.coef[kept]
        self.builder.add_relus(out, coef, np.arange(coef.shape[1]), src.const[kept],
                               lo=lo[kept] if self.declare else -np.inf,
                               hi=hi[kept] if self.declare else np.inf)
        cut = dead & (g_hi > 0) if self.declare else np.zeros(lo.size, dtype=bool)
        if cut.any():  # dead only for feasible masks: a row holds it off for every mask
            self.builder.add_constraints(src.coef[cut], np.arange(src.coef.shape[1]), "<=", -src.const[cut])
        if self.strengthen:
            self._upper_cuts(out[~active[kept]], coef[~active[kept]], src.const[kept][~active[kept]])
        self.result.neurons.append({
            "layer": len(self.result.neurons), "flat_layer": name, "n": int(lo.size),
            "dead": int(dead.sum()), "active": int(active.sum()),
            "unstable": int((~dead & ~active).sum()), "kept": np.flatnonzero(kept).tolist()})
        rows = np.flatnonzero(kept)
        unit = sp.csr_matrix((np.ones(rows.size), (rows, out)), shape=(lo.size, self.builder.num_vars))
        return Expression(unit, np.zeros(lo.size), src.deviation)  # a ReLU is 1-Lipschitz

    def _upper_cuts(self, outputs: np.ndarray, coef: sp.csr_matrix, const: np.ndarray) -> None:
        """Rows ``h_j − Σ_i max(0, w_ij)·v_i <= max(0, b_j)`` for ReLUs whose inputs are all
        nonnegative variables: true for every input, since ``max(0, b + Σ w v) <= max(0, b)
        + Σ max(0, w) v`` when ``v >= 0``, but missed by big-M's LP relaxation."""
        if outputs.size == 0:
            return
        lb = np.concatenate(self.lb)[:coef.shape[1]]
        negative_input = abs(coef) @ (lb < 0).astype(np.float64) > 0
        rows = np.flatnonzero(~negative_input)
        if rows.size == 0:
            return
        width = self.builder.num_vars
        positive = coef[rows].maximum(0)
        positive.resize((rows.size, width))
        cuts = sp.csr_matrix((np.ones(rows.size), (np.arange(rows.size), outputs[rows])),
                             shape=(rows.size, width)) - positive
        self.builder.add_constraints(cuts, np.arange(width), "<=", np.maximum(const[rows], 0.0))

    def _clip(self, index: int, src: Expression, lo: float, hi: float, layer: int) -> Expression:
        """``lo + relu(v − lo) − relu(v − hi)`` (one part when a side is infinite)."""
        parts: list[tuple[float, Expression]] = []
        base = np.zeros(src.const.size)
        deviation = src.off.copy()  # clip is 1-Lipschitz; each shifted constant may round
        if np.isfinite(lo):
            parts.append((1.0, self._relu(index, src, f"{layer}.lo", shift=lo)))
            base += lo
            deviation += constant_shift_deviation(src.const, lo)
        else:
            parts.append((1.0, src))
        if np.isfinite(hi):
            parts.append((-1.0, self._relu(index, src, f"{layer}.hi", shift=hi)))
            deviation += constant_shift_deviation(src.const, hi)
        width = self.builder.num_vars
        coef = sum(sign * part.widened(width) for sign, part in parts)  # distinct variables: exact
        const = base + sum(sign * part.const for sign, part in parts)  # one nonzero term: exact
        return Expression(sp.csr_matrix(coef), const, _nonzero(deviation))

    def _maxpool(self, index: int, src: Expression, windows: np.ndarray, layer: int) -> Expression:
        """The exact max of each window as a chain ``m ← m + relu(v_k − m)``, starting from
        the input of the highest lower bound (every variable stays a ReLU output, which exact
        verification recomputes): inputs whose upper bound that lower bound reaches are
        dropped, a single survivor is the output itself, and each step's ReLU has its bounds
        (so is dropped when the bounds prove the input never wins)."""
        lo, hi, _, _ = self._layer_bounds(index, src)
        survivors = []
        for window in windows:
            window = window[window >= 0]
            best = window[np.argmax(lo[window])]
            rest = window[(hi[window] > lo[best]) & (window != best)]
            survivors.append([int(best), *rest[np.argsort(-hi[rest], kind="stable")].tolist()])
        n_out = windows.shape[0]
        firsts = np.array([w[0] for w in survivors])
        padded = np.concatenate([src.off, [0.0]])  # the max is 1-Lipschitz in each input
        deviation = padded[windows].max(axis=1)
        current = Expression(src.coef[firsts], src.const[firsts])
        stats = {"flat_layer": layer, "n": n_out, "identity": sum(len(w) == 1 for w in survivors),
                 "inputs": sum(len(w) for w in survivors)}
        for step in range(1, max(len(w) for w in survivors)):
            rows = np.array([i for i, w in enumerate(survivors) if len(w) > step])
            picked = np.array([survivors[i][step] for i in rows])
            width = max(current.coef.shape[1], src.coef.shape[1])
            gather = sp.csr_matrix((np.ones(rows.size), (np.arange(rows.size), rows)),
                                   shape=(rows.size, n_out))
            diff = Expression(sp.csr_matrix(src.widened(width)[picked] - gather @ current.widened(width)),
                              src.const[picked] - current.const[rows])
            # each step is max(m, v) up to its difference's rounding, which adds up along the chain
            deviation[rows] += sum_deviation(src.widened(width)[picked], -(gather @ current.widened(width)),
                                             src.const[picked], -current.const[rows], self._reach(width))
            step_relu = self._relu(-1, diff, f"{layer}.max{step}")
            width = self.builder.num_vars
            current = Expression(sp.csr_matrix(current.widened(width) + gather.T @ step_relu.widened(width)),
                                 current.const)
        self.result.maxpools.append(stats)
        return Expression(current.coef, current.const, _nonzero(deviation))

    def _linear_deviation(self, affine: tuple[sp.csr_matrix, np.ndarray], src: Expression
                          ) -> np.ndarray | None:
        """The deviation of ``matrix @ src + bias``: its own rounding and ``src``'s, carried."""
        matrix, bias = affine
        local = product_deviation(matrix, src.coef, self._reach(src.coef.shape[1]), src.const, bias)
        through = carried(matrix, src.deviation)
        return _nonzero(local if through is None else local + through)

    def _leaky_deviation(self, alpha: float, src: Expression, rect: Expression) -> np.ndarray | None:
        """The deviation of ``α·src + (1−α)·relu(src)``: leaky ReLU is max(1, |α|)-Lipschitz;
        the products ``α·coef``, ``α·const`` and ``(1−α)`` each round once."""
        width = rect.coef.shape[1]
        reach = self._reach(width)
        magnitude = (abs(alpha) * (abs(src.coef) @ reach[:src.coef.shape[1]] + np.abs(src.const))
                     + abs(1.0 - alpha) * (abs(rect.coef) @ reach))
        local = dot_error_bound(1, magnitude) + TINY * float(reach.sum())
        return _nonzero(up(max(1.0, abs(alpha)) * src.off, ops=2) + local)


def _nonzero(deviation: np.ndarray) -> np.ndarray | None:
    """A deviation total (sums of fewer than 2**20 nonnegative float64 terms) raised past
    its own rounding, or None when it is 0 everywhere."""
    return deviation * ACCUMULATED if np.any(deviation) else None


def encode_layers(builder: ProblemBuilder, net: FlatNetwork, inputs: Expression, lb: np.ndarray,
                  ub: np.ndarray, bounds: LayerBounds, *, declare: bool = True,
                  strengthen: bool = True) -> NetworkEncoding:
    """Add ``net``'s layers to ``builder``, its affine input being ``inputs`` over the
    variables already there, whose boxes are ``lb``/``ub`` (e.g. one continuous variable
    per input of a box: a robustness query). No output rows are added: the caller states
    its own over ``result.scores``."""
    if lb.shape != (builder.num_vars,) or ub.shape != (builder.num_vars,):
        raise ValueError(f"lb and ub need one entry per variable already built ({builder.num_vars})")
    return _Encoder(builder, net, inputs, lb, ub, bounds, declare=declare, strengthen=strengthen,
                    max_ones=None).run()


def encode_network(builder: ProblemBuilder, network: MaskedNetwork, bounds: LayerBounds, *,
                   declare: bool = True, strengthen: bool = True,
                   max_ones: int | None = None) -> NetworkEncoding:
    """Add ``network``'s layers and its strict output rows to ``builder``, whose first
    ``network.num_cells`` variables are the cell binaries. ``declare`` off: no bounds
    declared on ReLUs and no neuron dropped (variable boxes still from the bounds);
    ``max_ones``: the mask-size limit the problem imposes, counted in the bounds."""
    n = builder.num_vars
    inputs = Expression(network.inputs.tocsr(), np.zeros(network.net.num_inputs))
    encoder = _Encoder(builder, network.net, inputs, np.zeros(n), np.ones(n), bounds, declare=declare,
                       strengthen=strengthen, max_ones=max_ones, n_cells=network.num_cells)
    result = encoder.run()
    scores = result.scores
    rows = sp.csr_matrix(network.out_rows) @ scores.coef
    rhs = network.out_rhs - network.out_rows @ scores.const
    builder.add_constraints(rows, np.arange(rows.shape[1]), ">", rhs)
    result.row_deviation = encoder.deviation_of_rows(network.out_rows, network.out_rhs, scores)
    return result
