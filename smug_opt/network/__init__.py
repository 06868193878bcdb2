"""One framework-free description of a network, which the Keras, ONNX and PyTorch readers
all produce and everything downstream reads (the whole-network encoder, bounds, ``verify``).

- :mod:`smug_opt.network.graph`: the structured graph (operations as the file states them,
  per example, channels first), with a float64 forward pass;
- :mod:`smug_opt.network.flat`: the same network lowered to flat vectors (every linear
  operation one sparse matrix), the form bounds and encoders work on;
- :func:`load_model` reads any model a user names (``.onnx``, ``.pt2``, ``.keras``/``.h5``,
  ``package.module:factory``, an embedded name); :func:`lower` gives the flat form.

Importing this package imports no framework: each reader imports its own when called.
"""

from smug_opt.network.flat import FlatLayer, FlatNetwork, Preprocess
from smug_opt.network.graph import Network, Node
from smug_opt.network.keras_reader import read_keras
from smug_opt.network.load import load_model
from smug_opt.network.lower import lower
from smug_opt.network.onnx_reader import read_onnx
from smug_opt.network.torch_reader import read_exported_program, read_torch

__all__ = ["FlatLayer", "FlatNetwork", "Network", "Node", "Preprocess", "load_model", "lower",
           "read_exported_program", "read_keras", "read_onnx", "read_torch"]
