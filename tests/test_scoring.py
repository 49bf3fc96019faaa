"""Normalised scores and dataset cards."""

from __future__ import annotations

import json

import pytest

from offlinerl.scoring import CardError, load_card, normalized_score, score_for_dataset
from tests.conftest import DATASETS


def test_normalized_score_anchors_and_hand_values():
    assert normalized_score(21.7, 21.7, 500.0) == 0.0
    assert normalized_score(500.0, 21.7, 500.0) == 100.0
    assert normalized_score(260.85, 21.7, 500.0) == pytest.approx(50.0)
    # negative returns (Pendulum): -1240 random, -148 best; -694 is half way
    assert normalized_score(-694.0, -1240.0, -148.0) == pytest.approx(50.0)
    assert normalized_score(-1300.0, -1240.0, -148.0) == pytest.approx(-60.0 / 1092.0 * 100.0)
    assert normalized_score(600.0, 0.0, 500.0) == pytest.approx(120.0)


def test_normalized_score_refuses_degenerate_anchors():
    with pytest.raises(ValueError, match="must be finite and different"):
        normalized_score(1.0, 5.0, 5.0)
    with pytest.raises(ValueError, match="must be finite and different"):
        normalized_score(1.0, 0.0, float("inf"))


def test_load_card_missing_is_none(tmp_path):
    assert load_card(tmp_path) is None
    assert score_for_dataset(10.0, tmp_path) is None


def test_load_card_reads_anchors(tmp_path):
    (tmp_path / "card.json").write_text(json.dumps({"random_return": 10.0, "best_return": 110.0, "env_id": "X"}))
    card = load_card(tmp_path)
    assert card == {"random_return": 10.0, "best_return": 110.0, "env_id": "X"}
    assert score_for_dataset(60.0, tmp_path) == pytest.approx(50.0)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "does not parse as JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"best_return": 1.0}), "random_return must be a finite number"),
        (json.dumps({"random_return": 0.0, "best_return": "high"}), "best_return must be a finite number"),
    ],
)
def test_load_card_bad_file_names_file_and_problem(tmp_path, text, message):
    (tmp_path / "card.json").write_text(text)
    with pytest.raises(CardError, match=message) as info:
        load_card(tmp_path)
    assert str(tmp_path / "card.json") in str(info.value)


@pytest.mark.parametrize("name", ["cartpole-mixed", "pendulum-mixed", "double-pendulum-mixed"])
def test_shipped_cards_have_anchors(name):
    card = load_card(DATASETS / name)
    assert card is not None and card["best_return"] > card["random_return"]
    assert normalized_score(card["levels"][card["best_level"]]["return_mean"], card["random_return"],
                            card["best_return"]) > 95.0


def test_iqm_is_the_mean_of_the_middle_half():
    from offlinerl.scoring import iqm

    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5  # 3, 4, 5, 6
    assert iqm([100, 0, 20, 10]) == 15.0  # 10 and 20; order does not matter
    assert iqm([5]) == 5.0
    # three runs: the quartiles cut the outer two at a quarter each: (0.25*1 + 2 + 0.25*3) / 1.5
    assert iqm([1, 2, 3]) == pytest.approx(2.0)
    assert iqm([0, 0, 0, 0, 0, 1000]) == pytest.approx(0.0)  # one outlier run does not move it
    with pytest.raises(ValueError):
        iqm([])


def test_bootstrap_ci_resamples_within_tasks():
    from offlinerl.scoring import bootstrap_ci, iqm

    point, low, high = bootstrap_ci({"a": [1.0, 1.0, 1.0], "b": [3.0, 3.0, 3.0]}, iqm, reps=200)
    assert point == low == high == 2.0  # stratified: every replicate keeps three runs of each task
    point, low, high = bootstrap_ci({"a": [0.0, 10.0, 20.0, 30.0]}, iqm, reps=500, seed=1)
    assert point == 15.0 and 0.0 <= low < 15.0 < high <= 30.0
    assert bootstrap_ci({"a": [0.0, 10.0, 20.0, 30.0]}, iqm, reps=500, seed=1) == (point, low, high)  # seeded
