"""The framework-neutral model interface: the first affine layer and the adapter contract.

Vocabulary used throughout:

- *affine input*: what the first affine layer reads, per example: ``(n_in,)`` for dense,
  ``(T, C)`` for conv1d, ``(H, W, C)`` for conv2d (channels last).
- *spatial grid*: the affine input without its channel axis: ``(n_in,)``, ``(T,)`` or
  ``(H, W)``. Mask cells live on this grid; all channels (or embedding dimensions) of a
  grid point share its cell. A *spatial index* is a row-major flat index into the grid.
- *neuron*: one entry of the first layer's output ``o = W1·x + b1`` (shape
  ``output_shape``); its *flat index* is row-major over ``output_shape``, so for
  convolutions ``neuron = position * F + filter``.
"""

from __future__ import annotations

import enum
import functools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

import numpy as np

from smug_opt.errors import ParameterError
from smug_opt.models.activations import Activation
from smug_opt.models.conv_geometry import ReceptiveField, conv_output_size, resolve_padding, window_indices
from smug_opt.models.grid import CellGrid, cell_grid, data_grid

__all__ = [
    "AffineLayer",
    "LayerKind",
    "ModelAdapter",
    "OutputKind",
    "ReceptiveField",
    "conv_output_size",
    "resolve_padding",
    "top_tie",
]



def top_tie(scores: np.ndarray) -> str | None:
    """The classes that share the top score of one score vector, for an error message
    (``"classes 0, 1, 2 at 0"``: every score 0 behind a ReLU on the logits, say), or None
    when one class has it alone. A tie predicts no class."""
    scores = np.asarray(scores).reshape(-1)
    top = np.flatnonzero(scores == scores.max())
    if top.size == 1:
        return None
    listed = ", ".join(map(str, top[:_TIES_LISTED]))
    more = f", ... ({top.size} classes)" if top.size > _TIES_LISTED else ""
    return f"classes {listed}{more} at {scores.max():g}"


_TIES_LISTED = 8
"""A tie's message names at most this many classes (a random-weight network can tie all 1,000)."""


@enum.unique
class LayerKind(str, enum.Enum):
    """What the first affine layer is: fully connected, or a 1-D or 2-D convolution. A
    ``str`` enum (compares equal to its value)."""

    DENSE = "dense"
    CONV1D = "conv1d"
    CONV2D = "conv2d"

    def __str__(self) -> str:
        return self.value


OutputKind = Literal["softmax", "sigmoid", "linear"]
_SPATIAL_RANK = {LayerKind.DENSE: 0, LayerKind.CONV1D: 1, LayerKind.CONV2D: 2}


