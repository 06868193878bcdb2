"""Aggregate metrics: Win% with ties, Wilson intervals, sparsity, quartiles, precision/recall."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from smug_opt.evaluate.aggregates import (
    lsc_quartiles,
    mean_estimate,
    sparsity,
    token_precision_recall,
    wilson_interval,
    win_rates,
)


def test_wilson_interval_known_values():
    # 0 of 10: the upper bound is z^2 / (n + z^2).
    z2 = 1.959963984540054**2
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(z2 / (10 + z2))
    # 81 of 263 at 95%: (0.2553, 0.3662).
    assert wilson_interval(81, 263) == pytest.approx((0.25529, 0.36621), abs=1e-5)


@pytest.mark.parametrize(("k", "n", "conf"), [(1, 3, 0.95), (1351, 3304, 0.95), (7, 50, 0.9)])
def test_wilson_interval_matches_scipy(k, n, conf):
    ci = binomtest(k, n).proportion_ci(confidence_level=conf, method="wilson")
    assert wilson_interval(k, n, conf) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError, match="successes=11, n=10"):
        wilson_interval(11, 10)


def test_win_rates_count_ties_for_every_tied_method():
    lsc = {
        "a": [-1.0, -2.0, 0.5, -1.0],
        "b": [-1.0, -1.0, 0.2, -3.0],
        "c": [0.0, -2.0, 0.3, math.nan],
    }
    wins = win_rates(lsc)
    assert wins["a"].value == pytest.approx(2 / 4)  # inputs 0 (tie with b) and 1 (tie with c)
    assert wins["b"].value == pytest.approx(3 / 4)  # inputs 0, 2, 3
    assert wins["c"].value == pytest.approx(1 / 4)  # input 1; NaN never wins
    assert sum(w.value for w in wins.values()) > 1
    assert (wins["b"].low, wins["b"].high) == pytest.approx(wilson_interval(3, 4))
    assert wins["b"].interval == "wilson" and wins["b"].n == 4


def test_win_rates_input_without_any_score_has_no_winner():
    wins = win_rates({"a": [math.nan, 1.0], "b": [math.nan, 2.0]})
    assert wins["a"].value == 0.5 and wins["b"].value == 0.0


def test_win_rates_need_two_methods_of_equal_length():
    with pytest.raises(ValueError, match="at least two methods"):
        win_rates({"a": [1.0]})
    with pytest.raises(ValueError, match="same number of inputs"):
        win_rates({"a": [1.0, 2.0], "b": [1.0]})


def test_sparsity_is_the_mean_kept_fraction_with_a_normal_interval():
    masks = [np.array([1, 0, 0, 0], bool), np.array([1, 1, 0, 0], bool), np.ones(4, bool)]
    est = sparsity(masks)
    fractions = np.array([0.25, 0.5, 1.0])
    assert est.value == pytest.approx(fractions.mean())
    half = 1.959963984540054 * fractions.std(ddof=1) / math.sqrt(3)
    assert (est.low, est.high) == pytest.approx((est.value - half, min(1.0, est.value + half)))
    assert est.interval == "normal"


def test_sparsity_interval_is_clipped_to_fractions():
    est = sparsity([np.zeros(10, bool)] * 3 + [np.array([1] + [0] * 9, bool)])
    assert est.value == pytest.approx(0.025) and est.low == 0.0 and est.high > est.value


def test_mean_estimate_of_one_value_has_zero_width_and_skips_nan():
    est = mean_estimate([0.3, math.nan])
    assert (est.value, est.low, est.high, est.n) == (0.3, 0.3, 0.3, 1)


def test_lsc_quartiles():
    q = lsc_quartiles([4.0, 1.0, 3.0, 2.0, 5.0, math.nan])
    assert (q.median, q.q25, q.q75, q.n) == (3.0, 2.0, 4.0, 5)


def test_token_precision_recall():
    mask = np.array([1, 1, 0, 0, 1], bool)
    rationale = np.array([1, 0, 0, 1, 1], bool)
    pr = token_precision_recall(mask, rationale)
    assert (pr.precision, pr.recall) == pytest.approx((2 / 3, 2 / 3))
    empty = token_precision_recall(np.zeros(5, bool), rationale)
    assert math.isnan(empty.precision) and empty.recall == 0.0
    with pytest.raises(ValueError, match="does not match rationale shape"):
        token_precision_recall(mask, rationale[:3])
