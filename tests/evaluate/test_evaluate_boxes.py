"""Box geometry: tightest box, bilinear crop-and-resize, CenterBox, MaxBox, OptBox grid."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from smug_opt.evaluate.boxes import (
    Box,
    center_box,
    crop_and_resize,
    grid_boxes,
    ground_truth_box,
    max_box,
    tightest_box,
)


def test_tightest_box_of_two_pixels():
    mask = np.zeros((10, 12), dtype=bool)
    mask[2, 3] = mask[5, 7] = True
    assert tightest_box(mask) == Box(2, 3, 6, 8)


def test_tightest_box_of_empty_mask_is_an_error():
    with pytest.raises(ValueError, match="no selected pixel"):
        tightest_box(np.zeros((4, 4)))


@settings(max_examples=50, deadline=None)
@given(arrays(bool, st.tuples(st.integers(1, 12), st.integers(1, 12))).filter(np.any))
def test_tightest_box_contains_every_pixel_and_touches_them(mask):
    box = tightest_box(mask)
    inside = box.mask(mask.shape)
    assert not np.any(mask & ~inside)
    sub = mask[box.top : box.bottom, box.left : box.right]
    assert sub[0].any() and sub[-1].any() and sub[:, 0].any() and sub[:, -1].any()


def test_crop_and_resize_of_a_ramp_is_exact_bilinear_with_half_pixel_centres():
    image = np.repeat(np.arange(4.0)[:, None, None], 3, axis=1)  # rows 0..3, (4, 3, 1)
    out = crop_and_resize(image, [max_box((4, 3))], size=(8, 3))
    assert out.shape == (1, 8, 3, 1)
    expected = np.clip((np.arange(8) + 0.5) / 2 - 0.5, 0, 3)
    np.testing.assert_allclose(out[0, :, 1, 0], expected)


def test_crop_and_resize_of_the_whole_input_is_the_identity_and_keeps_float_dtype():
    image = np.random.default_rng(0).random((9, 7, 2)).astype(np.float32)
    out = crop_and_resize(image, [max_box((9, 7)), Box(2, 1, 5, 4)])
    assert out.dtype == np.float32 and out.shape == (2, 9, 7, 2)
    np.testing.assert_array_equal(out[0], image)


def test_crop_and_resize_of_a_constant_crop_is_that_constant():
    image = np.zeros((10, 10, 1), dtype=np.uint8)
    image[2:5, 3:8] = 200
    out = crop_and_resize(image, Box(2, 3, 5, 8))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 200.0)


def test_crop_and_resize_rejects_a_box_outside_the_image():
    with pytest.raises(ValueError, match="outside an input"):
        crop_and_resize(np.zeros((5, 5, 1)), [Box(0, 0, 6, 5)])


@pytest.mark.parametrize("shape", [(28, 28), (224, 224), (299, 299), (30, 50), (7, 3)])
def test_center_box_is_centred_with_half_the_area(shape):
    box = center_box(shape)
    assert abs(box.area_fraction(shape) - 0.5) <= 1 / shape[0] + 1 / shape[1]
    assert abs(box.top - (shape[0] - box.bottom)) <= 1
    assert abs(box.left - (shape[1] - box.right)) <= 1


def test_max_box_is_the_whole_input():
    assert max_box((28, 30)) == Box(0, 0, 28, 30)
    assert max_box((28, 30)).area_fraction((28, 30)) == 1.0


def test_grid_boxes_match_the_paper_code_count_and_lattice():
    boxes = grid_boxes((224, 224))
    assert len(boxes) == 2025 == len(set(boxes))
    lattice = {int(k * 22.4) for k in range(11)}
    assert all({b.top, b.bottom, b.left, b.right} <= lattice for b in boxes)
    assert min(b.height for b in boxes) == int(2 * 22.4)  # spans >= 2 cells
    assert Box(0, 0, 224, 224) in boxes


def test_grid_boxes_reject_an_input_smaller_than_the_grid():
    with pytest.raises(ValueError, match="at least that size"):
        grid_boxes((8, 8))


def test_ground_truth_box_is_the_digit_bounding_box():
    image = np.zeros((28, 28, 1))
    image[5:20, 9:17] = 0.5
    image[5, 9] = 0.0  # a background pixel inside the box does not matter
    assert ground_truth_box(image) == Box(5, 9, 20, 17)
