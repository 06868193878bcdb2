"""LP tightening of masked ReLU network bounds, rigorous by safe duals.

:class:`RelaxationLP` is the LP relaxation of a masked ReLU MLP (big-M with relaxed phase
variables, plus the output rows and a mask-size row) over given pre-activation bounds; one
LP per neuron and side bounds a pre-activation, and the bound kept is not the solver's
(tolerance-laden) value but the safe dual bound of Neumaier and Shcherbina (2004),
evaluated with outward error bounds (:func:`safe_min`): valid whatever the solver returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from smug_opt.backend import LpSolver
from smug_opt.exact import TINY, UNIT_ROUNDOFF
from smug_opt.ir import Problem, Sense

__all__ = ["LP_SECONDS", "DualParts", "RelaxationLP", "box_bound", "dual_parts", "dual_parts_by_block",
           "lp_solver", "row_range", "safe_dual_bound", "safe_min", "sense_range"]

LP_SECONDS = 5.0
"""Time limit of each bound LP; one that hits it keeps the bound it had."""

class RelaxationLP:
    """The LP relaxation of the masked network, solved for one bound at a time by the LP
    solver a backend provides (``lp_backend``; None: the first usable one declaring
    ``capabilities.lp``, see :func:`lp_solver`).

    Columns: ``M`` (the binaries), then per hidden layer ``z`` (pre-activations, within
    their bounds), ``h`` (outputs) and ``a`` (phase, relaxed to [0, 1], one per unstable
    neuron). Rows: ``z = A·input + b``; per unstable neuron ``h >= z``,
    ``h <= z − l(1 − a)``, ``h <= u·a``, ``h <= max(0, b) + Σ max(0, w)·input``; per active
    one ``h = z``; the output rows; the mask-size row if any. Every
    coefficient is a given float (no arithmetic), so the LP is a true relaxation.
    ``seconds`` limits the first solve (``feasible`` is False if it runs out).
    """

    def __init__(self, A1: np.ndarray, b1: np.ndarray, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                 lo: Sequence[np.ndarray], hi: Sequence[np.ndarray],
                 out_rows: np.ndarray, out_rhs: np.ndarray, max_ones: int | None,
                 lp_backend: str | None = None, seconds: float = float("inf")) -> None:
        row_lo: list[np.ndarray] = []
        row_hi: list[np.ndarray] = []
        col_lb: list[np.ndarray] = [np.zeros(A1.shape[0])]
        col_ub: list[np.ndarray] = [np.ones(A1.shape[0])]
        self._z_cols: list[np.ndarray] = []
        n = A1.shape[0]
        prev = np.arange(n)  # columns of the previous layer's outputs (first: the binaries)
        inputs = [(A1, b1), *layers]
        triplets: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        n_rows = 0

        def add_rows(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, count: int,
                     rlo: np.ndarray, rhi: np.ndarray) -> None:
            nonlocal n_rows
            triplets.append((rows + n_rows, cols, vals))
            row_lo.append(rlo)
            row_hi.append(rhi)
            n_rows += count

        for k, (W, b) in enumerate(inputs):
            width = W.shape[1]
            lk, uk = lo[k], hi[k]
            z = n + np.arange(width)
            h = z + width
            unstable = np.flatnonzero((lk < 0) & (uk > 0))
            a = n + 2 * width + np.arange(unstable.size)
            n += 2 * width + unstable.size
            col_lb += [lk, np.maximum(lk, 0.0), np.zeros(unstable.size)]
            col_ub += [uk, np.maximum(uk, 0.0), np.ones(unstable.size)]
            self._z_cols.append(z)
            # z - Wᵀ·prev = b
            w = sp.coo_matrix(W.T)
            add_rows(np.concatenate([np.arange(width), w.row]), np.concatenate([z, prev[w.col]]),
                     np.concatenate([np.ones(width), -w.data]), width, b, b)
            # active: h - z = 0 ; dead: h fixed to 0 by its bounds
            act = np.flatnonzero(lk >= 0)
            r = np.arange(act.size)
            add_rows(np.concatenate([r, r]), np.concatenate([h[act], z[act]]),
                     np.concatenate([np.ones(act.size), -np.ones(act.size)]), act.size,
                     np.zeros(act.size), np.zeros(act.size))
            m = unstable.size
            r = np.arange(m)
            hu, zu, lu, uu = h[unstable], z[unstable], lk[unstable], uk[unstable]
            inf = np.full(m, np.inf)
            add_rows(np.concatenate([r, r]), np.concatenate([hu, zu]),
                     np.concatenate([np.ones(m), -np.ones(m)]), m, np.zeros(m), inf)  # h - z >= 0
            add_rows(np.concatenate([r, r, r]), np.concatenate([hu, zu, a]),
                     np.concatenate([np.ones(m), -np.ones(m), -lu]), m, -inf, -lu)  # h - z - l a <= -l
            add_rows(np.concatenate([r, r]), np.concatenate([hu, a]),
                     np.concatenate([np.ones(m), -uu]), m, -inf, np.zeros(m))  # h - u a <= 0
            # h - Σ max(0, w)·prev <= max(0, b): true for nonnegative inputs, missed by big-M
            pos = sp.coo_matrix(np.maximum(W[:, unstable], 0.0).T)
            add_rows(np.concatenate([r, pos.row]), np.concatenate([hu, prev[pos.col]]),
                     np.concatenate([np.ones(m), -pos.data]), m, -inf, np.maximum(b[unstable], 0.0))
            prev = h
        d = sp.coo_matrix(out_rows)
        add_rows(d.row, prev[d.col], d.data, out_rows.shape[0], out_rhs, np.full(out_rows.shape[0], np.inf))
        if max_ones is not None:
            m = A1.shape[0]
            add_rows(np.zeros(m, dtype=np.int64), np.arange(m), np.ones(m), 1,
                     np.array([-np.inf]), np.array([float(max_ones)]))

        rows = np.concatenate([t[0] for t in triplets])
        cols = np.concatenate([t[1] for t in triplets])
        vals = np.concatenate([t[2] for t in triplets])
        self.A = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n))
        self.row_lo = np.concatenate(row_lo)
        self.row_hi = np.concatenate(row_hi)
        self.col_lb = np.concatenate(col_lb)
        self.col_ub = np.concatenate(col_ub)
        self._abs_At = abs(self.A).T.tocsr()
        self._At = self.A.T.tocsr()
        self._lp = lp_solver(lp_backend)
        self.feasible = self._lp.load(self.A, self.row_lo, self.row_hi, self.col_lb, self.col_ub, seconds)

    def bound(self, layer: int, neuron: int, *, maximise: bool, seconds: float = LP_SECONDS
              ) -> tuple[float, bool]:
        """A rigorous bound on ``z[layer][neuron]`` (upper if ``maximise``) and whether the
        LP answered within ``seconds`` (when it did not, the returned bound is the column's own)."""
        col = int(self._z_cols[layer][neuron])
        sign = -1.0 if maximise else 1.0
        y = self._lp.minimize(col, sign, seconds)
        fallback = float(self.col_ub[col] if maximise else self.col_lb[col])
        if y is None:
            return fallback, False
        c = np.zeros(self.A.shape[1])
        c[col] = sign
        safe = safe_min(c, self._At, self._abs_At, self.row_lo, self.row_hi, self.col_lb, self.col_ub, y)
        value = -safe if maximise else safe
        return (min(value, fallback), True) if maximise else (max(value, fallback), True)


def lp_solver(backend: str | None = None) -> LpSolver:
    """The LP solver ``backend`` provides (:meth:`smug_opt.backend.Backend.lp_solver`);
    None: the first usable backend, by name, that declares ``capabilities.lp``. ImportError
    when it is not usable here, ValueError when it provides none."""
    from smug_opt.registry import backend_class, backend_declaring

    try:
        cls = backend_declaring("LP bounds", "lp") if backend is None else backend_class(backend)
        solver = cls.lp_solver()
    except (ImportError, RuntimeError, ValueError) as error:
        which = "a backend" if backend is None else f"backend {backend!r}"
        raise ImportError(f"LP bounds solve their LPs with {which}, which is not usable here "
                          f"({error}); install it or use bounds without LPs ('crown', 'interval')"
                          ) from error
    if solver is None:
        raise ValueError(f"backend {backend!r} provides no LP solver for LP bounds")
    return solver


def row_range(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``(lower, upper)`` activity limits, strict rows as non-strict (±inf where
    a side is free): the rows of ``problem``'s LP relaxation."""
    return sense_range(problem.senses, problem.rhs)


def sense_range(senses: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`row_range` of rows given by their ``senses`` and right-hand sides ``rhs``."""
    at_least = (senses == Sense.GE) | (senses == Sense.GT) | (senses == Sense.EQ)  # not np.isin: it sorts
    at_most = (senses == Sense.LE) | (senses == Sense.LT) | (senses == Sense.EQ)
    return np.where(at_least, rhs, -np.inf), np.where(at_most, rhs, np.inf)


def safe_min(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
              row_hi: np.ndarray, col_lb: np.ndarray, col_ub: np.ndarray, y: np.ndarray) -> float:
    """A rigorous lower bound on ``min c·v`` s.t. ``row_lo <= A v <= row_hi``,
    ``col_lb <= v <= col_ub`` (finite), from any multipliers ``y`` (Neumaier–Shcherbina).
    :func:`safe_dual_bound` without the reduced costs."""
    return safe_dual_bound(c, At, abs_At, row_lo, row_hi, col_lb, col_ub, y)[0]


def safe_dual_bound(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
                    row_hi: np.ndarray, col_lb: np.ndarray, col_ub: np.ndarray, y: np.ndarray
                    ) -> tuple[float, np.ndarray]:
    """:func:`safe_min`'s bound ``F`` and the float reduced costs ``r = c − Aᵀy`` it used.

    ``c·v = yᵀ(Av) + rᵀv`` with ``r = c − Aᵀy``; each part is bounded below over the rows'
    and the columns' ranges, and the float64 rounding of every step is subtracted. ``F``
    is below the real sum ``T = Σ y_i·side_i + Σ_j min(r_j·lb_j, r_j·ub_j) − Σ_j e_j·
    max(|lb_j|, |ub_j|)`` (``e_j`` bounding ``r_j``'s own rounding), so narrowing a column
    whose bounds are [0, 1] to the side its ``r_j`` opposes raises ``T`` by exactly
    ``|r_j|`` (reduced-cost fixing, :mod:`smug_opt.safe_search`).
    """
    parts = dual_parts(c, At, abs_At, row_lo, row_hi, y)
    return float(box_bound(parts, col_lb, col_ub)), parts.r


@dataclass(frozen=True)
class DualParts:
    """What :func:`safe_dual_bound` computes from the multipliers alone, before the column
    box enters: ``Σ y_i·side_i`` (float sum), ``Σ |y_i·side_i|``, the number of row terms,
    the float reduced costs ``r`` and the bounds ``e`` on their rounding errors. Kept, they
    bound ``c·v`` rigorously over any later box (:func:`box_bound`; dual proofs)."""

    row_sum: float
    row_abs: float
    rows: int
    r: np.ndarray
    r_err: np.ndarray


def dual_parts(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
               row_hi: np.ndarray, y: np.ndarray) -> DualParts:
    """The box-independent parts of :func:`safe_dual_bound` for multipliers ``y``."""
    row_terms, r, r_err = _dual_terms(c, At, abs_At, row_lo, row_hi, y)
    return DualParts(float(row_terms.sum()), float(np.abs(row_terms).sum()), row_terms.size, r, r_err)


def dual_parts_by_block(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
                        row_hi: np.ndarray, y: np.ndarray, row_starts: np.ndarray, col_starts: np.ndarray
                        ) -> list[DualParts]:
    """:func:`dual_parts` of each diagonal block of a block-diagonal ``A`` (block ``k``: rows
    ``row_starts[k]:row_starts[k + 1]``, columns ``col_starts[k]:col_starts[k + 1]``), each
    equal to :func:`dual_parts` of that block alone, bit for bit, from one pass over ``A``."""
    row_terms, r, r_err = _dual_terms(c, At, abs_At, row_lo, row_hi, y)
    out = []
    for k in range(row_starts.size - 1):
        terms = row_terms[row_starts[k]:row_starts[k + 1]]
        cols = slice(col_starts[k], col_starts[k + 1])
        out.append(DualParts(float(terms.sum()), float(np.abs(terms).sum()), terms.size,
                             r[cols], r_err[cols]))
    return out


def _dual_terms(c: np.ndarray, At: sp.csr_matrix, abs_At: sp.csr_matrix, row_lo: np.ndarray,
                row_hi: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row terms ``y_i·side_i``, the float reduced costs and their rounding-error bounds."""
    # a multiplier may only lean on a finite side of its row
    y = np.where((y > 0) & ~np.isfinite(row_lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(row_hi), 0.0, y)
    side = np.where(y > 0, row_lo, np.where(y < 0, row_hi, 0.0))
    row_terms = y * side
    r = c - At @ y
    terms = np.diff(At.indptr) + 2
    r_err = 2.0 * terms * UNIT_ROUNDOFF * (np.abs(c) + abs_At @ np.abs(y)) + terms * TINY
    return row_terms, r, r_err


def box_bound(parts: DualParts, col_lb: np.ndarray, col_ub: np.ndarray) -> np.ndarray:
    """:func:`safe_dual_bound`'s ``F`` over the box ``[col_lb, col_ub]``; ``parts.r`` and
    ``parts.r_err`` may stack several multipliers' parts as rows (``row_sum``, ``row_abs``
    then arrays of their length), giving one bound each."""
    col_terms = np.minimum(parts.r * col_lb, parts.r * col_ub)
    col_err = parts.r_err * np.maximum(np.abs(col_lb), np.abs(col_ub))
    total = parts.row_sum + col_terms.sum(axis=-1)
    n_terms = parts.rows + col_terms.shape[-1]
    err = (2.0 * (n_terms + 2) * UNIT_ROUNDOFF * (parts.row_abs + np.abs(col_terms).sum(axis=-1))
           + col_err.sum(axis=-1) * (1.0 + 4.0 * n_terms * UNIT_ROUNDOFF) + (n_terms + 2) * TINY)
    return total - err
