"""One entry point from a model's name on the command line to a
:class:`~smug_opt.network.graph.Network`, whatever framework wrote it."""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from smug_opt.errors import ParameterError
from smug_opt.network.graph import Network

__all__ = ["load_model", "model_spec_kind"]

_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_DIGITS_RANGE = (0.0, 1.0)


def model_spec_kind(spec: str) -> str:
    """``"onnx"``, ``"pt2"``, ``"keras"``, ``"factory"`` or ``"embedded"``: what a
    ``--model`` value names (checked before any framework loads)."""
    from smug_opt.models.zoo import available_models

    suffix = Path(spec).suffix.lower()
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".pt2":
        return "pt2"
    if suffix in (".keras", ".h5", ".hdf5"):
        return "keras"
    if spec in available_models():
        return "embedded"
    if _FACTORY.match(spec):
        return "factory"
    if suffix in (".pt", ".pth"):
        raise ValueError(f"{spec}: a pickled PyTorch file is never loaded (unpickling runs code); save the "
                         "model with torch.export.save to a .pt2 file, or give package.module:factory")
    raise ValueError(f"model {spec!r}: expected a .onnx, .pt2, .keras or .h5 file, a PyTorch factory "
                     f"'package.module:function', or an embedded model ({', '.join(available_models())})")


def load_model(spec: str, *, input_shape: tuple[int, ...] | None = None,
               input_range: tuple[float, float] | None = None, layout: str | None = None) -> Network:
    """The network ``spec`` names (see :func:`model_spec_kind`).

    A factory ``package.module:function`` is imported and called with no arguments and must
    return a ``torch.nn.Module``; its per-example input shape is ``input_shape``, else the
    module's ``input_shape`` attribute. ``input_range`` and ``layout`` declare what a file
    does not say (the embedded models' range is [0, 1]). A file states its own input shape:
    an ``input_shape`` that contradicts it is refused.
    """
    kind = model_spec_kind(spec)
    if kind == "factory":
        return _from_factory(spec, input_shape, input_range, layout)
    network = _read_file(spec, kind, input_range, layout)
    if input_shape is not None and tuple(input_shape) != network.input_shape:
        raise ParameterError("input_shape", f"is {tuple(input_shape)}, but {spec} reads inputs of shape "
                             f"{network.input_shape} (the shape is declared for a PyTorch factory only)")
    return network


def _read_file(spec: str, kind: str, input_range: tuple[float, float] | None, layout: str | None
               ) -> Network:
    if kind == "onnx":
        from smug_opt.network.onnx_reader import read_onnx

        return read_onnx(spec, input_range=input_range, layout=layout)
    if kind == "pt2":
        from smug_opt.network.torch_reader import read_exported_program

        return read_exported_program(spec, input_range=input_range, layout=layout)
    if kind in ("keras", "embedded"):
        from smug_opt.network.keras_reader import read_keras

        if kind == "embedded":
            from smug_opt.models.zoo import is_pretrained, load

            if is_pretrained(spec):
                network = load(spec)
                return network if input_range is None else replace(network, input_range=input_range)
            return read_keras(load(spec), input_range=input_range or _DIGITS_RANGE, name=spec)
        path = Path(spec)
        if not path.is_file():
            raise FileNotFoundError(f"Keras model file {path} does not exist")
        from smug_opt.models._keras import import_keras

        model = import_keras().models.load_model(str(path), compile=False)
        return read_keras(model, input_range=input_range, name=path.stem)
    raise ValueError(f"model {spec!r}: no file reader for {kind!r}")


def _from_factory(spec: str, input_shape: tuple[int, ...] | None,
                  input_range: tuple[float, float] | None, layout: str | None) -> Network:
    from smug_opt.network.torch_reader import read_torch

    module_name, function_name = spec.split(":")
    try:
        factory: Any = getattr(importlib.import_module(module_name), function_name)
    except ModuleNotFoundError as error:
        raise ValueError(f"model {spec!r}: cannot import {error.name!r}") from None
    except AttributeError:
        raise ValueError(f"model {spec!r}: module {module_name!r} has no {function_name!r}") from None
    try:
        module = factory()
    except Exception as error:  # the user's code: its failure is this model's error, in one line
        raise ValueError(f"model {spec!r}: the factory raised {type(error).__name__}: {error}") from None
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"model {spec!r}: the factory returned {type(module).__name__}, "
                         "not a torch.nn.Module")
    shape = input_shape or getattr(module, "input_shape", None)
    if shape is None:
        raise ValueError(f"model {spec!r}: declare the per-example input shape (e.g. --input-shape 1,28,28), "
                         "or give the module an input_shape attribute")
    return read_torch(module, tuple(shape), input_range=input_range, layout=layout, name=function_name)
