"""SMUG explanations of real Keras models trained on real MNIST digits."""

import json
import subprocess
import sys

import numpy as np
import pytest

from smug_opt import available_backends
from smug_opt.data.mnist import pick_test_digits
from smug_opt.explanation import display_scale, explain
from smug_opt.models import zoo


@pytest.fixture(scope="module")
def cnn():
    return zoo.load("mnist-cnn", progress=False)


@pytest.fixture(scope="module")
def digits():
    return pick_test_digits(3, seed=1)


def _float64_first_layer(model):
    """The model's real first Keras layer, rebuilt in float64 with the same weights."""
    import keras

    layer = next(layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D))
    config = {**layer.get_config(), "dtype": "float64", "activation": "linear"}
    clone = type(layer).from_config(config)
    clone.build((None, *layer.input.shape[1:]))
    clone.set_weights([w.astype(np.float64) for w in layer.get_weights()])
    return clone


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_mask_keeps_selected_neurons_active_in_keras(cnn, digits, gamma):
    _, xs, _ = digits
    layer = _float64_first_layer(cnn)
    for x in xs:
        e = explain(cnn, x, k=150, gamma=gamma, cell=2, backend="highs", time_limit=60)
        assert e.result.status.name == "OPTIMAL" and e.result.verified
        o = np.asarray(layer(x[None].astype(np.float64)))[0].reshape(-1)[e.neurons]
        masked = x * e.mask[..., None]
        o_masked = np.asarray(layer(masked[None].astype(np.float64)))[0].reshape(-1)[e.neurons]
        assert np.all(o_masked > gamma * o)
        assert np.all(e.saliency[~e.mask] == 0) and np.all(e.saliency[e.mask] >= 0)


def test_a_masked_pixel_becomes_the_blur_baseline_in_keras(cnn, digits):
    from smug_opt import SmugParameters
    from smug_opt.mask_baseline import baseline_input

    _, xs, _ = digits
    layer = _float64_first_layer(cnn)
    params = SmugParameters(k=150, gamma=0.5, cell=2, baseline="blur")
    e = explain(cnn, xs[0], params=params, backend="highs", time_limit=60)
    assert e.result.status.name == "OPTIMAL" and e.result.verified
    record = e.record()
    assert record["baseline"] == "blur" and 0 <= record["empty_mask_rows"] <= 150
    blurred = baseline_input("blur", xs[0])
    masked = np.where(e.mask[..., None], xs[0], blurred)
    o = np.asarray(layer(xs[0][None].astype(np.float64)))[0].reshape(-1)[e.neurons]
    o_masked = np.asarray(layer(masked[None].astype(np.float64)))[0].reshape(-1)[e.neurons]
    assert np.all(o_masked > 0.5 * o)
    o_empty = np.asarray(layer(blurred[None].astype(np.float64)))[0].reshape(-1)[e.neurons]
    assert record["empty_mask_rows"] == int(np.count_nonzero(o_empty > 0.5 * o))


def test_smug_is_never_larger_than_smug_base(cnn, digits):
    _, xs, _ = digits
    for x in xs:
        smug = explain(cnn, x, k=150, cell=2, backend="highs", time_limit=60)
        base = explain(cnn, x, method="smug_base", k=150, cell=2)
        assert base.result is None and base.ok
        assert smug.mask_size <= base.mask_size
        assert np.all(base.mask[smug.mask])  # SMUG keeps a subset of the receptive fields


def test_all_backends_agree_on_the_mask_size(cnn, digits):
    _, xs, _ = digits
    backends = [b for b in ("highs", "cpsat", "mip-cbc", "pulp-cbc", "z3") if b in available_backends()]
    sizes = {b: explain(cnn, xs[0], k=100, cell=2, backend=b, time_limit=60).mask_size
             for b in backends}
    assert len(set(sizes.values())) == 1, sizes


