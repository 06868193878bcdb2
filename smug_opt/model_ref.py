"""How a worker process finds a model: a reference it loads once (picklable, so it travels
to local workers and Dask), and how many models this process has loaded."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from smug_opt.executors import worker_cache

__all__ = ["ModelRef", "model_loads"]

_loads = 0  # models loaded by this process (a worker loads each model once)


@dataclass(frozen=True)
class ModelRef:
    """How a worker finds the model: a spec (an embedded model's name, a .keras/.h5, .onnx
    or .pt2 file, package.module:factory) and what the user declared about its input
    (:func:`smug_opt.models.resolve.as_adapter`)."""

    name: str
    input_shape: tuple[int, ...] | None = None
    input_layout: str | None = None
    input_range: tuple[float, float] | None = None

    def load(self) -> Any:
        """The model's adapter, loaded once per worker process."""
        return worker_cache(("model", self), self._load)

    def _load(self) -> Any:
        global _loads
        from smug_opt.models import zoo
        from smug_opt.models.resolve import as_adapter

        logging.getLogger("tensorflow").setLevel(logging.ERROR)  # AutoGraph notes, once per worker
        adapter = as_adapter(self.name, input_shape=self.input_shape, input_layout=self.input_layout,
                             input_range=self.input_range)
        _loads += 1
        info: dict[str, Any] = {"model": self.name}
        if self.name in zoo.available_models() and not zoo.is_pretrained(self.name):
            info["model_test_accuracy"] = zoo.test_accuracy(self.name)
        return adapter, info


def model_loads() -> int:
    """How many models this process has loaded (a worker loads each model once)."""
    return _loads
