"""What strengthening takes and gives: which :class:`Pieces` run, the independent
:class:`Part` problems, and the :class:`Strengthened` outcome that maps their solutions
back to the original variables. :mod:`smug_opt.strengthen.presolve` computes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

import numpy as np

from smug_opt.ir import Problem

__all__ = ["Part", "Pieces", "Strengthened"]


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
class Part:
    """One independent problem. Its variables are the original variables ``columns``
    followed by ``carried``: cells fixed on that rows of the part read, kept with a row
    ``x >= 1`` and cost 0 (moving them into the right-hand side would round it)."""

    problem: Problem
    columns: np.ndarray
    carried: np.ndarray


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
