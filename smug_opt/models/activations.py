"""The first layer's activation ``h = σ(o)`` and what SMUG's constraint guarantees for it.

SMUG keeps a selected neuron *active*: its masked pre-activation ``z`` must satisfy
``z > γ·o`` (``o`` its original pre-activation; only neurons with ``o > 0`` are selected).

- **ReLU** (the paper's case): ``z > γ·o ≥ 0`` means the neuron stays on its linear
  branch with ``h = z > γ·h_original``; the constraint is exactly "still active".
- **Every other supported activation** is non-decreasing on ``[0, ∞)``, so for
  ``γ ≥ 0`` the row guarantees ``σ(z) ≥ σ(γ·o)`` and ``z > 0`` ("active" read as a
  positive pre-activation): ReLU6 / ``ReLU(max_value)`` (may saturate), leaky ReLU, ELU,
  SELU, softplus, sigmoid, tanh, softsign, hard sigmoid, and those that dip below zero on
  negative inputs only (GELU, SiLU/swish, hard SiLU, mish), ``linear`` (no activation: the
  neuron's value stays above ``γ·o``). With ``γ < 0`` only the monotone ones keep that
  guarantee; GELU, SiLU, hard SiLU and mish do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from smug_opt.models._keras import import_keras

__all__ = ["SUPPORTED", "Activation"]

_RELU_FAMILY = ("relu", "relu6", "leaky_relu", "linear")
_VIA_KERAS = ("elu", "selu", "softplus", "sigmoid", "tanh", "softsign", "hard_sigmoid",
              "gelu", "silu", "hard_silu", "mish")
SUPPORTED = (*_RELU_FAMILY, *_VIA_KERAS)
"""Activation names the first layer may use (Keras spellings; swish is silu)."""


@dataclass(frozen=True)
class Activation:
    """An element-wise activation: ``name`` (one of :data:`SUPPORTED`), with ``max_value``
    (ReLU's cap; relu6 is ``relu`` capped at 6), ``negative_slope`` (leaky ReLU) and
    ``alpha`` (ELU) where they apply."""

    name: str
    max_value: float | None = None
    negative_slope: float = 0.0
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in SUPPORTED:
            raise ValueError(f"unsupported activation {self.name!r}; supported: {', '.join(SUPPORTED)}")
        if self.negative_slope < 0 or (self.max_value is not None and self.max_value <= 0):
            raise ValueError(
                f"{self.name}: negative_slope must be >= 0 and max_value > 0 (monotone), got "
                f"{self.negative_slope} and {self.max_value}"
            )

    @property
    def label(self) -> str:
        """The name with its parameters, e.g. ``relu(max 6)`` or ``leaky_relu(0.1)``."""
        if self.max_value is not None:
            return f"{self.name}(max {self.max_value:g})"
        if self.name == "leaky_relu":
            return f"leaky_relu({self.negative_slope:g})"
        return f"elu({self.alpha:g})" if self.name == "elu" else self.name

    @property
    def exact(self) -> bool:
        """True for plain ReLU, where ``z > γ·o`` is exactly the paper's "stays active"."""
        return self.name == "relu" and self.max_value is None and self.negative_slope == 0

    def __call__(self, o: np.ndarray) -> np.ndarray:
        """``σ(o)`` in float64."""
        o = np.asarray(o, dtype=np.float64)
        if self.name == "linear":
            return o
        if self.name in ("relu", "relu6", "leaky_relu"):
            slope = self.negative_slope
            h = np.maximum(o, 0.0) if slope == 0 else np.where(o > 0, o, slope * o)
            cap = 6.0 if self.name == "relu6" else self.max_value
            return h if cap is None else np.minimum(h, cap)
        function = import_keras().activations.get(self.name)
        value = function(o, alpha=self.alpha) if self.name == "elu" else function(o)
        return np.asarray(value, dtype=np.float64)
