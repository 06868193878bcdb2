"""What strengthening takes and gives: which :class:`Pieces` run, the independent
:class:`Part` problems, and the :class:`Strengthened` outcome that maps their solutions
back to the original variables. :mod:`smug_opt.strengthen.presolve` computes them."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from smug_opt.frozen import freeze
from smug_opt.ir import Problem
from smug_opt.problem_arrays import VarKind

__all__ = ["Part", "PartMatrix", "Pieces", "Strengthened"]


@dataclass(frozen=True)
class Pieces:
    """Which pieces of the strengthening run (all by default)."""

    fixings: bool = True
    cuts: bool = True
    tables: bool = True
    implied: bool = True
    integer_rows: bool = True
    components: bool = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def parse(cls, text: str) -> Pieces:
        """``"all"``, ``"none"`` or piece names separated by commas (the ones to run)."""
        text = text.strip()
        if text == "all":
            return cls()
        chosen = set() if text == "none" else {t.strip() for t in text.split(",") if t.strip()}
        unknown = chosen - set(cls.names())
        if unknown:
            raise ValueError(f"unknown strengthening piece(s) {', '.join(sorted(unknown))}; "
                             f"choose from {', '.join(cls.names())}, 'all' or 'none'")
        return cls(**{name: name in chosen for name in cls.names()})

    def enabled(self) -> tuple[str, ...]:
        return tuple(name for name in self.names() if getattr(self, name))


@dataclass(frozen=True)
class PartMatrix:
    """A part problem over 0/1 variables as arrays, before a :class:`~smug_opt.ir.Problem`
    is built from them: its matrix in CSR form (entries sorted by column within each row),
    its rows' senses and right-hand sides and its objective. The safe LP bound reads these
    alone: building a ``Problem`` per part (validation, read-only copies) cost more than the
    bound's LP over all parts (paper-scale k1000-s0: 98 parts)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    senses: np.ndarray
    rhs: np.ndarray
    objective: np.ndarray
    metadata: Mapping[str, Any]
    kind_dtype: np.dtype  # the dtype of the built problem's ``kinds``

    @classmethod
    def of(cls, problem: Problem) -> PartMatrix:
        """The arrays of ``problem`` (0/1 variables only)."""
        if not bool(problem.binary.all()) or problem.num_relus:
            raise ValueError("a PartMatrix holds problems over 0/1 variables only")
        A = problem.A
        return cls(A.indptr, A.indices, A.data, problem.senses, problem.rhs, problem.objective,
                   problem.metadata, problem.kinds.dtype)

    @property
    def num_rows(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def num_vars(self) -> int:
        return int(self.objective.size)

    @property
    def integral_objective(self) -> bool:
        """:attr:`~smug_opt.ir.Problem.integral_objective` (every variable is binary)."""
        return bool(np.all(self.objective == np.round(self.objective)))

    def build(self) -> Problem:
        """The part's :class:`~smug_opt.ir.Problem`."""
        n = self.num_vars
        A = sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.num_rows, n))
        for name in ("data", "indices", "indptr"):  # read-only arrays of its own: Problem keeps A as it is
            a = getattr(A, name)
            a = a if a.flags.owndata else a.copy()
            a.setflags(write=False)
            setattr(A, name, a)
        empty = sp.csr_matrix((np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)),
                              shape=(0, n))
        return Problem(kinds=freeze(np.full(n, VarKind.BINARY, dtype=self.kind_dtype)),
                       lb=freeze(np.zeros(n)), ub=freeze(np.ones(n)), A=A, senses=self.senses,
                       rhs=self.rhs, objective=self.objective, relu_in=empty, metadata=dict(self.metadata))


@dataclass(frozen=True)
class Part:
    """One independent problem. Its variables are the original variables ``columns``
    followed by ``carried``: cells fixed on that rows of the part read, kept with a row
    ``x >= 1`` and cost 0 (moving them into the right-hand side would round it).

    ``source`` is the part's problem, or its :class:`PartMatrix` from which :attr:`problem`
    is built on first use (the safe LP bound needs only the arrays)."""

    source: Problem | PartMatrix
    columns: np.ndarray
    carried: np.ndarray

    @functools.cached_property
    def problem(self) -> Problem:
        return self.source if isinstance(self.source, Problem) else self.source.build()

    @property
    def matrix(self) -> PartMatrix:
        """The part's arrays."""
        return self.source if isinstance(self.source, PartMatrix) else PartMatrix.of(self.source)


@dataclass(frozen=True)
class Strengthened:
    """The outcome of :func:`strengthen`: parts to solve and how to put answers together.

    ``fixed[j]`` is -1 for a cell left to the parts, else its fixed value. ``applied``
    False means the problem is handed on unchanged (one part: the original), with the
    reason in ``stats["note"]``.
    """

    original: Problem
    parts: tuple[Part, ...]
    fixed: np.ndarray
    applied: bool
    stats: Mapping[str, Any] = field(default_factory=dict)

    @property
    def offset(self) -> Fraction:
        """The exact cost of the cells fixed on."""
        return sum((Fraction(float(c)) for c in self.original.objective[self.fixed == 1]),
                   Fraction(0))

    def expand(self, solutions: Sequence[np.ndarray]) -> np.ndarray:
        """The original problem's assignment from one solution per part."""
        if len(solutions) != len(self.parts):
            raise ValueError(f"got {len(solutions)} part solutions for {len(self.parts)} parts")
        x = np.where(self.fixed == 1, 1.0, 0.0)
        for part, values in zip(self.parts, solutions, strict=True):
            x[part.columns] = np.asarray(values, dtype=np.float64)[:part.columns.size]
        return x
