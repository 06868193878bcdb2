"""Model adapters: the first affine layer, its activation, the mask grid, Integrated
Gradients, forward passes, the Dense-stack reading for the stress case, the zoo, and the
one resolution of a model (:func:`as_adapter`: Keras, ONNX, PyTorch, a Network).

Importing this package imports no framework: Keras and PyTorch load on first use.
"""

from smug_opt.models import zoo
from smug_opt.models.activations import Activation
from smug_opt.models.base import AffineLayer, ModelAdapter, ReceptiveField
from smug_opt.models.grid import CellGrid, cell_grid
from smug_opt.models.integrated_gradients import (
    Attribution,
    CompletenessWarning,
    integrated_gradients,
    top_k_neurons,
)
from smug_opt.models.keras_adapter import KerasAdapter, load_model
from smug_opt.models.mlp import MLP, DenseLayer, as_mlp, mlp_layers, verify_mask_in_model
from smug_opt.models.network_adapter import NetworkAdapter
from smug_opt.models.resolve import ModelOptions, as_adapter

__all__ = [
    "MLP",
    "Activation",
    "AffineLayer",
    "Attribution",
    "CellGrid",
    "CompletenessWarning",
    "DenseLayer",
    "KerasAdapter",
    "ModelAdapter",
    "ModelOptions",
    "NetworkAdapter",
    "ReceptiveField",
    "as_adapter",
    "as_mlp",
    "cell_grid",
    "integrated_gradients",
    "load_model",
    "mlp_layers",
    "top_k_neurons",
    "verify_mask_in_model",
    "zoo",
]
