"""Sufficient Input Subsets on toy text "models" whose sufficient subset is known."""

import numpy as np
import pytest

from smug_opt.evaluate.sis import sufficient_input_subset


class NeedsFiveAndSeven:
    """0.95 with tokens 5 and 7, 0.6 with one of them, 0.2 otherwise; counts calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        hits = (batch == 5).any(axis=1).astype(int) + (batch == 7).any(axis=1)
        return np.array([0.2, 0.6, 0.95])[hits]


def test_sis_is_the_known_pair_and_every_step_is_one_batched_call():
    tokens = np.array([3, 5, 1, 7, 2, 0, 0])  # 0 is padding
    fn = NeedsFiveAndSeven()
    mask = sufficient_input_subset(fn, tokens, 1, threshold=0.8)
    np.testing.assert_array_equal(np.flatnonzero(mask), [1, 3])
    # 1 check of the full input, 4 BackSelect steps over 5,4,3,2 tokens, 1 suffix search
    # over the 0..4 last-removed tokens.
    assert fn.calls == [1, 5, 4, 3, 2, 5]


def test_sis_with_a_lower_threshold_needs_one_token():
    tokens = np.array([3, 5, 1, 7, 2])
    mask = sufficient_input_subset(NeedsFiveAndSeven(), tokens, 1, threshold=0.5)
    assert mask.sum() == 1 and tokens[mask][0] in (5, 7)


def test_sis_of_an_additive_model_keeps_the_heaviest_tokens():
    weights = np.zeros(20)
    weights[[4, 9, 13]] = [3.0, 2.0, 1.0]  # token ids with evidence; the rest weigh 0

    def logistic(batch: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-(weights[batch].sum(axis=1) - 2.5)))

    tokens = np.array([4, 1, 13, 2, 9, 3, 4])
    # sigmoid(3 + 3 - 2.5) = 0.97: the two 4s are sufficient for threshold 0.95.
    mask = sufficient_input_subset(logistic, tokens, 1, threshold=0.95)
    np.testing.assert_array_equal(np.flatnonzero(mask), [0, 6])
    assert logistic(np.where(mask, tokens, 0)[None])[0] >= 0.95


def test_sis_for_label_zero_of_a_sigmoid_uses_one_minus_p():
    tokens = np.array([3, 5, 1, 7])  # p(label 1) = 0.95, so p(label 0) = 0.05
    with pytest.raises(ValueError, match=r"0\.05 for label 0"):
        sufficient_input_subset(NeedsFiveAndSeven(), tokens, 0, threshold=0.5)


def test_sis_is_empty_when_the_fully_masked_input_is_already_sufficient():
    tokens = np.array([3, 1, 2])  # p(label 0) = 0.8 with or without any token
    mask = sufficient_input_subset(NeedsFiveAndSeven(), tokens, 0, threshold=0.7)
    assert mask.shape == (3,) and not mask.any()


def test_sis_needs_a_confident_full_input():
    with pytest.raises(ValueError, match="below the SIS threshold"):
        sufficient_input_subset(NeedsFiveAndSeven(), np.array([1, 2]), 1, threshold=0.5)


def test_sis_needs_integer_tokens():
    with pytest.raises(ValueError, match="1-D integer array"):
        sufficient_input_subset(NeedsFiveAndSeven(), np.ones((2, 3)), 1, threshold=0.5)
