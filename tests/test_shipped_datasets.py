"""Every shipped dataset validates clean, and the numbers on its card equal ``inspect``'s."""

from __future__ import annotations

import json

import pytest

from offlinerl.episodes.stats import dataset_stats
from offlinerl.episodes.validate import validate_dataset
from tests.conftest import DATASETS

SHIPPED = sorted(p.parent for p in DATASETS.glob("*/dataset.json"))
#: card.json key -> how to read the same number from dataset_stats().
CARD_COUNTS = {"num_episodes": lambda s: s["episodes"], "num_steps": lambda s: s["steps"]}
CARD_RETURNS = {
    "return_mean": lambda s: s["returns"]["mean"],
    "return_min": lambda s: s["returns"]["min"],
    "return_max": lambda s: s["returns"]["max"],
}

if not SHIPPED:
    pytestmark = pytest.mark.skip(reason=f"no shipped datasets in {DATASETS} yet (datasets/<name>/dataset.json)")


@pytest.mark.parametrize("path", SHIPPED or [None], ids=[p.name for p in SHIPPED] or ["none"])
def test_shipped_dataset_is_valid_and_matches_its_card(path, ray_session):
    report = validate_dataset(path)
    assert report.exit_code == 0, report.format()

    card_file = path / "card.json"
    assert card_file.is_file(), f"{path.name} has no card.json"
    card = json.loads(card_file.read_text())
    stats = dataset_stats(path)
    if card.get("agents"):  # multi-agent: rows are agent episodes; the card's returns are team returns
        _check_team_card(path, card, stats)
        return
    for key, read in CARD_COUNTS.items():
        assert card[key] == read(stats), f"{card_file}: {key} = {card[key]}, inspect says {read(stats)}"
    for key, read in CARD_RETURNS.items():
        assert card[key] == pytest.approx(read(stats), rel=1e-4, abs=1e-6), (
            f"{card_file}: {key} = {card[key]}, inspect says {read(stats)}")
    assert card.get("levels"), f"{card_file}: no behaviour levels listed"


def _check_team_card(path, card, stats) -> None:
    from offlinerl.episodes import load_episodes

    assert card["num_rows"] == stats["episodes"] and card["num_steps"] == stats["steps"]
    team: dict[str, float] = {}
    for e in load_episodes(path):
        assert e.agent_id in card["agents"]
        team[e.id] = team.get(e.id, 0.0) + e.episode_return
    assert card["num_episodes"] == len(team) == stats["episodes"] // len(card["agents"])
    values = list(team.values())
    assert card["return_mean"] == pytest.approx(sum(values) / len(values), rel=1e-4)
    assert card["return_min"] == pytest.approx(min(values), rel=1e-4)
    assert card["return_max"] == pytest.approx(max(values), rel=1e-4)
    # inspect's team numbers are the card's (its episodes/returns lines count agent episodes)
    assert stats["team"]["episodes"] == card["num_episodes"]
    for key in ("mean", "min", "max"):
        assert stats["team"]["returns"][key] == pytest.approx(card[f"return_{key}"], rel=1e-4)
    assert card.get("levels"), f"{path}: no behaviour levels listed"
