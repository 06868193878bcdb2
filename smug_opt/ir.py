"""The solver-neutral problem: binary and bounded continuous variables, sparse linear rows
with strict senses, ReLU constraints and a linear objective to minimise.

Every float64 in a :class:`Problem` means the exact rational it represents; backends and
bridges decide how to honour that on their solver, and :mod:`smug_opt.verification` checks it.
A Problem is immutable (read-only arrays and metadata, see :mod:`smug_opt.frozen`), so it
can be cached by identity. Its file format lives in :mod:`smug_opt.problem_file`, which
depends on this module, not the other way round.

The variable kinds, row senses and the array parsing the Problem and its builder share
live in :mod:`smug_opt.problem_arrays` (re-exported here).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.frozen import FrozenMapping, freeze, read_only, read_only_csr
from smug_opt.problem_arrays import (
    Sense,
    Triplets,
    VarKind,
    as_csr,
    checked_vector,
    parse_senses,
    stack_blocks,
    stack_rows,
)

__all__ = ["Problem", "ProblemBuilder", "Sense", "VarKind"]


_MATRICES = ("A", "relu_in")


@dataclass(frozen=True, eq=False)
class Problem:
    """``min objective·x`` subject to linear rows and ``y = max(0, z)`` ReLU constraints.

    Variables are indexed 0..n-1. ``kinds[j]`` is a :class:`VarKind`; a binary variable has
    bounds [0, 1]; a continuous one has finite bounds ``lb[j] <= x[j] <= ub[j]``.

    Rows: ``A[i]·x  senses[i]  rhs[i]`` with ``senses`` codes of :class:`Sense`.
    ReLUs: ``x[relu_out[r]] = max(0, relu_in[r]·x + relu_const[r])``; ``relu_lo``/``relu_hi``
    are valid bounds on the pre-activation (``-inf``/``inf`` when unknown). A ReLU may only
    read binaries, continuous variables that are not ReLU outputs, and outputs of earlier
    ReLUs, so a solution's ReLU outputs can be recomputed exactly in order. Without ReLUs
    ``relu_in`` is empty (0 × n; the default 0 × 0 is widened to that).

    Immutable: every array (``A``'s and ``relu_in``'s data, indices and indptr included)
    is read-only, writable inputs are copied, and ``metadata`` is a :class:`FrozenMapping`
    (its values are not copied deeply: treat them as read-only too).
    """

    kinds: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    A: sp.csr_matrix
    senses: np.ndarray
    rhs: np.ndarray
    objective: np.ndarray
    relu_out: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    relu_in: sp.csr_matrix = field(default_factory=lambda: sp.csr_matrix((0, 0)))
    relu_const: np.ndarray = field(default_factory=lambda: np.zeros(0))
    relu_lo: np.ndarray = field(default_factory=lambda: np.zeros(0))
    relu_hi: np.ndarray = field(default_factory=lambda: np.zeros(0))
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.kinds.shape[0]
        if n == 0:
            raise ValueError("a problem needs at least one variable")
        if self.relu_in.shape == (0, 0):
            object.__setattr__(self, "relu_in", sp.csr_matrix((0, n)))
        self._freeze_fields()
        _validate(self)

    def _freeze_fields(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            frozen: Any
            if f.name == "metadata":
                frozen = value if isinstance(value, FrozenMapping) else FrozenMapping(value)
            elif f.name in _MATRICES:
                if not sp.issparse(value) or value.format != "csr":
                    raise ValueError(f"{f.name} must be a scipy.sparse CSR matrix, "
                                     f"got {type(value).__name__}")
                frozen = read_only_csr(value)
            else:
                frozen = read_only(value)
            object.__setattr__(self, f.name, frozen)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling (a worker receiving the problem) keeps the arrays read-only."""
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self._freeze_fields()

    # ----------------------------------------------------------------- sizes
    @property
    def num_vars(self) -> int:
        return int(self.kinds.shape[0])

    @property
    def num_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def num_relus(self) -> int:
        return int(self.relu_out.shape[0])

    @property
    def binary(self) -> np.ndarray:
        """Boolean mask of the binary variables."""
        return self.kinds == VarKind.BINARY

    @property
    def has_strict(self) -> bool:
        return bool(np.any((self.senses == Sense.LT) | (self.senses == Sense.GT)))

    @property
    def integral_objective(self) -> bool:
        """True when every feasible objective value is an integer (integer costs on binaries)."""
        c = self.objective
        on_cont = c[~self.binary]
        return bool(np.all(on_cont == 0) and np.all(c == np.round(c)))

    def __repr__(self) -> str:
        return (
            f"Problem({self.num_vars} vars ({int(self.binary.sum())} binary), "
            f"{self.num_rows} rows, {self.num_relus} relus, nnz={self.A.nnz})"
        )

    # --------------------------------------------------------- constructors
    @classmethod
    def from_arrays(
        cls,
        A: Any,
        senses: Sequence[str | Sense] | str,
        rhs: Any,
        *,
        objective: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Problem:
        """A problem over 0/1 variables, one per column of ``A`` (dense or scipy.sparse).

        By default the objective minimises the number of ones.
        """
        if not sp.issparse(A):
            A_arr = np.asarray(A, dtype=np.float64)
            if A_arr.size == 0:
                raise ValueError(f"A is empty (shape {A_arr.shape}); give at least one column")
            A = A_arr
        n = A.shape[1] if len(A.shape) == 2 else 0
        if n == 0:
            raise ValueError(f"A must be 2-D with at least one column, got shape {A.shape}")
        builder = ProblemBuilder(metadata=metadata)
        cols = builder.add_binaries(n)
        builder.add_constraints(A, cols, senses, rhs)
        builder.set_objective(cols, np.ones(n) if objective is None else objective)
        return builder.build()

    @property
    def determined_by_binaries(self) -> bool:
        """True when the binaries fix every other variable (all continuous ones are ReLU
        outputs), so a binary assignment is feasible or not on its own."""
        return int(self.num_vars - self.binary.sum()) == self.num_relus

    def with_constraints(
        self, coefficients: Any, senses: Sequence[str | Sense] | str, rhs: Any
    ) -> Problem:
        """A copy with extra rows ``coefficients @ x  senses  rhs`` over all variables."""
        block = as_csr(coefficients, "constraint coefficients", n_cols=self.num_vars)
        m = block.shape[0]
        return replace(
            self,
            A=sp.vstack([self.A, block], format="csr"),
            senses=freeze(np.concatenate([self.senses, parse_senses(senses, m)])),
            rhs=freeze(np.concatenate([self.rhs, checked_vector(rhs, m, "rhs")])),
        )

    def with_metadata(self, **items: Any) -> Problem:
        """A copy whose metadata is updated with ``items``."""
        return replace(self, metadata={**self.metadata, **items})


def _all_codes(values: np.ndarray, codes: type[enum.IntEnum]) -> bool:
    """Whether every entry of ``values`` is one of ``codes`` (``np.isin``'s answer, without
    its sorting: ~0.3 ms a call, half of validating a small problem)."""
    ok = np.zeros(values.shape, dtype=bool)
    for code in codes:
        ok |= values == code
    return bool(ok.all())


def _validate(p: Problem) -> None:
    n = p.num_vars
    if p.lb.shape != (n,) or p.ub.shape != (n,) or p.objective.shape != (n,):
        raise ValueError("lb, ub and objective must each have one entry per variable")
    if not _all_codes(p.kinds, VarKind):
        raise ValueError("kinds must be VarKind codes")
    bin_ = p.kinds == VarKind.BINARY
    if np.any(p.lb[bin_] != 0) or np.any(p.ub[bin_] != 1):
        raise ValueError("binary variables must have bounds [0, 1]")
    cont = ~bin_
    if not (np.all(np.isfinite(p.lb[cont])) and np.all(np.isfinite(p.ub[cont]))):
        raise ValueError("continuous variables need finite bounds")
    if np.any(p.lb > p.ub):
        j = int(np.flatnonzero(p.lb > p.ub)[0])
        raise ValueError(f"variable {j} has lb {p.lb[j]!r} > ub {p.ub[j]!r}")
    if not np.all(np.isfinite(p.objective)):
        raise ValueError("objective contains NaN or inf")
    m = p.A.shape[0]
    if p.A.shape[1] != n:
        raise ValueError(f"A has {p.A.shape[1]} columns but the problem has {n} variables")
    if p.senses.shape != (m,) or p.rhs.shape != (m,):
        raise ValueError(f"senses and rhs need one entry per row ({m})")
    if not _all_codes(p.senses, Sense):
        raise ValueError("senses must be Sense codes")
    if not np.all(np.isfinite(p.rhs)):
        raise ValueError("rhs contains NaN or inf")
    r = p.relu_out.shape[0]
    if p.relu_in.shape != (r, n) or p.relu_const.shape != (r,):
        raise ValueError(f"relu_in must be ({r}, {n}) and relu_const ({r},)")
    if p.relu_lo.shape != (r,) or p.relu_hi.shape != (r,):
        raise ValueError(f"relu_lo and relu_hi need one entry per relu ({r})")
    if r == 0:
        return
    if np.any((p.relu_out < 0) | (p.relu_out >= n)):
        raise ValueError("relu_out indexes a variable that does not exist")
    if np.unique(p.relu_out).size != r:
        raise ValueError("a variable is the output of more than one relu")
    if np.any(p.kinds[p.relu_out] != VarKind.CONTINUOUS):
        raise ValueError("relu outputs must be continuous variables")
    if not np.all(np.isfinite(p.relu_const)):
        raise ValueError("relu_const contains NaN or inf")
    # each relu may read only outputs of earlier relus (exact completion order)
    position = np.full(n, -1)
    position[p.relu_out] = np.arange(r)
    coo = p.relu_in.tocoo()
    reads = position[coo.col]
    if np.any((reads >= 0) & (reads >= coo.row)):
        bad = int(coo.row[(reads >= 0) & (reads >= coo.row)][0])
        raise ValueError(f"relu {bad} reads the output of itself or of a later relu")


class ProblemBuilder:
    """Vectorised construction of a :class:`Problem`, block by block.

    >>> b = ProblemBuilder()
    >>> m = b.add_binaries(3)
    >>> b.add_constraints([[1.0, -2.0, 0.5]], m, ">", 0.0)
    >>> b.set_objective(m, 1.0)
    >>> p = b.build()
    """

    def __init__(self, metadata: Mapping[str, Any] | None = None) -> None:
        self._kinds: list[np.ndarray] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._rows: list[tuple[Triplets, np.ndarray, np.ndarray]] = []
        self._relus: list[tuple[np.ndarray, Triplets, np.ndarray, np.ndarray, np.ndarray]] = []
        self._objective_blocks: list[tuple[np.ndarray, np.ndarray]] = []
        self._n = 0
        self.metadata: dict[str, Any] = dict(metadata or {})

    @property
    def num_vars(self) -> int:
        return self._n

    def _add_vars(self, count: int, kind: VarKind, lb: Any, ub: Any) -> np.ndarray:
        if count < 0:
            raise ValueError(f"cannot add {count} variables")
        idx = np.arange(self._n, self._n + count, dtype=np.int64)
        self._kinds.append(np.full(count, kind, dtype=np.int8))
        self._lb.append(checked_vector(lb, count, "lb", allow_inf=True))
        self._ub.append(checked_vector(ub, count, "ub", allow_inf=True))
        self._n += count
        return idx

    def add_binaries(self, count: int) -> np.ndarray:
        """Add ``count`` 0/1 variables; returns their indices."""
        return self._add_vars(count, VarKind.BINARY, 0.0, 1.0)

    def add_continuous(self, count: int, lb: Any, ub: Any) -> np.ndarray:
        """Add ``count`` continuous variables with finite bounds; returns their indices."""
        lbv = checked_vector(lb, count, "lb")
        ubv = checked_vector(ub, count, "ub")
        return self._add_vars(count, VarKind.CONTINUOUS, lbv, ubv)

    def _check_vars(self, variables: Any) -> np.ndarray:
        idx = np.asarray(variables, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self._n):
            raise ValueError(f"variable index out of range 0..{self._n - 1}")
        return idx

    def _block(self, coefficients: Any, variables: Any, name: str) -> Triplets:
        idx = self._check_vars(variables)
        block = as_csr(coefficients, name, n_cols=idx.size).tocoo()
        return Triplets(block.row, idx[block.col], block.data, block.shape[0])

    def add_constraints(
        self,
        coefficients: Any,
        variables: Any,
        senses: Sequence[str | Sense] | str | Sense,
        rhs: Any,
    ) -> None:
        """Add rows ``coefficients @ x[variables]  senses  rhs`` (one row per line)."""
        block = self._block(coefficients, variables, "constraint coefficients")
        m = block.nrows
        codes = parse_senses(senses, m)
        self._rows.append((block, codes, checked_vector(rhs, m, "rhs")))

    def add_relus(
        self,
        outputs: Any,
        coefficients: Any,
        variables: Any,
        const: Any = 0.0,
        *,
        lo: Any = -np.inf,
        hi: Any = np.inf,
    ) -> None:
        """Add ``x[outputs[r]] = max(0, coefficients[r] @ x[variables] + const[r])``.

        ``lo``/``hi`` are known valid bounds on each pre-activation (tighter bounds make
        MILP lowerings faster; they must never cut off a feasible point).
        """
        out = self._check_vars(outputs)
        block = self._block(coefficients, variables, "relu coefficients")
        r = out.size
        if block.nrows != r:
            raise ValueError(f"{block.nrows} relu rows for {r} outputs")
        lov = checked_vector(lo, r, "relu lo", allow_inf=True)
        hiv = checked_vector(hi, r, "relu hi", allow_inf=True)
        if np.any(lov > hiv):
            raise ValueError("a relu has lo > hi")
        self._relus.append((out, block, checked_vector(const, r, "relu const"), lov, hiv))

    def set_objective(self, variables: Any, coefficients: Any) -> None:
        """Set objective coefficients (minimised) of ``variables``; others stay 0."""
        idx = self._check_vars(variables)
        self._objective_blocks.append((idx, checked_vector(coefficients, idx.size, "objective")))

    def build(self) -> Problem:
        """Freeze everything added so far into a validated :class:`Problem`."""
        n = self._n
        if n == 0:
            raise ValueError("a problem needs at least one variable")
        kinds = np.concatenate(self._kinds)
        lb = np.concatenate(self._lb)
        ub = np.concatenate(self._ub)
        objective = np.zeros(n)
        for idx, coef in self._objective_blocks:
            objective[idx] = coef
        A, senses, rhs = stack_rows(
            [b for b, _, _ in self._rows], [s for _, s, _ in self._rows],
            [r for _, _, r in self._rows], n,
        )
        if self._relus:
            outs = np.concatenate([o for o, *_ in self._relus])
            relu_in = stack_blocks([b for _, b, *_ in self._relus], n)
            const = np.concatenate([c for _, _, c, _, _ in self._relus])
            lo = np.concatenate([lo for *_, lo, _ in self._relus])
            hi = np.concatenate([hi for *_, hi in self._relus])
        else:
            outs, relu_in = np.zeros(0, dtype=np.int64), sp.csr_matrix((0, n))
            const, lo, hi = np.zeros(0), np.zeros(0), np.zeros(0)
        return Problem(
            kinds=freeze(kinds), lb=freeze(lb), ub=freeze(ub), A=A,
            senses=freeze(senses), rhs=freeze(rhs), objective=freeze(objective),
            relu_out=freeze(outs), relu_in=relu_in, relu_const=freeze(const),
            relu_lo=freeze(lo), relu_hi=freeze(hi), metadata=dict(self.metadata),
        )
