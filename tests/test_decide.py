"""The can't-tell answer: a language above the threshold, else a confusable group that holds enough mass, else none."""

import numpy as np
import pytest

from pixelpipe.deploy.decide import Decider, confusable_groups, selective_accuracy

LABELS = ["bs", "hr", "sr-Latn", "de", "fr"]


def test_groups_come_from_the_registry_and_need_two_labels():
    groups = confusable_groups(LABELS)
    assert groups["bcms"] == ["bs", "hr", "sr-Latn"]
    assert "german" not in groups  # de alone among these labels (nds absent)
    assert confusable_groups(["positive", "negative"]) == {}  # a user corpus's labels: no groups


def test_confident_answer_is_the_label():
    d = Decider(LABELS, 0.9).decide(np.array([[0.01, 0.01, 0.01, 0.95, 0.02]]))
    assert d.label.tolist() == [3] and d.group == [None] and d.probability[0] == pytest.approx(0.95)


def test_split_between_relatives_is_their_group_with_the_summed_probability():
    d = Decider(LABELS, 0.9).decide(np.array([[0.5, 0.45, 0.02, 0.02, 0.01]]))
    assert d.label.tolist() == [-1] and d.group == ["bcms"]
    assert d.probability[0] == pytest.approx(0.97)
    assert d.answered.tolist() == [True]


def test_split_between_unrelated_languages_is_undecided():
    d = Decider(LABELS, 0.9).decide(np.array([[0.02, 0.02, 0.02, 0.5, 0.44], [np.nan] * 5]))
    assert d.label.tolist() == [-1, -1] and d.group == [None, None]
    assert d.answered.tolist() == [False, False]


def test_threshold_zero_always_answers_the_argmax():
    probs = np.random.default_rng(0).dirichlet(np.ones(5), 50)
    d = Decider(LABELS, 0.0).decide(probs)
    assert (d.label == probs.argmax(1)).all()


def test_threshold_is_checked():
    with pytest.raises(ValueError, match="threshold"):
        Decider(LABELS, 1.5)


def test_selective_accuracy_trades_answers_for_accuracy():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 5, 400)
    conf = rng.uniform(0.2, 1.0, 400)
    right = rng.uniform(size=400) < conf  # calibrated by construction
    probs = np.full((400, 5), 0.0)
    guess = np.where(right, truth, (truth + 3) % 5)  # wrong guesses go outside the bcms group
    probs[np.arange(400), guess] = conf
    probs += (1 - conf)[:, None] / 5
    rows = selective_accuracy(Decider(LABELS), probs, truth, thresholds=(0.0, 0.9))
    assert rows[0]["answered"] == 1.0
    assert rows[1]["answered"] < rows[0]["answered"]
    assert rows[1]["accuracy"] > rows[0]["accuracy"]