def _independent_saliency(cnn, e, cell):
    """The paper's saliency computed from the Keras layer's geometry alone: a kept cell
    scores the summed IG of the selected neurons whose receptive field (kernel window,
    Keras 'same' padding, stride, dilation) covers any of its pixels; 0 elsewhere."""
    import keras

    layer = next(layer for layer in cnn.layers if isinstance(layer, keras.layers.Conv2D))
    config = layer.get_config()
    (kh, kw), (sh, sw), (dh, dw) = config["kernel_size"], config["strides"], config["dilation_rate"]
    height, width = layer.input.shape[1:3]
    out_h, out_w, filters = layer.output.shape[1:]

    def pad_before(size, out, k, s, d):
        if config["padding"] == "valid":
            return 0
        return max((out - 1) * s + (k - 1) * d + 1 - size, 0) // 2

    top, left = pad_before(height, out_h, kh, sh, dh), pad_before(width, out_w, kw, sw, dw)
    ig = e.attributions.values.reshape(-1)
    scores = np.zeros((height // cell, width // cell))
    for t in e.neurons.tolist():
        i, j = divmod(t // filters, out_w)
        rows = {i * sh - top + a * dh for a in range(kh)} & set(range(height))
        cols = {j * sw - left + b * dw for b in range(kw)} & set(range(width))
        for cell_rc in {(r // cell, c // cell) for r in rows for c in cols}:
            scores[cell_rc] += ig[t]
    kept = e.mask[::cell, ::cell]
    return np.kron(np.where(kept, scores, 0.0), np.ones((cell, cell)))


@pytest.mark.parametrize("method", ["smug", "smug_base"])
def test_saliency_is_the_summed_attribution_of_the_neurons_covering_each_kept_cell(cnn, digits, method):
    _, xs, _ = digits
    e = explain(cnn, xs[0], method=method, k=150, cell=2, backend="highs", time_limit=60)
    expected = _independent_saliency(cnn, e, 2)
    assert 0 < e.mask.sum() < e.mask.size
    np.testing.assert_allclose(e.saliency, expected, rtol=1e-9, atol=1e-12)
    nonzero = expected != 0
    lo, hi = expected[nonzero].min(), expected[nonzero].max()
    display = np.where(nonzero, 0.5 + 0.5 * (expected - lo) / (hi - lo), 0.0)
    np.testing.assert_allclose(display_scale(e.saliency), display, rtol=1e-9, atol=1e-12)


def test_display_scale():
    s = np.array([0.0, 2.0, 4.0, 3.0])
    np.testing.assert_allclose(display_scale(s), [0.0, 0.5, 1.0, 0.75])
    np.testing.assert_allclose(display_scale(np.array([0.0, 7.0])), [0.0, 1.0])


def test_bad_method(cnn, digits):
    with pytest.raises(ValueError, match="method"):
        explain(cnn, digits[1][0], method="lime")
    with pytest.raises(ValueError, match="shape"):
        explain(cnn, np.zeros((27, 28, 1)))


def test_cli_default_runs_end_to_end(tmp_path):
    out = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "smug_opt", "explain", "--out", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "OPTIMAL" and record["verified"] is True
    assert record["proof"] in ("exact", "solver")
    assert record["exactness"].startswith("mask verified exactly; ")
    assert f"status OPTIMAL: {record['exactness']}" in proc.stdout  # which part is exact, in words
    assert record["mask_size"] == int(np.load(out / "cell_mask.npy").sum())
    assert (out / "overlay.png").stat().st_size > 0


def test_given_attributions_replace_the_integrated_gradients(cnn, digits):
    from dataclasses import replace

    _, xs, _ = digits
    smug = explain(cnn, xs[0], k=100, cell=2, backend="highs", time_limit=60)
    base = explain(cnn, xs[0], method="smug_base", k=100, cell=2, attributions=smug.attributions)
    assert base.attributions is smug.attributions
    fresh = explain(cnn, xs[0], method="smug_base", k=100, cell=2)
    assert np.array_equal(base.neurons, fresh.neurons) and np.array_equal(base.mask, fresh.mask)
    # the given attributions decide the neurons: reversed ones pick others
    flipped = replace(smug.attributions, values=smug.attributions.values[..., ::-1].copy())
    other = explain(cnn, xs[0], method="smug_base", k=100, cell=2, attributions=flipped)
    assert not np.array_equal(other.neurons, fresh.neurons)
    with pytest.raises(ValueError, match="steps 64 .expected 8."):
        explain(cnn, xs[0], method="smug_base", k=100, cell=2, steps=8, attributions=smug.attributions)
    wrong = (smug.attributions.target + 1) % 10
    with pytest.raises(ValueError, match="target"):
        explain(cnn, xs[0], method="smug_base", k=100, cell=2, target=wrong, attributions=smug.attributions)