@dataclass(frozen=True, eq=False)
class AffineLayer:
    """The first affine layer ``o = W1·x + b1`` of a network, in float64, framework-free.

    ``kernel``: dense (n_in, F); conv1d (kw, C, F); conv2d (kh, kw, C, F) (Keras layout).
    ``bias``: (F,) (zeros when the layer has none). ``strides``, ``dilation`` and
    ``padding`` (explicit ``(before, after)`` cells) have one entry per spatial axis
    (none for dense). ``input_shape``/``output_shape`` are per example, channels last.
    Arrays are stored read-only as float64.
    """

    kind: LayerKind  # a kind's value (``"dense"``) is taken too
    kernel: np.ndarray
    bias: np.ndarray
    strides: tuple[int, ...]
    dilation: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", LayerKind(self.kind))
        except ValueError:
            raise ValueError(f"kind must be 'dense', 'conv1d' or 'conv2d', got {self.kind!r}") from None
        rank = _SPATIAL_RANK[self.kind]
        kernel = _frozen_float64(self.kernel)
        bias = _frozen_float64(self.bias)
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "bias", bias)
        for name in ("strides", "dilation", "padding", "input_shape", "output_shape"):
            object.__setattr__(self, name, _int_tuple(getattr(self, name)))
        if kernel.ndim != max(rank + 2, 2):
            raise ValueError(f"a {self.kind} kernel needs {rank + 2} axes, got {kernel.shape}")
        if bias.shape != kernel.shape[-1:]:
            raise ValueError(f"bias must have shape {kernel.shape[-1:]}, got {bias.shape}")
        if not all(len(t) == rank for t in (self.strides, self.dilation, self.padding)):
            raise ValueError(
                f"a {self.kind} layer needs {rank} strides, dilations and paddings, got "
                f"{self.strides}, {self.dilation}, {self.padding}"
            )
        if min((*self.strides, *self.dilation), default=1) < 1 or min(sum(self.padding, ()), default=0) < 0:
            raise ValueError(
                "strides and dilations must be positive and paddings non-negative, got "
                f"{self.strides}, {self.dilation}, {self.padding}"
            )
        spatial_in = self.input_shape[:rank]
        expected_in = kernel.shape[:1] if rank == 0 else (*spatial_in, kernel.shape[-2])
        if self.input_shape != expected_in:
            raise ValueError(f"input_shape {self.input_shape} does not fit a kernel of shape {kernel.shape}")
        axes = zip(spatial_in, kernel.shape[:rank], self.strides, self.dilation, self.padding, strict=True)
        out = tuple(conv_output_size(n, k, s, d, sum(p)) for n, k, s, d, p in axes)
        if self.output_shape != (*out, kernel.shape[-1]) or min(out, default=1) < 1:
            raise ValueError(
                f"output_shape {self.output_shape} is not what the layer computes: {(*out, kernel.shape[-1])}"
            )

    @property
    def spatial_shape(self) -> tuple[int, ...]:
        """The affine input's grid: ``(n_in,)``, ``(T,)`` or ``(H, W)``."""
        return self.input_shape if self.kind is LayerKind.DENSE else self.input_shape[:-1]

    @property
    def channels(self) -> int:
        """Values per grid point (1 for dense; channels or embedding dimensions)."""
        return 1 if self.kind is LayerKind.DENSE else self.input_shape[-1]

    @property
    def filters(self) -> int:
        """``F``, the number of output channels (units for dense)."""
        return self.kernel.shape[-1]

    @property
    def num_neurons(self) -> int:
        """Number of first-layer neurons, ``prod(output_shape)``."""
        return math.prod(self.output_shape)

    def receptive_field_taps(self) -> ReceptiveField:
        """The (cached, read-only) receptive fields of all output positions."""
        return self._receptive_field

    @functools.cached_property
    def _receptive_field(self) -> ReceptiveField:
        rank = _SPATIAL_RANK[self.kind]
        if rank == 0:
            n_in = self.input_shape[0]
            index = np.arange(n_in, dtype=np.int64)[None, :]
            valid = np.ones((1, n_in), dtype=bool)
        else:
            index, valid = window_indices(
                self.spatial_shape,
                self.output_shape[:-1],
                self.kernel.shape[:rank],
                self.strides,
                self.dilation,
                self.padding,
            )
        kernel = self.kernel.reshape(-1, self.channels, self.filters)
        for array in (index, valid, kernel):
            array.flags.writeable = False
        return ReceptiveField(index, valid, kernel)

    def preactivation(self, x: np.ndarray) -> np.ndarray:
        """``o = W1·x + b1`` for one affine input ``x`` (shape ``input_shape``), float64."""
        grid = self._grid(x)
        field = self._receptive_field
        patches = grid[field.index] * field.valid[..., None]
        o = np.einsum("pkc,kcf->pf", patches, field.kernel) + self.bias
        return o.reshape(self.output_shape)

    def tap_contributions(
        self, x: np.ndarray, neuron_flat_indices: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """COO triplets of the selected neurons' pre-activations, one per valid kernel tap.

        Returns ``(rows, spatial_index, values)``: ``rows[i]`` is the position of the neuron
        in ``neuron_flat_indices``, ``spatial_index[i]`` the grid point the tap reads and
        ``values[i] = Σ_c kernel[tap, c, filter] · x[grid point, c]``. Taps in the padding
        are left out; zero values are kept. For every row ``r``,
        ``Σ values[rows == r] + bias[filter] == preactivation(x).flat[neuron r]``, and no
        ``(row, spatial_index)`` pair repeats.
        """
        neurons = np.asarray(neuron_flat_indices)
        if neurons.ndim != 1 or not np.issubdtype(neurons.dtype, np.integer):
            raise ValueError(
                f"neuron_flat_indices must be a 1-D integer array, got {neurons.dtype} {neurons.shape}"
            )
        if neurons.size and (neurons.min() < 0 or neurons.max() >= self.num_neurons):
            raise ValueError(
                f"neuron indices must lie in [0, {self.num_neurons}), got {neurons.min()}..{neurons.max()}"
            )
        grid = self._grid(x)
        field = self._receptive_field
        position, filt = np.divmod(neurons, self.filters)
        index = field.index[position]
        values = np.einsum("nkc,kcn->nk", grid[index], field.kernel[:, :, filt])
        rows, taps = np.nonzero(field.valid[position])
        return rows, index[rows, taps], values[rows, taps]

    def _grid(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.input_shape:
            raise ValueError(
                f"the {self.kind} layer's input must have shape {self.input_shape}, got {x.shape}"
            )
        return x.reshape(-1, self.channels)


def _frozen_float64(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array


def _int_tuple(value: tuple | list) -> tuple:
    return tuple(_int_tuple(v) if isinstance(v, (tuple, list)) else int(v) for v in value)


class ModelAdapter(ABC):
    """A trained network seen as: raw input → affine input → first affine layer → σ → head.

    Subclasses (one per framework) set ``affine``, ``input_shape`` (the model's raw
    per-example input), ``output_kind``, ``num_outputs`` and ``activation`` (σ, ReLU by
    default), and own the mask grid (:meth:`mask_grid`). All results are float64 numpy.
    The *target score* of an output vector is the probability of class ``target`` for
    softmax; for one sigmoid output ``p`` it is ``p`` (target 1) or ``1 - p`` (target 0);
    otherwise it is output ``target`` itself.
    """

    affine: AffineLayer
    input_shape: tuple[int, ...]
    output_kind: OutputKind
    num_outputs: int
    activation: Activation = Activation("relu")

    @property
    def gradient_batch(self) -> int:
        """Rows per :meth:`head_gradient` batch when none is given (bounds its memory)."""
        return 512

    @property
    def spatial_shape(self) -> tuple[int, ...]:
        """The affine input's own grid (see the module docstring)."""
        return self.affine.spatial_shape

    def grid_shape(self, data_shape: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
        """How a flat dense input is read as an image, given the shape the data came in
        (``(H, W)`` or ``(H, W, C)``); None: the affine input's own grid. The default reads
        a flat dense input as the data's picture when the sizes agree."""
        if self.affine.kind is not LayerKind.DENSE:
            return None
        return data_grid(self.affine.input_shape[0], data_shape)

    def mask_grid(self, cell: int | tuple[int, ...], data_shape: tuple[int, ...] | None = None) -> CellGrid:
        """The mask cells of ``cell``-sized blocks for an input that came as ``data_shape``
        (the image's H×W for convolutions and for MLPs reading a picture, tokens for text)."""
        return cell_grid(self.affine, cell, self.grid_shape(data_shape))

    def model_input(self, x: np.ndarray) -> np.ndarray:
        """``x`` in the model's input shape when it holds exactly as many values (a 28×28
        picture for an ``Input(784)`` model; a channels-first ``(C, H, W)`` array transposed:
        :func:`~smug_opt.input_layout.in_input_shape`), then checked."""
        from smug_opt.input_layout import in_input_shape

        return self.check_input(in_input_shape(x, self.input_shape))

    def check_input(self, x: np.ndarray, *, batched: bool = False) -> np.ndarray:
        """``x`` as an array, after checking its shape and that it is finite and numeric; a
        flat model input may come as the picture it holds (rows of 28×28×1 for ``(784,)``)."""
        x = np.asarray(x)
        row = x.shape[int(batched) :]
        if len(self.input_shape) == 1 and row != self.input_shape and math.prod(row) == self.input_shape[0]:
            x = x.reshape(*x.shape[: int(batched)], *self.input_shape)
        if x.shape[int(batched) :] != self.input_shape:
            shape = ", ".join(map(str, self.input_shape))
            expected = f"(batch, {shape})" if batched else str(self.input_shape)
            raise ValueError(f"x must have shape {expected}, got {x.shape}")
        if x.dtype.kind not in "biuf":
            raise ValueError(f"x must be numeric, got dtype {x.dtype}")
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(f"x must be finite, got {x[tuple(bad)]} at index {tuple(bad)}")
        return x

    def first_layer(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(o, h)``: pre-activations ``W1·x + b1`` and ``h = σ(o)`` of one raw example."""
        o = self.affine.preactivation(self.affine_input(x))
        return o, self.activation(o)

    def score_weights(self, target: int) -> tuple[np.ndarray, float]:
        """``(w, c)`` with ``target score = outputs · w + c`` (see the class docstring)."""
        single_sigmoid = self.output_kind == "sigmoid" and self.num_outputs == 1
        n_targets = 2 if single_sigmoid else self.num_outputs
        if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
            raise ParameterError("target", f"must be an int, got {target!r}")
        if not 0 <= target < n_targets:
            raise ParameterError(
                "target", f"must lie in [0, {n_targets}) for a {self.output_kind} output of "
                f"size {self.num_outputs}, got {target}"
            )
        if single_sigmoid:
            return np.array([1.0 if target == 1 else -1.0]), float(target == 0)
        return np.eye(self.num_outputs)[target], 0.0

    def target_score(self, outputs: np.ndarray, target: int) -> np.ndarray:
        """Target scores of a batch of model outputs (batch, num_outputs) → (batch,)."""
        w, c = self.score_weights(target)
        return np.asarray(outputs, dtype=np.float64) @ w + c

    def predicted_target(self, outputs: np.ndarray) -> int:
        """The class one output vector (num_outputs,) predicts; a tie for the top score
        (all scores 0 behind a ReLU on the logits, say) predicts none: ParameterError."""
        outputs = np.asarray(outputs)
        if self.output_kind == "sigmoid" and self.num_outputs == 1:
            return int(outputs[0] >= 0.5)
        tie = top_tie(outputs)
        if tie is not None:
            raise ParameterError("target", f"is needed: the model's outputs on this input tie for the top "
                                 f"class ({tie})")
        return int(np.argmax(outputs))

    @abstractmethod
    def affine_input(self, x: np.ndarray) -> np.ndarray:
        """The first affine layer's input for one raw example (shape ``affine.input_shape``)."""

    @abstractmethod
    def head(self, h_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) from first-layer activations (batch, *h shape)."""

    @abstractmethod
    def head_gradient(
        self, h_batch: np.ndarray, target: int, *, batch_size: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores (batch,), d score / d h (batch, *h shape))`` for class ``target``, in
        batches of ``batch_size`` rows (default :attr:`gradient_batch`)."""

    @abstractmethod
    def predict(self, x_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) for raw inputs (batch, *input_shape)."""

    @abstractmethod
    def predict_from_affine_input(self, xa_batch: np.ndarray) -> np.ndarray:
        """Model outputs when the first affine layer's input (batch, *affine input) is given."""
