"""Chunked episodes and nested spaces go through the operations whole and valid."""

from __future__ import annotations

from offlinerl.data_ops import FilterConfig, RelabelConfig, dataset_card, dedup_dataset, filter_dataset, relabel_dataset
from offlinerl.episodes import load_episodes, write_dataset
from offlinerl.episodes.validate import validate_dataset
from tests.data_ops.builders import ACT, base
from tests.episodes.builders import SPACES, make_episode


def test_chunked_episodes_are_kept_and_relabelled_whole(tmp_path, ray_session):
    data = base(tmp_path / "chunked", max_steps_per_row=2)  # T = 3 and 4 become 2 rows
    top = filter_dataset(data, tmp_path / "top", FilterConfig(top="3"))
    assert top.info.num_rows == 5 and top.info.num_episodes == 3  # e7 (3 steps), e8 (4), e9 (2)
    assert sorted(e.id for e in load_episodes(top.path)) == ["e7", "e8", "e9"]
    flags = relabel_dataset(data, tmp_path / "flags", RelabelConfig(terminal_when="next_obs[1] >= 4"))
    ended = {e.id: (e.terminated, e.truncated) for e in load_episodes(flags.path)}
    # the last chunk's final next_obs[1] is T = 2 + i % 3: T = 4 for e2, e5, e8; every episode had ended
    assert ended == {f"e{i}": ((True, False) if i % 3 == 2 else (False, True)) for i in range(10)}
    assert validate_dataset(top.path).ok and validate_dataset(flags.path).ok


def test_nested_spaces(tmp_path, ray_session):
    space = SPACES["dict_nested"]
    eps = [make_episode(i, space, ACT, steps=3) for i in range(4)]
    data = tmp_path / "nested"
    write_dataset(eps, data, observation_space=space, action_space=ACT, rows_per_file=2)
    kept = filter_dataset(data, tmp_path / "f", FilterConfig(bottom="2"))
    assert kept.info.num_episodes == 2 and validate_dataset(kept.path).ok
    assert dedup_dataset(data, tmp_path / "d").report["duplicate_episodes_removed"] == 0
    card = dataset_card(data)
    assert card["episodes"] == 4 and "note" in card["coverage"]
