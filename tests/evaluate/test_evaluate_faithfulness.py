"""Deletion / insertion curves on toy predictors with analytic areas."""

import numpy as np
import pytest

from smug_opt.errors import ParameterError
from smug_opt.evaluate.faithfulness import cell_ids, deletion_curve, insertion_curve
from smug_opt.evaluate.methods import MethodMap, Settings, Subject
from smug_opt.evaluate.scoring import score_map
from smug_opt.parameters import SmugParameters


class RegionMean:
    """Confidence = mean of the image over rows 0:2, cols 0:4 (two 2x2 cells); counts calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        p = batch[:, 0:2, 0:4, 0].mean(axis=(1, 2))
        return np.stack([1 - p, p], axis=1)


IMAGE = np.ones((8, 8, 1))
ON_TARGET = np.zeros((8, 8))
ON_TARGET[0:2, 0:4] = 1.0


def test_cell_ids_cover_the_grid_row_major_with_ragged_edges():
    ids = cell_ids((5, 3), 2)
    assert ids.shape == (5, 3) and ids.max() == 5
    assert ids[0, 0] == ids[1, 1] == 0 and ids[0, 2] == 1 and ids[4, 2] == 5
    np.testing.assert_array_equal(cell_ids((5,), 2), [0, 0, 1, 1, 2])


def test_a_cell_per_axis_cuts_each_axis_by_its_own_size():
    ids = cell_ids((4, 6), (2, 3))
    assert ids.shape == (4, 6) and ids.max() == 3
    assert ids[1, 2] == 0 and ids[0, 3] == 1 and ids[2, 0] == 2 and ids[3, 5] == 3
    np.testing.assert_array_equal(cell_ids((5, 3), (2, 2)), cell_ids((5, 3), 2))
    with pytest.raises(ParameterError, match="cell"):
        cell_ids((4, 6), (2, 3, 1))


def test_the_target_region_as_one_per_axis_cell_is_deleted_in_one_step():
    # Cells of 2x4 pixels: the target (rows 0:2, cols 0:4) is one cell of 8; deleting it
    # first takes the confidence from 1 to 0 in the first step: area = 1/8 * 1/2.
    curve = deletion_curve(RegionMean(), IMAGE, 1, ON_TARGET, cell=(2, 4), steps=None)
    np.testing.assert_allclose(curve.fractions, np.arange(9) / 8)
    np.testing.assert_allclose(curve.confidences[:3], [1.0, 0.0, 0.0])
    assert curve.auc == pytest.approx(1 / 16)


def test_deletion_of_the_right_cells_first_has_the_analytic_area():
    # 16 cells; removing the 2 target cells takes confidence 1 -> 0.5 -> 0: area = 1/16.
    curve = deletion_curve(RegionMean(), IMAGE, 1, ON_TARGET, cell=2, steps=None)
    np.testing.assert_allclose(curve.fractions, np.arange(17) / 16)
    np.testing.assert_allclose(curve.confidences[:4], [1.0, 0.5, 0.0, 0.0])
    assert curve.auc == pytest.approx(1 / 16)


def test_insertion_of_the_right_cells_first_has_the_analytic_area():
    curve = insertion_curve(RegionMean(), IMAGE, 1, ON_TARGET, cell=2, steps=None)
    np.testing.assert_allclose(curve.confidences[:4], [0.0, 0.5, 1.0, 1.0])
    assert curve.auc == pytest.approx(1 - 1 / 16)


def test_a_map_pointing_away_from_the_evidence_scores_badly():
    curve = deletion_curve(RegionMean(), IMAGE, 1, -ON_TARGET, cell=2, steps=None)
    assert curve.auc == pytest.approx(1 - 1 / 16)


def test_curves_are_batched():
    fn = RegionMean()
    deletion_curve(fn, IMAGE, 1, ON_TARGET, cell=2, steps=None, batch_size=5)
    assert fn.calls == [5, 5, 5, 2]


def test_steps_subsample_the_curve_but_keep_both_ends():
    fn = RegionMean()
    curve = deletion_curve(fn, IMAGE, 1, ON_TARGET, cell=1, steps=8)
    assert curve.fractions[0] == 0.0 and curve.fractions[-1] == 1.0
    assert curve.fractions.size == 9 and sum(fn.calls) == 9


def test_text_deletion_replaces_tokens_with_the_mask_id():
    def has_five(batch: np.ndarray) -> np.ndarray:
        return np.where((batch == 5).any(axis=1), 0.9, 0.1)

    tokens = np.array([5, 3, 7, 2])
    curve = deletion_curve(has_five, tokens, 1, np.array([1.0, 0, 0, 0]), baseline=0)
    np.testing.assert_allclose(curve.confidences, [0.9, 0.1, 0.1, 0.1, 0.1])
    assert curve.auc == pytest.approx(0.25 * (0.5 + 0.3))


def test_saliency_shape_must_lead_the_input_shape():
    with pytest.raises(ValueError, match="leading"):
        deletion_curve(RegionMean(), IMAGE, 1, np.ones((4, 4)))


def test_scoring_a_map_uses_the_smug_parameters_per_axis_cell():
    settings = Settings(smug=SmugParameters(cell=(2, 4)), backend="highs", time_limit=1.0,
                        sis_threshold=0.9, mask_id=0, ig_steps=8)
    subject = Subject(model=None, predict_fn=RegionMean(), keras_model=None)
    scores = score_map(subject, settings, IMAGE, 1, None, MethodMap(saliency=ON_TARGET, mask=None))
    expected = deletion_curve(RegionMean(), IMAGE, 1, ON_TARGET, cell=(2, 4)).auc
    assert scores["deletion_auc"] == pytest.approx(expected) == pytest.approx(1 / 16)
