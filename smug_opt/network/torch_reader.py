"""Reading a PyTorch model into a :class:`~smug_opt.network.graph.Network`, through ONNX.

A module (or a ``torch.export`` program loaded from a ``.pt2`` file with
``torch.export.load``, never ``torch.load`` of a pickle) is exported to ONNX in memory
with PyTorch's TorchScript exporter and read by :func:`~smug_opt.network.onnx_reader.read_onnx`.
One translation of operators serves both formats: ONNX's operator set is versioned and
stable, while the ATen operators of an exported program change between PyTorch releases.
Constant folding is left to the reader, which folds BatchNorm in float64; weights and
buffers keep their values exactly, while Python float literals in ``forward`` are exported
as float32 (as the module's own float32 run uses them).
"""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path
from typing import Any

from smug_opt.network.graph import Network
from smug_opt.network.onnx_reader import read_onnx

__all__ = ["read_exported_program", "read_torch", "torch_to_onnx"]

_OPSET = 17


def torch_to_onnx(module: Any, input_shape: tuple[int, ...], *, dynamic_batch: bool = True) -> bytes:
    """The ONNX file (bytes) of ``module`` in inference mode on float32 inputs of
    per-example ``input_shape``; the module's training mode is restored afterwards."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"expected a torch.nn.Module, got {type(module).__name__}")
    shape = tuple(int(s) for s in input_shape)
    if not shape or min(shape) < 1:
        raise ValueError(f"input_shape must be positive sizes per example (no batch axis), got {input_shape}")
    buffer = io.BytesIO()
    training = module.training
    axes = {"input": {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else None
    try:
        module.eval()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.zeros((1, *shape)),), buffer, dynamo=False,
                              opset_version=_OPSET, do_constant_folding=False, input_names=["input"],
                              output_names=["output"], dynamic_axes=axes)
    except (RuntimeError, TypeError, torch.onnx.errors.OnnxExporterError) as error:
        raise ValueError(f"PyTorch could not export {type(module).__name__} for inputs of shape "
                         f"{shape}: {error}") from None
    finally:
        module.train(training)
    return buffer.getvalue()


def read_torch(module: Any, input_shape: tuple[int, ...], *, input_range: tuple[float, float] | None = None,
               layout: str | None = None, name: str | None = None) -> Network:
    """The network of a PyTorch module taking per-example inputs of ``input_shape``
    (``(C, H, W)`` for images, as PyTorch lays them out)."""
    data = torch_to_onnx(module, input_shape)
    return read_onnx(data, input_range=input_range, layout=layout, name=name or type(module).__name__)


def _without_train(module: Any) -> Any:
    """A module calling ``module`` that the exporter can switch to inference mode: the
    module of an exported program refuses ``train()``, so it is held but not registered
    (its weights become constants of the trace)."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            object.__setattr__(self, "inner", module)

        def forward(self, x: Any) -> Any:
            return self.inner(x)

    return Wrapper()


def read_exported_program(path: str | Path, *, input_range: tuple[float, float] | None = None,
                          layout: str | None = None, name: str | None = None) -> Network:
    """The network of a ``.pt2`` file written by ``torch.export.save``; its input shape is
    the one it was exported with (the first axis is the batch, traced at size 1)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PyTorch exported program {path} does not exist")
    loader_log = logging.getLogger("torch.export")  # logs a traceback before raising on a broken file
    level = loader_log.level
    loader_log.setLevel(logging.CRITICAL)
    try:
        program = torch.export.load(str(path))
    except Exception as error:  # torch raises several types for a file that is not a .pt2
        raise ValueError(f"{path} is not a torch.export program (torch.export.save): {error}") from None
    finally:
        loader_log.setLevel(level)
    inputs = [spec for spec in program.graph_signature.input_specs if spec.kind.name == "USER_INPUT"]
    if len(inputs) != 1:
        raise ValueError(f"{path}: the exported program takes {len(inputs)} inputs; smug-opt reads one")
    placeholder = next(node for node in program.graph.nodes if node.name == inputs[0].arg.name)
    shape = tuple(placeholder.meta["val"].shape)
    try:
        per_example = tuple(int(s) for s in shape[1:])
    except TypeError:
        raise ValueError(f"{path}: input shape {shape} has a symbolic size beyond the batch axis") from None
    module = program.module()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    data = torch_to_onnx(_without_train(module), per_example, dynamic_batch=False)
    return read_onnx(data, input_range=input_range, layout=layout, name=name or path.stem)
