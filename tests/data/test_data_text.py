"""Synthetic reviews with planted rationales, their vocabulary and the CSV loader."""

import numpy as np
import pytest

from smug_opt.data import EncodedTexts, Vocabulary, default_vocabulary, load_reviews, load_text_csv
from smug_opt.data.text import NEGATIVE_WORDS, PAD_ID, POSITIVE_WORDS, UNK_ID


@pytest.fixture(scope="module")
def reviews():
    return load_reviews()


def test_vocabulary_layout():
    vocab = default_vocabulary()
    assert vocab.words[:2] == ("<pad>", "<unk>")
    assert vocab.size == 2 + len(POSITIVE_WORDS) + len(NEGATIVE_WORDS) + 1000
    assert len(set(vocab.words)) == vocab.size
    assert default_vocabulary().words == vocab.words  # deterministic


def test_encode_decode_round_trip_with_unknown_words_and_padding():
    vocab = default_vocabulary(seq_len=8)
    filler = vocab.words[50]
    ids = vocab.encode(f"Great, {filler.upper()} beer... zzzqqq bland!")
    assert ids.shape == (8,) and ids.dtype == np.int64
    assert ids[3] == UNK_ID and np.all(ids[5:] == PAD_ID)
    assert vocab.decode(ids) == ["great", filler, "<unk>", "<unk>", "bland", "<pad>", "<pad>", "<pad>"]
    assert vocab.decode(ids, skip_padding=True)[-1] == "bland"


def test_encode_truncates_to_seq_len():
    vocab = default_vocabulary(seq_len=3)
    np.testing.assert_array_equal(
        vocab.encode("great bad flat sour"), [vocab.id(w) for w in ("great", "bad", "flat")]
    )


def test_decode_rejects_bad_ids():
    vocab = default_vocabulary()
    with pytest.raises(ValueError, match=r"\[0, 1026\)"):
        vocab.decode(np.array([0, vocab.size]))
    with pytest.raises(ValueError, match="1-D integer"):
        vocab.decode(np.array([1.5]))


def test_vocabulary_validates_its_words():
    with pytest.raises(ValueError, match="start with"):
        Vocabulary(("a", "b"))
    with pytest.raises(ValueError, match="distinct"):
        Vocabulary(("<pad>", "<unk>", "a", "a"))


def test_reviews_shapes_and_determinism(reviews):
    assert reviews.x_train.shape == reviews.rationale_train.shape == (2000, 100)
    assert reviews.x_test.shape == (500, 100) and reviews.y_test.shape == (500,)
    assert load_reviews() is reviews
    fresh = load_reviews.__wrapped__()
    for name in ("x_train", "y_train", "rationale_train", "x_test", "y_test", "rationale_test"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(reviews, name))
    assert 0.4 < reviews.y_train.mean() < 0.6
    assert not np.array_equal(load_reviews(seed=1).x_train, reviews.x_train)


def test_labels_follow_the_planted_words_and_rationale_marks_exactly_them(reviews):
    vocab = reviews.vocab
    positive = np.isin(reviews.x_train, [vocab.id(w) for w in POSITIVE_WORDS])
    negative = np.isin(reviews.x_train, [vocab.id(w) for w in NEGATIVE_WORDS])
    np.testing.assert_array_equal(reviews.rationale_train, positive | negative)
    n_pos, n_neg = positive.sum(axis=1), negative.sum(axis=1)
    np.testing.assert_array_equal(reviews.y_train, (n_pos > n_neg).astype(np.int64))
    assert np.all(np.maximum(n_pos, n_neg) >= 2) and np.all(n_pos != n_neg)
    assert np.all(reviews.rationale_train.sum(axis=1) <= 9)


def test_reviews_are_padded_only_at_the_end(reviews):
    lengths = (reviews.x_train != PAD_ID).sum(axis=1)
    assert lengths.min() >= 50 and lengths.max() <= 100
    for row, length in zip(reviews.x_train[:50], lengths[:50], strict=True):
        assert np.all(row[:length] != PAD_ID) and np.all(row[length:] == PAD_ID)
    assert not np.isin(UNK_ID, reviews.x_train)


def test_reviews_reject_impossible_sizes():
    with pytest.raises(ValueError, match="seq_len"):
        load_reviews(seq_len=5)
    with pytest.raises(ValueError, match="positive"):
        load_reviews(n_test=0)


def test_load_text_csv_with_and_without_labels(tmp_path):
    vocab = default_vocabulary()
    path = tmp_path / "reviews.csv"
    path.write_text('text,label\n"Great, smooth beer",1\nstale and flat,0\n', encoding="utf-8")
    loaded = load_text_csv(path, vocab)
    assert isinstance(loaded, EncodedTexts)
    assert loaded.texts == ("Great, smooth beer", "stale and flat")
    np.testing.assert_array_equal(loaded.ids[0], vocab.encode("Great, smooth beer"))
    np.testing.assert_array_equal(loaded.labels, [1, 0])
    path.write_text("id,text\n7,great\n", encoding="utf-8")
    assert load_text_csv(path, vocab).labels is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("review,label\ngreat,1\n", "needs a 'text' column"),
        ("text,label\ngreat,yes\n", "line 2: label must be 0 or 1"),
        ("text\n", "no rows"),
    ],
)
def test_load_text_csv_errors(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_text_csv(path, default_vocabulary())


def test_load_text_csv_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such CSV"):
        load_text_csv(tmp_path / "missing.csv", default_vocabulary())
