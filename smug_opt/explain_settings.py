"""The arguments of :func:`smug_opt.explain` that every input of a batch shares."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any

from smug_opt.backend_choice import DEFAULT_BACKEND, BackendChoice
from smug_opt.errors import ParameterError
from smug_opt.parameters import PAPER_PARAMETERS, Method, SmugParameters
from smug_opt.query_work import Work

__all__ = ["ExplainSettings"]


@dataclass(frozen=True)
class ExplainSettings:
    """The arguments of :func:`smug_opt.explain` shared by every input of a batch.

    ``params``: the SMUG parameters (:meth:`for_model` fills in a model's own defaults).
    ``method``, ``k``, ``gamma``, ``cell`` and ``steps`` as keywords are deprecated in
    favour of ``params``: for one release they still work, on top of the paper's defaults,
    with a :class:`DeprecationWarning`; so does a ``memory_limit`` in ``solver_options``
    (deprecated in favour of the field ``memory_limit_mb``).
    """

    params: SmugParameters = PAPER_PARAMETERS
    backend: str | BackendChoice = DEFAULT_BACKEND
    target: int | None = None
    time_limit: float = 60.0
    memory_limit_mb: float | None = None
    """A solver worker's budget (None: the default, :func:`smug_opt.solve`)."""
    grid_shape: tuple[int, ...] | None = None
    solver_options: Mapping[str, Any] = field(default_factory=dict)
    pixel_scale: float = 255.0
    preprocessing: str = "unit"
    ig_batch: int | None = None
    input_range: tuple[float, float] | None = None
    """Image pixels 0–255 map linearly onto this range (instead of ``preprocessing``)."""
    method: InitVar[str | None] = None
    k: InitVar[int | None] = None
    gamma: InitVar[float | None] = None
    cell: InitVar[int | None] = None
    steps: InitVar[int | None] = None

    def __post_init__(self, method: str | None, k: int | None, gamma: float | None,
                      cell: int | None, steps: int | None) -> None:
        if "memory_limit" in self.solver_options:
            warnings.warn("ExplainSettings(solver_options={'memory_limit': ...}) is deprecated: pass "
                          "memory_limit_mb=...", DeprecationWarning, stacklevel=3)
            options = dict(self.solver_options)
            given = options.pop("memory_limit")
            if self.memory_limit_mb is not None and given is not None:
                raise ParameterError("memory_limit", "is memory_limit_mb's deprecated old name: give "
                                                     "memory_limit_mb only")
            object.__setattr__(self, "solver_options", options)
            object.__setattr__(self, "memory_limit_mb", self.memory_limit_mb if given is None else given)
        old = {"method": method, "k": k, "gamma": gamma, "cell": cell, "steps": steps}
        given = {key: value for key, value in old.items() if value is not None}
        if given:
            warnings.warn(f"ExplainSettings({', '.join(given)}=...) is deprecated: pass "
                          "params=SmugParameters(...) (or ExplainSettings.for_model)",
                          DeprecationWarning, stacklevel=3)
            object.__setattr__(self, "params", self.params.updated(**given))

    @classmethod
    def for_model(cls, model: Any, params: SmugParameters | None = None, *,
                  method: str | None = None, k: int | None = None, gamma: float | None = None,
                  cell: int | None = None, steps: int | None = None, baseline: str | None = None,
                  eps: float | None = None, minimum: bool | None = None, query_time: float | None = None,
                  query_work: Work | None = None, **settings: Any) -> ExplainSettings:
        """Settings for ``model``: its own SMUG defaults (or ``params``), with any parameter
        given here replacing the default (``eps``, ``minimum``, ``query_time``, ``query_work``:
        method robust's), and the other ``settings``."""
        from smug_opt.models.catalog import smug_parameters

        chosen = smug_parameters(model, params, method=method, k=k, gamma=gamma, cell=cell, steps=steps,
                                 baseline=baseline, eps=eps, minimum=minimum, query_time=query_time,
                                 query_work=query_work)
        return cls(params=chosen, **settings)

    def explain_kwargs(self) -> dict[str, Any]:
        return {"params": self.params, "backend": self.backend, "target": self.target,
                "time_limit": self.time_limit, "memory_limit_mb": self.memory_limit_mb,
                "grid_shape": self.grid_shape, "solver_options": dict(self.solver_options),
                "ig_batch": self.ig_batch}

    def to_dict(self) -> dict[str, Any]:
        """The settings as a run folder's configuration records them (flat, JSON-ready)."""
        p = self.params
        return {"method": p.method.value, "backend": str(self.backend), "k": p.k, "gamma": p.gamma,
                "cell": list(p.cell) if isinstance(p.cell, tuple) else p.cell, "steps": p.steps,
                "baseline": p.baseline.value, "target": self.target, "time_limit": self.time_limit,
                "grid_shape": None if self.grid_shape is None else list(self.grid_shape),
                # run folders have recorded the budget as solver_options' memory_limit since
                # before the field existed: kept, so --resume matches them
                "solver_options": {**self.solver_options, "memory_limit": self.memory_limit_mb},
                "pixel_scale": self.pixel_scale,
                "preprocessing": self.preprocessing, "ig_batch": self.ig_batch,
                "input_range": None if self.input_range is None else list(self.input_range),
                **(p.robust_record() if p.method is Method.ROBUST else {})}
