"""One framework-free description of a network, which the Keras, ONNX and PyTorch readers
all produce and everything downstream reads (the whole-network encoder, bounds, ``verify``).

- :mod:`smug_opt.network.graph`: the structured graph (operations as the file states them,
  per example, channels first), with a float64 forward pass;
- :mod:`smug_opt.network.flat`: the same network lowered to flat vectors (every linear
  operation one sparse matrix), the form bounds and encoders work on.
"""
