"""The parameters of the SMUG method, one frozen value shared by every entry point.

``explain``, batch runs, ``evaluate`` and the CLIs all take a :class:`SmugParameters`;
each model declares its own defaults (:func:`smug_opt.models.catalog.describe`), so
the same model gets the same k, γ, cell and steps wherever it is explained from.
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from smug_opt.errors import ParameterError
from smug_opt.query_work import Work

__all__ = ["PAPER_PARAMETERS", "Baseline", "Method", "SmugParameters"]


@enum.unique
class Method(str, enum.Enum):
    """How the mask is found: the solver's minimal mask, every cell the neurons see, or the
    pixels that provably fix the prediction."""

    SMUG = "smug"
    """The smallest mask that keeps the selected neurons active (a solver call)."""
    SMUG_BASE = "smug_base"
    """No solver: every cell in the selected neurons' receptive fields."""
    ROBUST = "robust"
    """A verified explanation: pixels that, fixed, keep the label while every other pixel
    moves within ε (:func:`smug_opt.robustness.model_explanation.explain_robust`)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Method | str) -> Method:
        """``value`` as a :class:`Method`; an unknown name's error lists the known ones."""
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ValueError(f"method must be one of {names}, got {value!r}") from None


@enum.unique
class Baseline(str, enum.Enum):
    """What a masked input value becomes (the mask keeps a cell's values or replaces them by
    the baseline's): the first layer reads ``x_b + M · (x − x_b)``."""

    ZERO = "zero"
    """0 at the first affine layer's input, after any preprocessing (the paper's choice)."""
    BLACK = "black"
    """A black picture: every raw input value 0, before the model's preprocessing."""
    MEAN = "mean"
    """The training data's mean pixel (per channel, as the model declares it)."""
    BLUR = "blur"
    """A Gaussian blur of the input itself (σ = 1/16 of the picture's larger side)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Baseline | str) -> Baseline:
        """``value`` as a :class:`Baseline`; an unknown name's error lists the known ones."""
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(b.value for b in cls)
            raise ValueError(f"baseline must be one of {names}, got {value!r}") from None


@dataclass(frozen=True)
class SmugParameters:
    """What SMUG needs besides the model, the input and the solver.

    ``k`` neurons with the largest positive Integrated Gradients attribution (``steps``
    points on the path) must stay above ``gamma`` times their original pre-activation;
    the mask is made of ``cell``-sized cells (pixels or tokens per side; a tuple gives
    one size per grid axis); a masked value becomes ``baseline``'s. Checked on
    construction: a bad value fails here, once.

    Method ``robust`` reads ``eps`` (how far each free value may move, L∞, in the model's
    input units; required for it), ``minimum`` (also search the smallest set, with a
    proven lower bound) and each robustness query's budget: ``query_work`` (counted work,
    :class:`~smug_opt.query_work.Work`: the set does not depend on the machine's load) or,
    when that is None, ``query_time`` (seconds per query); the SMUG fields
    are then unused, as these are by the other methods (one value serves a run that
    compares several).
    """

    method: Method = Method.SMUG
    k: int = 3000
    gamma: float = 0.0
    cell: int | tuple[int, ...] = 4
    steps: int = 64
    baseline: Baseline = Baseline.ZERO
    eps: float | None = None
    """None: not a robust explanation."""
    minimum: bool = False
    query_time: float = 5.0
    query_work: Work | None = None
    """None: each query gets ``query_time`` seconds."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", Method.parse(self.method))
        object.__setattr__(self, "baseline", Baseline.parse(self.baseline))
        if isinstance(self.cell, (list, tuple)):
            object.__setattr__(self, "cell", tuple(int(c) for c in self.cell))
        cells = self.cell if isinstance(self.cell, tuple) else (self.cell,)
        problems = [
            (not _is_int(self.k) or self.k < 1, "k", f"must be at least 1, got {self.k!r}"),
            (not all(_is_int(c) and c >= 1 for c in cells) or not cells,
             "cell", f"must be at least 1, got {self.cell!r}"),
            (not _is_int(self.steps) or self.steps < 1, "steps", f"must be at least 1, got {self.steps!r}"),
            (not isinstance(self.gamma, numbers.Real) or not self.gamma >= 0,
             "gamma", f"must be at least 0 (each kept neuron stays above gamma times its "
             f"activation), got {self.gamma!r}"),
            (self.method is Method.ROBUST and not _positive(self.eps), "eps",
             f"must be a positive number for method robust (a single input: "
             f"smug_opt.robustness.explain_robust(model, x, eps=...)), got {self.eps!r}"),
            (not _positive(self.query_time), "query_time", f"must be positive, got {self.query_time!r}"),
            (self.query_work is not None and not isinstance(self.query_work, Work), "query_work",
             f"must be a smug_opt.query_work.Work or None, got {self.query_work!r}"),
        ]
        for bad, parameter, problem in problems:
            if bad:
                raise ParameterError(parameter, problem)
        object.__setattr__(self, "gamma", float(self.gamma))
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "steps", int(self.steps))
        if not isinstance(self.cell, tuple):
            object.__setattr__(self, "cell", int(self.cell))
        if self.eps is not None:
            object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "minimum", bool(self.minimum))
        object.__setattr__(self, "query_time", float(self.query_time))

    def updated(self, **changes: Any) -> SmugParameters:
        """A copy with the ``changes`` that are not None (a flag left unset keeps the default)."""
        unknown = set(changes) - set(asdict(self))
        if unknown:
            raise TypeError(f"unknown SMUG parameter(s) {sorted(unknown)}; known: {sorted(asdict(self))}")
        given = {key: value for key, value in changes.items() if value is not None}
        return replace(self, **given) if given else self

    def robust_record(self) -> dict[str, Any]:
        """Method robust's fields as a run's configuration records them (JSON-ready)."""
        return {"eps": self.eps, "minimum": self.minimum, "query_time": self.query_time,
                "query_work": None if self.query_work is None else vars(self.query_work)}

    def describe(self) -> str:
        """One line for progress messages: ``smug: k=200, gamma=0.0, cell=2, baseline=zero``."""
        if self.method is Method.ROBUST:
            w = self.query_work
            per_query = f"{self.query_time:g}s per query" if w is None else w.describe()
            return f"robust: eps={self.eps:g}{', minimum' if self.minimum else ''}, {per_query}"
        return f"{self.method}: k={self.k}, gamma={self.gamma}, cell={self.cell}, baseline={self.baseline}"


def _positive(value: object) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and bool(np.isfinite(float(value))) and float(value) > 0)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


PAPER_PARAMETERS = SmugParameters()
"""The paper's ImageNet setting (k = 3000, γ = 0, 4×4 cells, 64 IG steps, masked values 0
after preprocessing): the defaults of a
model that declares none."""
