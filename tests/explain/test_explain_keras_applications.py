"""SMUG end to end on the keras.applications architectures (built offline, weights=None) at
224×224×3: the encoded rows against Keras' own first-layer output (folded BatchNorm
included) on masked inputs, and a verified mask that keeps the selected neurons active."""

import numpy as np
import pytest

from smug_opt.models._keras import import_keras

# name → how its inputs are preprocessed (keras.applications' preprocess_input modes)
ARCHITECTURES = {
    "VGG16": "caffe",
    "ResNet50": "caffe",
    "MobileNetV2": "tf",
    "InceptionV3": "tf",
    "DenseNet121": "torch",
    "EfficientNetB0": "raw",
    "ConvNeXtTiny": "raw",
}


def _photo(mode):
    """A real photograph (scikit-learn's china.jpg), resized and preprocessed for ``mode``."""
    from pathlib import Path

    import sklearn

    from smug_opt.inputs import load_input

    path = Path(sklearn.__file__).parent / "datasets" / "images" / "china.jpg"
    return load_input(path, (224, 224, 3), 255.0, mode)[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_explain_on_keras_applications(name):
    from smug_opt.encode.first_layer import encode_first_layer
    from smug_opt.explanation import explain
    from smug_opt.models.resolve import as_adapter

    keras = import_keras()
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(224, 224, 3))
    adapter = as_adapter(model)
    x = _photo(ARCHITECTURES[name])
    xa = adapter.affine_input(x)

    # the folded first layer is Keras' own, on random cell masks
    rng = np.random.default_rng(0)
    neurons = rng.choice(adapter.affine.num_neurons, size=200, replace=False)
    encoding = encode_first_layer(adapter.affine, xa, neurons, grid=adapter.mask_grid(4))
    for _ in range(2):
        m = (rng.random(encoding.grid.num_cells) < 0.5).astype(float)
        keep = m[encoding.grid.cell_of]
        masked = (xa.reshape(keep.size, -1) * keep[:, None]).reshape(xa.shape)
        keras_o = adapter.stem_preactivation(masked[None])[0].reshape(-1)[neurons]
        activity = encoding.problem.A @ m - encoding.problem.rhs
        np.testing.assert_allclose(activity, keras_o, rtol=1e-3, atol=1e-4 * np.abs(keras_o).max())

    # random weights: MobileNetV2 scores every class alike, which predicts no class (explain
    # would ask for a target), so the test names the first top class
    target = int(np.argmax(adapter.predict(x[None])[0]))
    e = explain(adapter, x, k=300, cell=4, steps=16, backend="highs", time_limit=60, target=target)
    assert e.result.verified and e.result.status.name in ("OPTIMAL", "FEASIBLE")
    assert e.mask.shape == (224, 224) and e.grid.shape == (56, 56)
    masked = xa * e.mask[..., None]
    kept = adapter.stem_preactivation(masked[None])[0].reshape(-1)[e.neurons]
    assert np.mean(kept > 0) > 0.99  # exact rows; float32 Keras may flip a near-tie
