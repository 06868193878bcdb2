"""Integrated Gradients and Grad-CAM for ONNX and PyTorch models, through the
:class:`~smug_opt.models.network_adapter.NetworkAdapter`'s PyTorch module (autodiff, no
finite differences), matching :mod:`smug_opt.evaluate.baselines` for Keras models."""

from __future__ import annotations

from typing import Any

import numpy as np

from smug_opt.evaluate.baselines import label_output
from smug_opt.evaluate.boxes import crop_and_resize, max_box

__all__ = ["last_feature_map_node", "network_grad_cam", "network_integrated_gradients"]


def _check_image(adapter: Any, image: np.ndarray) -> np.ndarray:
    """The image (H, W, C): the model's input, or the picture a flat input holds."""
    image = np.asarray(image, dtype=np.float64)
    shape = tuple(adapter.input_shape)
    flat_picture = len(shape) == 1 and image.size == shape[0]
    if image.ndim != 3 or (image.shape != shape and not flat_picture):
        raise ValueError(f"image must have the model's input shape {shape} (H, W, C); "
                         f"got {image.shape}")
    return image


def network_integrated_gradients(
    adapter: Any,
    image: np.ndarray,
    label: int,
    *,
    steps: int = 64,
    baseline: np.ndarray | None = None,
    batch_size: int | None = None,
) -> np.ndarray:
    """Integrated Gradients (Sundararajan et al. 2017) in pixel space, summed over channels.

    Target: the network's output for ``label`` (its softmax or sigmoid included when it
    has one). Baseline: zeros unless given. Midpoint rule on ``steps`` points,
    ``batch_size`` per backward pass (default: the adapter's gradient batch). The (H, W)
    map sums to about ``F(x) - F(baseline)`` (completeness).
    """
    import torch

    from smug_opt.models.torch_graph import view_to_net

    image = _check_image(adapter, image)
    base = np.zeros_like(image) if baseline is None else np.asarray(baseline, dtype=np.float64)
    if base.shape != image.shape:
        raise ValueError(f"baseline shape {base.shape} does not match image shape {image.shape}")
    size = batch_size or adapter.gradient_batch
    if steps < 1 or size < 1:
        raise ValueError(f"steps and batch_size must be >= 1; got {steps=}, {batch_size=}")
    module = adapter.torch_module()
    alphas = (np.arange(steps) + 0.5) / steps
    x_t = torch.as_tensor(image, dtype=module.dtype)
    base_t = torch.as_tensor(base, dtype=module.dtype)
    total = torch.zeros_like(x_t)
    for start in range(0, steps, size):
        a = torch.as_tensor(alphas[start:start + size], dtype=module.dtype).view(-1, 1, 1, 1)
        path = (base_t + a * (x_t - base_t)).requires_grad_(True)
        rows = path.reshape(path.shape[0], *adapter.input_shape)  # a flat input reads the picture's values
        target = label_output(module(view_to_net(rows, adapter.input_view)), label)
        (grad,) = torch.autograd.grad(target.sum(), path)
        total += grad.sum(dim=0)
    return ((x_t - base_t) * total / steps).sum(dim=-1).double().numpy()


def last_feature_map_node(network: Any) -> int:
    """The index of the network's last node with a spatial (C, H, W) output larger than 1×1:
    the feature map Grad-CAM reads (the last convolution's activations)."""
    maps = [i for i, node in enumerate(network.nodes[1:], start=1)
            if len(node.shape) == 3 and node.shape[1] * node.shape[2] > 1]
    if not maps:
        raise ValueError(f"Grad-CAM needs a spatial feature map; network {network.name!r} has none")
    return maps[-1]


def network_grad_cam(adapter: Any, image: np.ndarray, label: int, *, node: int | None = None) -> np.ndarray:
    """Grad-CAM (Selvaraju et al. 2017) on node ``node`` (default
    :func:`last_feature_map_node`), upsampled bilinearly to (H, W): ``relu`` of the
    feature maps weighted by the spatial means of the gradient of the output for ``label``."""
    import torch

    from smug_opt.models.torch_graph import view_to_net

    image = _check_image(adapter, image)
    module = adapter.torch_module()
    keep = last_feature_map_node(adapter.network) if node is None else node
    if len(adapter.network.nodes[keep].shape) != 3:
        raise ValueError(f"Grad-CAM needs a (C, H, W) feature map; node {keep} has shape "
                         f"{adapter.network.nodes[keep].shape}")
    x = torch.as_tensor(image[None], dtype=module.dtype).requires_grad_(True)  # builds the graph
    out, features = module.forward_keeping(view_to_net(x, adapter.input_view), keep)
    (grads,) = torch.autograd.grad(label_output(out, label).sum(), features)
    weights = grads.mean(dim=(2, 3))  # (1, C)
    cam = torch.relu(torch.einsum("bchw,bc->bhw", features, weights))[0].detach().double().numpy()
    return crop_and_resize(cam[:, :, None], max_box(cam.shape), size=image.shape[:2])[0, :, :, 0]
