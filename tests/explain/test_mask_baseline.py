"""What a masked value becomes: the baselines and the parameter naming them."""

import numpy as np
import pytest

from smug_opt import SmugParameters
from smug_opt.mask_baseline import BLUR_FRACTION, baseline_input
from smug_opt.parameters import Baseline


def test_baselines_of_a_picture():
    x = np.arange(2 * 3 * 3, dtype=float).reshape(2, 3, 3)
    assert baseline_input("zero", x) is None
    np.testing.assert_array_equal(baseline_input("black", x), np.zeros_like(x))
    mean = baseline_input(Baseline.MEAN, x, pixel_mean=(1.0, 2.0, 3.0))
    np.testing.assert_array_equal(mean, np.broadcast_to([1.0, 2.0, 3.0], x.shape))


def test_blur_keeps_a_constant_picture_and_the_channels_apart():
    x = np.zeros((32, 32, 2))
    x[..., 1] = 7.0
    x[16, 16, 0] = 1.0
    blurred = baseline_input("blur", x)
    np.testing.assert_allclose(blurred[..., 1], 7.0)  # channels are not mixed
    assert blurred[..., 0].sum() == pytest.approx(1.0)  # a Gaussian keeps the mass
    sigma = BLUR_FRACTION * 32
    assert blurred[16, 16, 0] == pytest.approx(1 / (2 * np.pi * sigma**2), rel=0.05)


def test_bad_baselines_say_what_is_wrong():
    with pytest.raises(ValueError, match="baseline must be one of zero, black, mean, blur"):
        SmugParameters(baseline="grey")
    with pytest.raises(ValueError, match="declares none"):
        baseline_input("mean", np.zeros((4, 4)))
    with pytest.raises(ValueError, match="needs a picture"):
        baseline_input("blur", np.zeros(10))
    assert SmugParameters(baseline="blur").baseline is Baseline.BLUR
    assert SmugParameters().updated(baseline="black").describe().endswith("baseline=black")
