"""LSC: the formula on known boxes, the area floor, the threshold sweep, OptBox, batching."""

import math

import numpy as np
import pytest

from smug_opt.evaluate.boxes import Box, tightest_box
from smug_opt.evaluate.lsc import box_lsc, lsc_score, lsc_value, opt_box, sweep_thresholds

HIT, MISS = 0.9, 0.01
SQUARE = Box(4, 10, 8, 14)


class SquareDetector:
    """Confidence HIT if a crop shows any of the bright square, else MISS; counts calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        seen = batch.reshape(len(batch), -1).max(axis=1) > 0.5
        p = np.where(seen, HIT, MISS)
        return np.stack([1 - p, p], axis=1)


class FillDetector(SquareDetector):
    """Confidence grows with the share of the crop the bright square fills."""

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        fill = (batch.reshape(len(batch), -1) > 0.5).mean(axis=1)
        p = MISS + (HIT - MISS) * fill
        return np.stack([1 - p, p], axis=1)


def square_image(shape=(20, 20), box=SQUARE) -> np.ndarray:
    image = np.zeros((*shape, 1))
    image[box.top : box.bottom, box.left : box.right] = 1.0
    return image


def test_lsc_of_a_known_box():
    result = box_lsc(SquareDetector(), square_image(), 1, Box(0, 5, 10, 15))
    assert result.a == pytest.approx(0.25)
    assert result.c == pytest.approx(HIT)
    assert result.lsc == pytest.approx(math.log(0.25) - math.log(HIT))
    assert result.threshold is None


def test_lsc_of_a_box_missing_the_object_is_high():
    result = box_lsc(SquareDetector(), square_image(), 1, Box(10, 0, 20, 10))
    assert result.lsc == pytest.approx(math.log(0.25) - math.log(MISS))


def test_area_floor_makes_all_tiny_boxes_score_as_five_percent():
    tiny, tinier = Box(4, 10, 8, 14), Box(5, 11, 6, 12)  # 4% and 0.25% of the image
    fn = SquareDetector()
    r1, r2 = (box_lsc(fn, square_image(), 1, b) for b in (tiny, tinier))
    assert r1.a == pytest.approx(0.04) and r2.a == pytest.approx(0.0025)
    assert r1.lsc == pytest.approx(r2.lsc) == pytest.approx(math.log(0.05) - math.log(HIT))
    assert lsc_value(0.01, 1.0, area_floor=0.2) == pytest.approx(math.log(0.2))


def test_lsc_of_zero_confidence_is_infinite():
    assert lsc_value(0.5, 0.0) == math.inf


def test_threshold_sweep_picks_the_best_threshold():
    saliency = np.ones((20, 20))
    saliency[4:8, 10:14] = 2.0  # the square
    saliency[4:8, 14:16] = 3.0  # its neighbour, without the object
    fn = SquareDetector()
    result = lsc_score(fn, square_image(), 1, saliency)
    # t=0: whole image, lsc=-log .9; t=2: the neighbour only, c=MISS; t=1: both, a=.06.
    assert result.threshold == 1.0
    assert result.box == Box(4, 10, 8, 16)
    assert result.lsc == pytest.approx(math.log(0.06) - math.log(HIT))
    assert fn.calls == [3]  # one batched call over the three distinct boxes


def test_binary_map_gives_one_box():
    mask = np.zeros((20, 20), dtype=bool)
    mask[3:9, 9:15] = True
    fn = SquareDetector()
    result = lsc_score(fn, square_image(), 1, mask)
    assert result.box == Box(3, 9, 9, 15) and result.threshold == 0.0
    assert fn.calls == [1]


def test_continuous_map_is_scored_in_one_batched_call_over_its_distinct_boxes():
    saliency = np.random.default_rng(0).random((20, 20))
    thresholds = sweep_thresholds(saliency)
    distinct = {tightest_box(saliency > t) for t in thresholds}
    fn = SquareDetector()
    lsc_score(fn, square_image(), 1, saliency)
    assert 95 <= thresholds.size <= 101
    assert fn.calls == [len(distinct)]


def test_sweep_thresholds_follows_the_paper_code():
    saliency = np.arange(1.0, 1001.0).reshape(25, 40)
    t = sweep_thresholds(saliency)
    assert t[0] == 0.0 and np.all(np.diff(t) > 0) and t[-1] < saliency.max()
    assert 95 <= t.size <= 101


def test_map_without_any_box_is_an_error():
    with pytest.raises(ValueError, match="no box exists"):
        lsc_score(SquareDetector(), square_image(), 1, np.zeros((20, 20)))


def test_map_of_the_wrong_shape_is_an_error():
    with pytest.raises(ValueError, match=r"does not match the image's \(H, W\)"):
        lsc_score(SquareDetector(), square_image(), 1, np.ones((10, 20)))


def test_logits_instead_of_probabilities_are_an_error():
    with pytest.raises(ValueError, match="not logits"):
        box_lsc(lambda b: np.full((len(b), 2), 3.0), square_image(), 1, Box(0, 0, 5, 5))


def test_opt_box_finds_the_known_best_box_in_batched_calls():
    # 30x30 image: the grid lines are at multiples of 3; the square is exactly 2x2 cells.
    target = Box(9, 12, 15, 18)
    fn = FillDetector()
    result = opt_box(fn, square_image((30, 30), target), 1, batch_size=256)
    assert result.box == target
    assert result.c == pytest.approx(HIT)
    assert result.lsc == pytest.approx(math.log(0.05) - math.log(HIT))
    assert sum(fn.calls) == 2025
    assert len(fn.calls) == math.ceil(2025 / 256)
