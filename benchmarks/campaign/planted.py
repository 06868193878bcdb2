"""Large campaign instances whose exact optimum is known by construction (issue 19).

Every instance is independent small blocks (each one of ``families.py``'s instances, at most
10 binaries, brute-forced exactly), put side by side, plus *coupling rows* over the
binaries of every block that the concatenation of the blocks' minimisers ``x*`` satisfies,
often with no room to spare. Coupling rows only remove points, so the optimum is at least
the sum of the blocks' optima, and ``x*`` attains it: the sum is the exact optimum (None
when a block is infeasible). The coupling rows keep the instance in one piece (no
component split) and make its LP relaxation work: the certified branch and bound, the
cuts ahead (>= 100 binaries), batched strengthening and the safe LP bounds all see it.

Coupling rows come in the coefficient ranges of ``families.py``: normal, 2^53-scale beside
1, tiny (1e-12), decimal; senses ``>=`` / ``>`` with the right-hand side the exact activity
at ``x*`` rounded (down, or to the float just below for ``>``), or ``==`` rows of
dyadic coefficients whose exact activity at ``x*`` is a float that a float64 sum misses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from families import FAMILIES

from smug_opt import Problem, ProblemBuilder
from smug_opt.exact import float_down
from smug_opt.testing import brute_force

__all__ = ["LARGE_FAMILIES", "Planted", "block_diagonal"]

_BLOCK_FAMILIES = ("near-tie", "wide-range", "decimal", "homogeneous", "empty-duplicate",
                   "real-objective", "relu", "near-tie", "decimal", "relu")
"""Blocks drawn from these (``infeasible`` and ``extreme`` added by the families below)."""


@dataclass(frozen=True)
class Planted:
    """An instance and its exact optimum (None: infeasible), known by construction."""

    problem: Problem
    optimum: Fraction | None
    x: np.ndarray | None  # a minimiser (None: infeasible)


def block_diagonal(blocks: list[Problem]) -> tuple[Problem, np.ndarray]:
    """``blocks`` side by side (no shared variable or row), and each block's first column."""
    offsets = np.cumsum([0] + [b.num_vars for b in blocks])
    n = int(offsets[-1])
    relu_in = sp.block_diag([b.relu_in for b in blocks], format="csr") if any(b.num_relus for b in blocks) \
        else sp.csr_matrix((0, n))
    cat = np.concatenate
    problem = Problem(
        kinds=cat([b.kinds for b in blocks]), lb=cat([b.lb for b in blocks]), ub=cat([b.ub for b in blocks]),
        A=sp.block_diag([b.A for b in blocks], format="csr"), senses=cat([b.senses for b in blocks]),
        rhs=cat([b.rhs for b in blocks]), objective=cat([b.objective for b in blocks]),
        relu_out=cat([b.relu_out + o for b, o in zip(blocks, offsets, strict=False)]).astype(np.int64),
        relu_in=relu_in, relu_const=cat([b.relu_const for b in blocks]),
        relu_lo=cat([b.relu_lo for b in blocks]), relu_hi=cat([b.relu_hi for b in blocks]))
    return problem, offsets[:-1]


def _exact_activity(coefs: np.ndarray, x: np.ndarray) -> Fraction:
    return sum((Fraction(c) for c, v in zip(coefs.tolist(), x.tolist(), strict=True) if v), Fraction(0))


def _below(activity: Fraction, sense: str) -> float:
    """The right-hand side of a ``sense`` row (``>=`` or ``>``) that ``activity`` satisfies
    with the least room a float allows (``> 0`` gets -1e-12, not a subnormal)."""
    rhs = float_down(activity)
    if sense == ">=" or Fraction(rhs) < activity:
        return rhs
    return -1e-12 if rhs == 0 else math.nextafter(rhs, -math.inf)


_KINDS = np.array([0.45, 0.2, 0.1, 0.15, 0.1])
"""How often an instance's coupling rows are normal, decimal, 2^53 beside tiny, all tiny,
``==`` with 2^53 (one kind an instance: 2^53 takes HiGHS's LPs, so the certificate
writer's too, out of their range)."""


def _coupling_row(rng: np.random.Generator, x: np.ndarray, binary: np.ndarray, kind: int,
                  ) -> tuple[np.ndarray, str, float]:
    """One row over the binaries that ``x`` satisfies exactly (see the module docstring)."""
    n = x.size
    cols = np.flatnonzero(binary)
    a = np.zeros(n)
    if kind == 4:  # ==: 2^53 and small integers; the float sum rounds, the rational one holds
        picked = rng.choice(cols, size=min(cols.size, int(rng.integers(3, 12))), replace=False)
        a[picked] = rng.integers(1, 4, picked.size).astype(np.float64)
        big = picked[0]
        a[big] = 2.0**53
        ones = [j for j in picked[1:].tolist() if x[j]]
        act = _exact_activity(a, x)
        if Fraction(float(act)) != act:  # 2^53 + an odd number: make it even (a float)
            a[ones[0]] += 1.0
        return a, "==", float(_exact_activity(a, x))
    a[cols] = rng.normal(size=cols.size)
    if kind == 1:
        a[cols] = np.round(a[cols] * 10) / 10  # decimal
    elif kind == 2:
        a[rng.choice(cols, 2, replace=False)] *= [2.0**53, 1e-12]  # 2^53-scale beside tiny
    elif kind == 3:
        a[cols] *= 1e-12
    a[rng.random(n) < 0.3] = 0.0
    sense = str(rng.choice([">=", ">"]))
    return a, sense, _below(_exact_activity(a, x), sense)


