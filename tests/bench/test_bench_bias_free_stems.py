"""The ``bias-free-stems`` suite: paper-scale stems without bias, every row ``a·M > 0``."""

import numpy as np
import pytest

from smug_opt.bench import get_suite
from smug_opt.bench.bias_free_stems import photo


def _spec(name):
    return next(s for s in get_suite("bias-free-stems").specs() if s.name == name)


def test_the_suite_names_random_and_photo_stems_and_keras_architectures():
    names = {s.name for s in get_suite("bias-free-stems").specs()}
    assert {"conv3s2-f32-random-s0", "conv7s2-f64-random-s0", "conv7s2-f64-china-s0",
            "keras-ResNet50-china", "keras-DenseNet121-china"} <= names


@pytest.mark.parametrize("name", ["conv3s2-f32-random-s0", "conv7s2-f64-flower-s0"])
def test_a_random_stem_instance_is_homogeneous_and_reproducible(name):
    """3,000 strict rows over 56×56 cells with right-hand sides exactly 0, many with mixed
    signs (zero-mean weights), at most the cells one window spans, built the same twice."""
    build = get_suite("bias-free-stems").builder
    first, second = build(_spec(name)), build(_spec(name))
    assert (first.num_rows, first.num_vars) == (3000, 56 * 56)
    assert np.all(first.rhs == 0) and np.all(first.senses == first.senses[0])
    assert first.has_strict and "no bias" in first.metadata["layer"]
    assert sum(first.A[i].data.min() < 0 for i in range(first.num_rows)) > first.num_rows / 10
    assert (first.A != second.A).nnz == 0
    width = 2 if name.startswith("conv3") else 3  # cells a window spans per axis
    assert np.diff(first.A.indptr).max() <= width * width


def test_photos_are_224_rgb_pixels():
    pixels = photo("china")
    assert pixels.shape == (224, 224, 3) and pixels.dtype == np.uint8 and pixels.std() > 10
    with pytest.raises(ValueError, match="unknown photo 'lena'"):
        photo("lena")
