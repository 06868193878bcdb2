"""An input saved in the channels-first layout of PyTorch and ONNX is read as the same image,
never reshaped into interleaved channels: one rule (:func:`smug_opt.input_layout.in_input_shape`)
for the Python API, ``--input`` files, batch rows and ``evaluate --images``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smug_opt.input_layout import in_input_shape


def test_channels_first_arrays_are_transposed_and_others_reshaped() -> None:
    x = np.arange(3 * 4 * 5, dtype=np.float64).reshape(3, 4, 5)
    assert np.array_equal(in_input_shape(x, (4, 5, 3)), x.transpose(1, 2, 0))
    assert np.array_equal(in_input_shape(x[None], (4, 5, 3)), x.transpose(1, 2, 0))  # a batch of one
    picture = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(in_input_shape(picture, (3, 4, 1)), picture[:, :, None])
    assert np.array_equal(in_input_shape(picture.ravel(), (3, 4, 1)), picture[:, :, None])
    cube = np.arange(27.0).reshape(3, 3, 3)
    assert in_input_shape(cube, (3, 3, 3)) is cube  # both layouts at once: taken as channels last
    assert in_input_shape(x, (4, 4, 3)).shape == (3, 4, 5)  # another size: left for the caller to name


@pytest.fixture(scope="module")
def rgb_adapter():
    pytest.importorskip("torch")
    from smug_opt.models.resolve import as_adapter

    return as_adapter("network_cases:rgb_torch_cnn", input_range=(0.0, 1.0))


def test_a_channels_first_input_gives_the_model_s_own_prediction(rgb_adapter, tmp_path: Path) -> None:
    import torch
    from network_cases import rgb_torch_cnn

    from smug_opt.evaluate.loaders import load_image_folder
    from smug_opt.inputs import load_input

    assert tuple(rgb_adapter.input_shape) == (8, 8, 3)
    x = np.random.default_rng(0).uniform(size=(3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected = rgb_torch_cnn().eval()(torch.from_numpy(x[None])).numpy()
    shown = x.transpose(1, 2, 0)
    assert np.array_equal(rgb_adapter.model_input(x), shown)
    np.testing.assert_allclose(rgb_adapter.predict(rgb_adapter.model_input(x)[None]), expected, rtol=1e-5,
                               atol=1e-6)
    np.save(tmp_path / "nchw.npy", x)
    read, _ = load_input(tmp_path / "nchw.npy", tuple(rgb_adapter.input_shape), 1.0)
    assert np.array_equal(read, shown)
    images, names = load_image_folder(tmp_path, size=(8, 8))
    assert names == ["nchw"] and np.array_equal(images[0], shown)