def planted(rng: np.random.Generator, blocks: int, couplings: int, names: tuple[str, ...] = _BLOCK_FAMILIES,
            ) -> Planted:
    """``blocks`` blocks drawn from ``names`` and ``couplings`` coupling rows."""
    parts, optimum, x_star = [], Fraction(0), []
    feasible = True
    for _ in range(blocks):
        while True:  # an infeasible block only where one was asked for
            name = str(rng.choice(list(names)))
            block = FAMILIES[name](rng)
            found = brute_force(block)
            if found.x is not None or name == "infeasible":
                break
        parts.append(block)
        if found.x is None:
            feasible = False
            x_star.append(np.zeros(block.num_vars))
        else:
            optimum += found.objective
            x_star.append(found.x)
    problem, _ = block_diagonal(parts)
    x = np.concatenate(x_star)
    kind = int(rng.choice(_KINDS.size, p=_KINDS))
    rows = [_coupling_row(rng, x, problem.binary, kind) for _ in range(couplings)]
    if rows:
        problem = problem.with_constraints(np.array([a for a, _, _ in rows]), [s for _, s, _ in rows],
                                           np.array([b for _, _, b in rows]))
    return Planted(problem, optimum, x) if feasible else Planted(problem, None, None)


def medium(rng: np.random.Generator) -> Planted:
    """20-40 binaries: 3-6 blocks, 1-3 coupling rows."""
    while True:
        p = planted(rng, int(rng.integers(3, 7)), int(rng.integers(1, 4)))
        if 20 <= int(p.problem.binary.sum()) <= 40:
            return p


def large(rng: np.random.Generator) -> Planted:
    """>= 100 binaries: 14-22 blocks (now and then an infeasible or extreme one), 2-6 coupling rows."""
    names = _BLOCK_FAMILIES + (("infeasible",) if rng.random() < 0.1 else ()) \
        + (("extreme",) if rng.random() < 0.1 else ())
    while True:
        p = planted(rng, int(rng.integers(14, 23)), int(rng.integers(2, 7)), names)
        if int(p.problem.binary.sum()) >= 100:
            return p


def linear(rng: np.random.Generator) -> Planted:
    """>= 100 binaries, no ReLU: 14-22 blocks of rows over binaries, 4-10 coupling rows
    (certification's safe branch-and-bound and its cuts computed ahead take these)."""
    names = ("near-tie", "decimal", "homogeneous", "empty-duplicate", "real-objective", "near-tie")
    while True:
        p = planted(rng, int(rng.integers(14, 23)), int(rng.integers(4, 11)), names)
        if int(p.problem.binary.sum()) >= 100:
            return p


def relu_net(rng: np.random.Generator) -> Planted:
    """ReLU blocks only (tiny networks, the stress-case encoding): 20-60 masks."""
    return planted(rng, int(rng.integers(6, 14)), int(rng.integers(0, 3)), ("relu",))


def first_layer(rng: np.random.Generator) -> Planted:
    """Mask cells of a ``side × side`` image under a first layer of 3×3 windows, several
    channels (rows) per window sharing its support, ``w·(x ⊙ m) > b`` or ``>=``: the
    stride-3 windows are the blocks (their optimum brute-forced, 2^9 each), the windows
    between them coupling rows that the blocks' minimisers satisfy (ties included)."""
    side = int(rng.choice([12, 15]))
    image = rng.uniform(0.0, 1.0, (side, side))
    b = ProblemBuilder()
    masks = b.add_binaries(side * side).reshape(side, side)
    channels = int(rng.integers(2, 5))
    kernels = np.round(rng.normal(size=(channels, 3, 3)) * 16) / 16
    optimum, x = Fraction(0), np.zeros(side * side)
    for r in range(0, side, 3):
        for c in range(0, side, 3):
            cells = masks[r:r + 3, c:c + 3].ravel()
            w = kernels * image[r:r + 3, c:c + 3]
            block = ProblemBuilder()
            m = block.add_binaries(9)
            full = w.reshape(channels, 9) @ np.ones(9)
            senses = list(rng.choice([">", ">="], channels))
            rhs = full * rng.uniform(0.3, 0.9, channels) - np.abs(full) * 0.2
            block.add_constraints(w.reshape(channels, 9), m, senses, rhs)
            block.set_objective(m, 1.0)
            found = brute_force(block.build())
            if found.x is None:  # a window no mask satisfies: keep only what the full one does
                rhs = np.minimum(rhs, np.array([float_down(_exact_activity(row, np.ones(9)))
                                                for row in w.reshape(channels, 9)]))
                senses = [">="] * channels
                block = ProblemBuilder()
                m = block.add_binaries(9)
                block.add_constraints(w.reshape(channels, 9), m, senses, rhs)
                block.set_objective(m, 1.0)
                found = brute_force(block.build())
                assert found.x is not None  # every cell kept satisfies it
            b.add_constraints(w.reshape(channels, 9), cells, senses, rhs)
            optimum += found.objective
            x[cells] = found.x
    for r in range(1, side - 2, 3):
        for c in range(1, side - 2, 3):
            cells = masks[r:r + 3, c:c + 3].ravel()
            w = (kernels * image[r:r + 3, c:c + 3]).reshape(channels, 9)
            senses = list(rng.choice([">", ">="], channels))
            acts = [_exact_activity(row, x[cells]) for row in w]
            rhs = [_below(a, s) for a, s in zip(acts, senses, strict=True)]
            b.add_constraints(w, cells, senses, rhs)
    b.set_objective(masks.ravel(), 1.0)
    return Planted(b.build(), optimum, x)


LARGE_FAMILIES: dict[str, Callable[[np.random.Generator], Planted]] = {
    "planted-20-40": medium, "planted-100+": large, "first-layer": first_layer, "relu-blocks": relu_net,
    "linear-100+": linear,
}
