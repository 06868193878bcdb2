"""Model adapters: the first affine layer, Integrated Gradients, forward passes, the zoo.

Importing this package does not import TensorFlow; Keras is loaded on first use.
"""

from smug_opt.models import zoo
from smug_opt.models.base import AffineLayer, ModelAdapter, ReceptiveField
from smug_opt.models.integrated_gradients import (
    Attribution,
    CompletenessWarning,
    integrated_gradients,
    top_k_neurons,
)
from smug_opt.models.keras_adapter import DenseLayer, KerasAdapter, load_model, mlp_layers

__all__ = [
    "AffineLayer",
    "Attribution",
    "CompletenessWarning",
    "DenseLayer",
    "KerasAdapter",
    "ModelAdapter",
    "ReceptiveField",
    "integrated_gradients",
    "load_model",
    "mlp_layers",
    "top_k_neurons",
    "zoo",
]
