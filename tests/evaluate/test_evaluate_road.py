"""ROAD (Rong et al. 2022): the imputation against hand-computed values, the curves on a
linear model whose true attribution is known."""

import numpy as np
import pytest

from smug_opt.evaluate.road import noisy_linear_imputation, road


def test_one_removed_pixel_is_the_weighted_mean_of_its_eight_neighbours():
    x = np.arange(9, dtype=np.float64).reshape(3, 3, 1) ** 2  # not linear: the weights matter
    removed = np.zeros((3, 3), dtype=bool)
    removed[1, 1] = True
    direct = (x[0, 1] + x[2, 1] + x[1, 0] + x[1, 2]) / 6
    diagonal = (x[0, 0] + x[0, 2] + x[2, 0] + x[2, 2]) / 12
    out = noisy_linear_imputation(x, removed, noise=0.0)
    assert out[1, 1, 0] == pytest.approx(float((direct + diagonal)[0]))  # the weights sum to 1
    assert np.array_equal(out[~removed], x[~removed])


def test_a_corner_pixel_averages_over_the_neighbours_inside_the_image():
    x = np.zeros((3, 3, 2))
    x[0, 1], x[1, 0], x[1, 1] = (6.0, 1.0), (12.0, 2.0), (24.0, 3.0)
    removed = np.zeros((3, 3), dtype=bool)
    removed[0, 0] = True
    out = noisy_linear_imputation(x, removed, noise=0.0)
    total = 1 / 6 + 1 / 6 + 1 / 12
    expected = (x[0, 1] / 6 + x[1, 0] / 6 + x[1, 1] / 12) / total
    assert np.allclose(out[0, 0], expected)


def test_a_removed_block_of_a_linear_ramp_is_filled_exactly():
    """Symmetric weights reproduce a linear function: the linear system's solution is the ramp."""
    i, j = np.meshgrid(np.arange(12.0), np.arange(10.0), indexing="ij")
    x = np.stack([2.0 * i - 3.0 * j + 5.0, 0.5 * i + j], axis=-1)
    removed = np.zeros((12, 10), dtype=bool)
    removed[3:9, 2:8] = True
    out = noisy_linear_imputation(x, removed, noise=0.0)
    assert np.allclose(out, x, atol=1e-9)


def test_noise_is_added_only_to_the_imputed_pixels_and_scales_with_the_image():
    x = np.zeros((8, 8, 1))
    x[0, 0] = 100.0
    removed = np.zeros((8, 8), dtype=bool)
    removed[4:, 4:] = True
    out = noisy_linear_imputation(x, removed, noise=0.01, rng=np.random.default_rng(1))
    quiet = noisy_linear_imputation(x, removed, noise=0.0)
    assert np.array_equal(out[~removed], x[~removed])
    spread = np.std(out[removed] - quiet[removed])
    assert 0.3 < spread < 2.0  # 0.01 x the value span 100


def test_removing_every_pixel_is_refused():
    with pytest.raises(ValueError, match="nothing to impute"):
        noisy_linear_imputation(np.ones((2, 2, 1)), np.ones((2, 2), dtype=bool))


class LinearSigmoid:
    """p(class 1) = sigmoid(w · x): the drop when a pixel is removed is w * (x - imputed)."""

    def __init__(self, weights: np.ndarray, bias: float) -> None:
        self.w, self.b = weights, bias

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        z = (batch[..., 0] * self.w).sum(axis=(1, 2)) + self.b
        return 1.0 / (1.0 + np.exp(-z))


def _linear_case() -> tuple[LinearSigmoid, np.ndarray, np.ndarray]:
    """Isolated bright pixels on a black background (imputed back to about 0 when removed),
    positive and negative weights: the true attribution is w * x."""
    rng = np.random.default_rng(0)
    x = np.zeros((16, 16, 1))
    x[::2, ::2, 0] = rng.uniform(0.5, 1.0, (8, 8))
    w = rng.normal(0.0, 0.15, (16, 16))
    model = LinearSigmoid(w, bias=-float((w * x[..., 0]).sum()))  # p = 0.5 at x
    return model, x, w * x[..., 0]


def test_the_true_attribution_ranks_first_under_morf_and_lerf():
    model, x, truth = _linear_case()
    noise = np.random.default_rng(3).normal(0.0, 1.0, truth.shape)
    maps = {"truth": truth, "random": noise, "inverse": -truth}
    results = {name: road(model, x, 1, m) for name, m in maps.items()}
    morf = [results[n].morf for n in maps]
    lerf = [results[n].lerf for n in maps]
    assert morf[0] + 0.3 < morf[1] < morf[2]  # measured 0.09, 0.63, 0.84
    assert lerf[0] > lerf[1] + 0.3 > lerf[2] + 0.3  # measured 0.83, 0.42, 0.11


def test_road_reads_each_level_on_the_imputed_image():
    model, x, _ = _linear_case()
    saliency = np.random.default_rng(5).normal(0.0, 1.0, (16, 16))  # no ties: the order is known
    result = road(model, x, 1, saliency, levels=(0.5,), noise=0.0)
    order = np.argsort(-saliency.ravel())
    removed = np.zeros(saliency.size, dtype=bool)
    removed[order[:128]] = True
    expected = model(noisy_linear_imputation(x, removed.reshape(16, 16), noise=0.0)[None])[0]
    assert result.morf_confidences[0] == pytest.approx(expected)
    assert result.levels.tolist() == [0.5]


def test_road_rejects_a_map_of_the_wrong_shape_and_bad_levels():
    model, x, truth = _linear_case()
    with pytest.raises(ValueError, match="map"):
        road(model, x, 1, truth[:8])
    with pytest.raises(ValueError, match="levels"):
        road(model, x, 1, truth, levels=(0.0, 0.5))
