"""The model adapter over a framework-free :class:`~smug_opt.network.graph.Network` (what
the ONNX, PyTorch and Keras readers produce): the stem exactly in float64, the head run and
differentiated by PyTorch."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from smug_opt.models.base import LayerKind, ModelAdapter, OutputKind
from smug_opt.models.grid import data_grid
from smug_opt.models.keras_memory import HeadFootprint, footprint_batch
from smug_opt.models.network_stem import AxisView, channels_last_view, read_network_stem
from smug_opt.network.graph import Network, Reshape, Scale, Transpose

if TYPE_CHECKING:
    from smug_opt.models.torch_graph import GraphModule

__all__ = ["NetworkAdapter"]

_OUTPUT_KIND: dict[str, OutputKind] = {"logits": "linear", "softmax": "softmax", "sigmoid": "sigmoid",
                                        "log_softmax": "linear"}
"""A final log-softmax is read as scores: the target score is the log-probability itself."""


class NetworkAdapter(ModelAdapter):
    """A :class:`Network` seen as SMUG needs it (see :mod:`smug_opt.models.network_stem` for
    the stem it reads and the layouts).

    Inputs, masks and first-layer activations are channels last (``input_shape`` is
    ``(H, W, C)`` for an image network whose file says ``(C, H, W)``); the network's own
    layout is used inside. The head (everything after the first layer's activation) is a
    ``torch.nn.Module`` (:class:`~smug_opt.models.torch_graph.GraphModule`) in ``dtype``
    (float64 by default: the network's exact weights; float32 runs faster on large heads);
    its outputs include the network's final softmax or sigmoid. ``batch_size`` bounds the
    rows of a forward pass, ``gradient_batch`` those of a gradient (default: as many as keep
    the head's footprint within :data:`~smug_opt.models.keras_memory.IG_MEMORY_BUDGET`).
    """

    def __init__(self, network: Network, *, dtype: Literal["float64", "float32"] = "float64",
                 batch_size: int = 512, gradient_batch: int | None = None) -> None:
        if not isinstance(network, Network):
            raise TypeError(f"network must be a smug_opt.network.Network, got {type(network).__name__}")
        if dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        if batch_size < 1 or (gradient_batch is not None and gradient_batch < 1):
            raise ValueError(f"batch sizes must be positive, got {batch_size} and {gradient_batch}")
        if len(network.nodes[-1].shape) != 1:
            raise ValueError(f"the network's output must be a vector of class scores per example, "
                             f"got per-example shape {network.nodes[-1].shape}")
        stem = read_network_stem(network)
        self.network = network
        self.input_shape = stem.input_view.view_shape
        self.affine = stem.affine
        self.activation = stem.activation
        self.output_kind = _OUTPUT_KIND[network.output]
        self.num_outputs = network.num_outputs
        self.batch_size = batch_size
        self.dtype = dtype
        self._stem = stem
        h_node = network.nodes[stem.activation_node]
        self._h_view = (channels_last_view(h_node.shape) if len(h_node.shape) == 3
                        else AxisView.identity(h_node.shape))
        self._gradient_batch = gradient_batch or footprint_batch(self._footprint())
        self._modules: dict[str, GraphModule] = {}

    def __repr__(self) -> str:
        return (f"NetworkAdapter({self.network.name!r}, first layer {self.affine.kind} "
                f"{self.affine.input_shape}->{self.affine.output_shape} ({self.activation.label}), "
                f"{self.num_outputs} {self.output_kind} outputs, head in torch {self.dtype})")

    @property
    def gradient_batch(self) -> int:
        """Rows per gradient batch through the head (see the class docstring)."""
        return self._gradient_batch

    def grid_shape(self, data_shape: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
        """A Dense layer reading a flattened image reads it on the image's grid (channels of a
        pixel share its cell); a flat input is read as the picture the data came as."""
        if self.affine.kind is not LayerKind.DENSE:
            return None
        if self._stem.image_grid is not None:
            return data_grid(self.affine.input_shape[0], self._stem.image_grid)
        return data_grid(self.affine.input_shape[0], data_shape)

    def affine_input(self, x: np.ndarray) -> np.ndarray:
        """The first affine layer's input for one raw example, float64 (numpy, exact)."""
        value = self._stem.input_view.to_net(np.asarray(self.check_input(x), dtype=np.float64)[None])[0]
        for node in self._stem.preprocessing:
            op = node.op
            if isinstance(op, Scale):
                value = value * op.scale + op.shift
            elif isinstance(op, Transpose):
                value = value.transpose(op.perm)
            elif isinstance(op, Reshape):
                value = value.reshape(node.shape)
        return self._stem.affine_view.to_view(value[None])[0]

    def head(self, h_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) from first-layer activations, float64."""
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        return self._run("head", h_batch, self._h_view, self.gradient_batch)

    def head_gradient(self, h_batch: np.ndarray, target: int, *, batch_size: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, d score / d h)`` of class ``target`` for a batch of activations, by
        PyTorch's autodiff, in batches of ``batch_size`` rows (default :attr:`gradient_batch`)."""
        import torch

        from smug_opt.models.torch_graph import view_to_net

        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        h_batch = self._check_batch(h_batch, self.affine.output_shape, "h_batch")
        weights, offset = self.score_weights(target)
        module = self._module("head")
        w = torch.as_tensor(weights, dtype=module.dtype)
        scores, grads = [], []
        for start in range(0, len(h_batch), batch_size or self.gradient_batch):
            h = torch.as_tensor(h_batch[start:start + (batch_size or self.gradient_batch)],
                                dtype=module.dtype).requires_grad_(True)
            score = module(view_to_net(h, self._h_view)) @ w
            (grad,) = torch.autograd.grad(score.sum(), h)
            scores.append(score.detach().double().numpy())
            grads.append(grad.double().numpy())
        if not scores:
            return np.zeros(0), np.zeros((0, *self.affine.output_shape))
        return np.concatenate(scores) + offset, np.concatenate(grads)

    def predict(self, x_batch: np.ndarray) -> np.ndarray:
        """Model outputs (batch, num_outputs) for raw inputs (batch, *input_shape), float64."""
        x_batch = self.check_input(x_batch, batched=True)
        return self._run("full", np.asarray(x_batch, dtype=np.float64), self._stem.input_view,
                         self.batch_size)

    @property
    def input_view(self) -> AxisView:
        """How a batch of raw inputs (channels last) maps onto the network's own layout."""
        return self._stem.input_view

    def torch_module(self) -> GraphModule:
        """The whole network as a ``torch.nn.Module`` in :attr:`dtype` (input in the network's
        layout: apply :func:`~smug_opt.models.torch_graph.view_to_net` with :attr:`input_view`),
        for gradients with respect to the raw input (Integrated Gradients, Grad-CAM)."""
        return self._module("full")

    def predict_from_affine_input(self, xa_batch: np.ndarray) -> np.ndarray:
        """Model outputs when the first affine layer's input is given (e.g. masked), computed
        by the network's own nodes from there (padding, layer, BatchNorm, activation, head)."""
        xa_batch = self._check_batch(xa_batch, self.affine.input_shape, "xa_batch")
        return self._run("affine", xa_batch, self._stem.affine_view, self.batch_size)

    def _module(self, part: str) -> GraphModule:
        module = self._modules.get(part)
        if module is None:
            import torch

            from smug_opt.models.torch_graph import GraphModule

            start = {"full": 0, "affine": self._stem.affine_input_node,
                     "head": self._stem.activation_node}[part]
            module = GraphModule(self.network, start, output=self.network.output,
                                 dtype=torch.float64 if self.dtype == "float64" else torch.float32)
            self._modules[part] = module.eval()
        return module

    def _run(self, part: str, batch: np.ndarray, view: AxisView, size: int) -> np.ndarray:
        import torch

        from smug_opt.models.torch_graph import view_to_net

        module = self._module(part)
        if len(batch) == 0:
            return np.zeros((0, self.num_outputs))
        out = []
        with torch.no_grad():
            for start in range(0, len(batch), size):
                chunk = torch.as_tensor(batch[start:start + size], dtype=module.dtype)
                out.append(module(view_to_net(chunk, view)).double().numpy())
        return np.concatenate(out)

    def _check_batch(self, batch: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
        batch = np.asarray(batch)
        if batch.shape[1:] != shape:
            raise ValueError(f"{name} must have shape (batch, {', '.join(map(str, shape))}), "
                             f"got {batch.shape}")
        if not np.isfinite(batch).all():
            raise ValueError(f"{name} must be finite")
        return batch

    def _footprint(self) -> HeadFootprint:
        """Bytes per row of a gradient through the head: every head node's output (kept for
        the backward pass) twice (its gradient), plus ``h`` in the head's dtype and float64."""
        itemsize = 8 if self.dtype == "float64" else 4
        nodes = self.network.nodes[self._stem.activation_node + 1:]
        values = sum(math.prod(node.shape) for node in nodes)
        h_values = self.affine.num_neurons
        return HeadFootprint(2 * itemsize * values + 2 * (itemsize + 8) * h_values, 0, 0)
