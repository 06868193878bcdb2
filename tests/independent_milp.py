"""A counterexample search that shares nothing with smug-opt's bounds or encoders, to hold
``unsat`` and "robust" claims to: a chain of linear, ReLU and max-pooling layers
(:mod:`flat_nets`) as a MILP with big-Ms from plain interval arithmetic (widened), solved by
SciPy's HiGHS, and the point it finds re-run in exact rational arithmetic
(:func:`flat_nets.exact_forward`). Only an exactly confirmed point counts: a float answer
that misses one makes no claim, so a check built on it can fail on a real counterexample only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from flat_nets import exact_forward
from scipy.optimize import Bounds, LinearConstraint, milp

from smug_opt.network.flat import FlatNetwork
from smug_opt.vnnlib import Conjunct


class _Model:
    """Columns, bounds and rows of the MILP being built."""

    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integer: list[int] = []
        self.rows: list[dict[int, float]] = []
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []

    def columns(self, lo: np.ndarray, hi: np.ndarray, integer: bool = False) -> np.ndarray:
        start = len(self.lb)
        self.lb += list(map(float, lo))
        self.ub += list(map(float, hi))
        self.integer += [int(integer)] * len(lo)
        return np.arange(start, len(self.lb))

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        self.rows.append(terms)
        self.row_lo.append(lo)
        self.row_hi.append(hi)

    def solve(self, objective: int) -> np.ndarray | None:
        n = len(self.lb)
        A = np.zeros((len(self.rows), n))
        for i, terms in enumerate(self.rows):
            for j, v in terms.items():
                A[i, j] += v
        c = np.zeros(n)
        c[objective] = 1.0
        res = milp(c, constraints=LinearConstraint(A, self.row_lo, self.row_hi), integrality=self.integer,
                   bounds=Bounds(self.lb, self.ub), options={"time_limit": 60, "mip_rel_gap": 0})
        return res.x


def _widen(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pad = 1e-6 * (1.0 + np.abs(lo) + np.abs(hi))
    return lo - pad, hi + pad


def _encode(m: _Model, net: FlatNetwork, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The network over the box ``lo``..``hi`` (identity preprocessing): the input columns
    and the output columns."""
    x = m.columns(lo, hi)
    cols, los, his = [x], [lo.astype(float)], [hi.astype(float)]
    for layer in net.layers[1:]:
        src, below, above = cols[layer.inputs[0]], los[layer.inputs[0]], his[layer.inputs[0]]
        if layer.kind == "linear":
            W, b = layer.matrix.toarray(), layer.bias
            pos, neg = np.maximum(W, 0), np.minimum(W, 0)
            low, high = _widen(pos @ below + neg @ above + b, pos @ above + neg @ below + b)
            z = m.columns(low, high)
            for r in range(W.shape[0]):
                terms = {int(src[c]): float(W[r, c]) for c in np.flatnonzero(W[r])}
                m.row({z[r]: -1.0, **terms}, -b[r], -b[r])
        elif layer.kind == "relu":
            low, high = np.maximum(below, 0.0), np.maximum(above, 0.0)
            z = m.columns(low, high)
            d = m.columns(np.zeros(len(low)), np.ones(len(low)), integer=True)
            for r in range(len(low)):
                m.row({z[r]: 1.0, int(src[r]): -1.0}, 0.0, np.inf)  # y >= z
                m.row({z[r]: 1.0, int(src[r]): -1.0, d[r]: -below[r]}, -np.inf, -below[r])  # y <= z - l(1-d)
                m.row({z[r]: 1.0, d[r]: -high[r]}, -np.inf, 0.0)  # y <= u d
        elif layer.kind == "maxpool":
            windows = [[int(i) for i in w if i >= 0] for w in layer.pool_windows]
            low = np.array([below[w].max() for w in windows])
            high = np.array([above[w].max() for w in windows])
            z = m.columns(low, high)
            for r, w in enumerate(windows):
                d = m.columns(np.zeros(len(w)), np.ones(len(w)), integer=True)
                m.row({int(k): 1.0 for k in d}, 1.0, 1.0)
                for i, k in zip(w, d, strict=True):
                    span = high[r] - below[i]
                    m.row({z[r]: 1.0, int(src[i]): -1.0}, 0.0, np.inf)  # y >= x_i
                    m.row({z[r]: 1.0, int(src[i]): -1.0, int(k): span}, -np.inf, span)  # y <= x_i if chosen
        else:
            raise NotImplementedError(f"layer kind {layer.kind}")
        cols.append(z)
        los.append(low)
        his.append(high)
    return x, cols[-1]


def _holds_exactly(d: Conjunct, y: list[Fraction]) -> bool:
    for row, rhs, strict in zip(d.matrix, d.rhs, d.strict, strict=True):
        lhs = sum((Fraction(float(a)) * v for a, v in zip(row, y, strict=True) if a), Fraction(0))
        if not (lhs < Fraction(float(rhs)) if strict else lhs <= Fraction(float(rhs))):
            return False
    return True


def counterexample(net: FlatNetwork, lo: np.ndarray, hi: np.ndarray, region: tuple[Conjunct, ...]
                   ) -> np.ndarray | None:
    """A point of ``lo``..``hi`` whose exact outputs lie in one of ``region``'s disjuncts, the
    one minimising the disjunct's largest row excess by the MILP, or None when the MILP
    finds none that exact arithmetic confirms."""
    for d in region:
        m = _Model()
        x, out = _encode(m, net, np.asarray(lo, float), np.asarray(hi, float))
        s = m.columns(np.array([-1e6]), np.array([1e6]))[0]
        for row, rhs in zip(d.matrix, d.rhs, strict=True):  # s >= row·y - rhs
            terms = {int(out[j]): float(a) for j, a in enumerate(row) if a}
            m.row({**terms, int(s): -1.0}, -np.inf, float(rhs))
        found = m.solve(int(s))
        if found is None or found[s] > 1e-9:
            continue
        point = np.clip(found[x], lo, hi)
        if _holds_exactly(d, exact_forward(net, point)[-1]):
            return point
    return None
