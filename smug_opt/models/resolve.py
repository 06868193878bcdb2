"""What a user names as a model, made into a :class:`ModelAdapter`: the one place the Python
API, ``explain``, batch explain and ``evaluate`` resolve a model.

A model is an adapter; a :class:`~smug_opt.network.graph.Network`; a Keras model or a
PyTorch ``nn.Module``; or a *spec* string: an embedded model's name, a ``.keras``/``.h5``
file (read by Keras), a ``.onnx`` file, a ``torch.export`` ``.pt2`` file, or
``package.module:factory`` (a callable returning an ``nn.Module``; never a pickle). ONNX
and PyTorch models become a Network (:mod:`smug_opt.network`) explained through
:class:`~smug_opt.models.network_adapter.NetworkAdapter`; Keras models through
:class:`~smug_opt.models.keras_adapter.KerasAdapter`.
"""

from __future__ import annotations

import sys
import weakref
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smug_opt.models.base import ModelAdapter
    from smug_opt.network.graph import Network

__all__ = ["INPUT_LAYOUTS", "ModelOptions", "as_adapter", "check_model_spec", "network_of", "read_network"]

INPUT_LAYOUTS = ("nchw", "nhwc")
_LAYOUT_NAMES = {"nchw": "channels_first", "nhwc": "channels_last"}
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_adapters: weakref.WeakKeyDictionary[Any, dict[ModelOptions, ModelAdapter]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ModelOptions:
    """What a model may not say, declared by the user: ``input_shape`` per example (a
    PyTorch module's; None: its ``input_shape`` attribute), ``input_layout`` of a 3-D image
    input (``"nchw"`` or ``"nhwc"``; None: the reader's guess) and ``input_range``, the
    valid range of every input value (None: unknown). Keras models state all three."""

    input_shape: tuple[int, ...] | None = None
    input_layout: str | None = None
    input_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.input_shape is not None:
            object.__setattr__(self, "input_shape", tuple(int(v) for v in self.input_shape))
        if self.input_layout is not None and self.input_layout not in INPUT_LAYOUTS:
            raise ValueError(f"input_layout must be one of {', '.join(INPUT_LAYOUTS)}, "
                             f"got {self.input_layout!r}")
        if self.input_range is not None:
            lo, hi = (float(v) for v in self.input_range)
            if not lo < hi:
                raise ValueError(f"input_range must be (lo, hi) with lo < hi, got {self.input_range}")
            object.__setattr__(self, "input_range", (lo, hi))


def check_model_spec(spec: str, *, flag: str = "--model") -> str:
    """The spec's kind, after the checks that need no framework: the file exists and has
    its format's signature (a zip for .keras and .pt2, HDF5 for .h5)."""
    from smug_opt.network.load import model_spec_kind

    path = Path(spec)
    if path.is_dir():
        raise ValueError(f"{flag} {spec} is a folder; give a model file")
    try:
        kind = model_spec_kind(spec)
    except ValueError as error:
        if not path.exists() and not path.suffix:
            raise FileNotFoundError(f"{flag} {spec}: no such file; {error}") from None
        raise ValueError(f"{flag}: {error}") from None
    if kind in ("embedded", "factory"):
        return kind
    if not path.is_file():
        raise FileNotFoundError(f"{flag} {spec}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".keras", ".pt2") and not zipfile.is_zipfile(path):
        what = "a Keras model file" if suffix == ".keras" else "a torch.export .pt2 file"
        raise ValueError(f"{flag} {spec} is not {what} (it is written as a zip archive)")
    if suffix in (".h5", ".hdf5"):
        with open(path, "rb") as f:
            if f.read(8) != _HDF5_SIGNATURE:
                raise ValueError(f"{flag} {spec} is not an HDF5 Keras model file")
    return kind


def read_network(model: Any, options: ModelOptions | None = None) -> Network:
    """The :class:`Network` of an ONNX or PyTorch model (a spec string or an ``nn.Module``),
    read by :mod:`smug_opt.network`'s readers with what the user declared."""
    options = options or ModelOptions()
    layout = None if options.input_layout is None else _LAYOUT_NAMES[options.input_layout]
    if isinstance(model, str):
        from smug_opt.network.load import load_model

        return load_model(model, input_shape=options.input_shape, input_range=options.input_range,
                          layout=layout)
    from smug_opt.network.torch_reader import read_torch

    shape = options.input_shape or getattr(model, "input_shape", None)
    if shape is None:
        raise ValueError(f"a {type(model).__name__} module does not say its input shape: declare it "
                         "(input_shape=(1, 28, 28), --input-shape 1,28,28) or give the module an "
                         "input_shape attribute")
    return read_torch(model, tuple(shape), input_range=options.input_range, layout=layout,
                      name=type(model).__name__)


def network_of(model: Any, *, input_shape: tuple[int, ...] | None = None, input_layout: str | None = None,
               input_range: tuple[float, float] | None = None) -> Network:
    """The :class:`Network` of ``model``: a Network, a model adapter, a Keras model, a
    ``torch.nn.Module`` or a spec (an embedded model's name, a ``.keras``/``.h5``,
    ``.onnx`` or ``.pt2`` file, ``package.module:factory``)."""
    from smug_opt.models.base import ModelAdapter
    from smug_opt.network.graph import Network

    if isinstance(model, Path):
        model = str(model)
    if isinstance(model, str):
        check_model_spec(model)
    if isinstance(model, ModelAdapter):
        inner = getattr(model, "network", None) or getattr(model, "model", None)
        if inner is None:
            raise TypeError(f"{type(model).__name__} holds no network smug-opt can read")
        model = inner
    if isinstance(model, Network):
        return model if input_range is None else replace(model, input_range=input_range)
    if hasattr(model, "layers") and hasattr(model, "inputs"):  # a Keras model
        from smug_opt.network.keras_reader import read_keras

        return read_keras(model, input_range=input_range)
    return read_network(model, ModelOptions(input_shape, input_layout, input_range))


def as_adapter(model: Any, *, input_shape: tuple[int, ...] | None = None, input_layout: str | None = None,
               input_range: tuple[float, float] | None = None) -> ModelAdapter:
    """A :class:`ModelAdapter` for any model the module docstring lists, with the input's
    layout and range declared where the file does not say them (:class:`ModelOptions`);
    one per model object and declaration (its compiled functions are reused)."""
    from smug_opt.models.base import ModelAdapter

    if isinstance(model, ModelAdapter):
        return model
    options = ModelOptions(input_shape, input_layout, input_range)
    if isinstance(model, (str, Path)):
        kind = check_model_spec(str(model))
        if kind == "embedded":
            from smug_opt.models import zoo

            model = zoo.load(str(model), progress=False)
        elif kind == "keras":
            from smug_opt.models.keras_adapter import load_model

            model = load_model(model)
        else:
            return _adapter(read_network(str(model), options), options)
    if not _weakrefable(model):
        return _adapter(model, options)
    cached = _adapters.setdefault(model, {})
    if options not in cached:
        cached[options] = _adapter(model, options)
    return cached[options]


def _adapter(model: Any, options: ModelOptions) -> ModelAdapter:
    from smug_opt.network.graph import Network

    if _is_torch_module(model):
        model = read_network(model, options)
    if isinstance(model, Network):
        from smug_opt.models.network_adapter import NetworkAdapter

        if options.input_range is not None and model.input_range != options.input_range:
            model = replace(model, input_range=options.input_range)
        if options.input_layout is not None and model.source_layout != _LAYOUT_NAMES[options.input_layout]:
            model = replace(model, source_layout=_LAYOUT_NAMES[options.input_layout])
        from smug_opt.models.catalog import describe

        return NetworkAdapter(model, dtype=describe(model).head_dtype)
    from smug_opt.models.keras_adapter import KerasAdapter

    if options.input_layout is not None:
        raise ValueError("--input-layout is for ONNX and PyTorch models; a Keras model states its layout")
    return KerasAdapter(model)


def _weakrefable(model: Any) -> bool:
    try:
        weakref.ref(model)
    except TypeError:
        return False
    return True


def _is_torch_module(model: Any) -> bool:
    """An ``nn.Module``, recognised without importing torch when it is not loaded."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)
