"""mix, relabel and dedup: exact counts and values, refusals that name the problem and write nothing."""

from __future__ import annotations

import shutil

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.cli import main
from offlinerl.data_ops import (DataOpError, MixConfig, RelabelConfig, dedup_dataset, mix_datasets,
                                relabel_dataset)
from offlinerl.data_ops.mix import apportion
from offlinerl.episodes import load_episodes, read_info
from offlinerl.episodes.validate import validate_dataset
from tests.data_ops.builders import base, episode, lengths, write
from tests.data_ops.rewards import step_index


@pytest.fixture(scope="module")
def data(tmp_path_factory, ray_session):
    root = tmp_path_factory.mktemp("ops")
    return {"a": base(root / "a"),                                                  # e0..e9
            "b": write(root / "b", [episode(i, prefix="b") for i in range(4)]),     # b0..b3: ids unique
            "c": write(root / "c", [episode(i) for i in range(4)], rows_per_file=10)}  # e0..e3 again


def _by_id(path):
    return {e.id: e for e in load_episodes(path)}


def test_mix_takes_everything_with_a_source_column(data, tmp_path):
    result = mix_datasets([data["a"], data["b"]], tmp_path / "m", MixConfig(names=("play", "expert")))
    eps = _by_id(result.path)
    assert len(eps) == 14 and result.info.num_steps == lengths(range(10)) + lengths(range(4))
    assert set(eps["e3"].extras["source"]) == {"play"} and set(eps["b3"].extras["source"]) == {"expert"}
    assert len(eps["b2"].extras["source"]) == len(eps["b2"]) == 4
    assert result.report["sources"]["expert"] == {"episodes": 4, "steps": lengths(range(4)), "return_mean": 1.5}
    assert result.info.extra_columns["source"] == {"dtype": "string", "shape": []}
    lineage = result.info.lineage
    assert lineage[-1]["operation"] == "mix"
    assert lineage[-1]["parents"] == [read_info(data["a"]).fingerprint, read_info(data["b"]).fingerprint]
    assert validate_dataset(result.path).ok


def test_mix_prefixes_colliding_ids_and_weights_episodes(data, tmp_path):
    result = mix_datasets([data["a"], data["c"]], tmp_path / "m", MixConfig(weights=(1, 1)))
    ids = sorted(_by_id(result.path))
    assert len(ids) == 8 and result.report["ids_prefixed"]
    assert sum(i.startswith("a/") for i in ids) == 4 and sum(i.startswith("c/") for i in ids) == 4


def test_mix_weights_by_steps(data, tmp_path):
    result = mix_datasets([data["a"], data["b"]], tmp_path / "m", MixConfig(weights=(3, 1), by="steps", total=20))
    src = result.report["sources"]
    assert 13 <= src["a"]["steps"] <= 15 and src["b"]["steps"] in (4, 5)  # b's lengths 2, 3, 4, 2 fill 5 or 4


def test_apportion_sums_to_exactly_the_total():
    assert apportion(5, np.array([0.5, 0.5])).tolist() == [3, 2]            # was round(2.5) + round(2.5) = 4
    assert apportion(10, np.full(3, 1 / 3)).tolist() == [4, 3, 3]
    assert apportion(30, np.array([0.1, 0.9])).tolist() == [3, 27]           # 0.1 * 30 = 3.0000000000000004
    for total in range(1, 40):
        assert apportion(total, np.array([0.2, 0.3, 0.5])).sum() == total


def test_mix_total_is_exact_and_without_weights_shares_equally(data, tmp_path, capsys):
    result = mix_datasets([data["a"], data["b"]], tmp_path / "m", MixConfig(weights=(1, 1), total=5))
    assert result.info.num_episodes == 5
    assert [s["episodes"] for s in result.report["sources"].values()] == [3, 2]
    # --total without --weights was ignored (every episode, 14); now equal shares of exactly N
    assert main(["data", "mix", str(data["a"]), str(data["b"]), "--total", "6", "-o", str(tmp_path / "n")]) == 0
    assert "  a: 3 episodes" in capsys.readouterr().out and read_info(tmp_path / "n").num_episodes == 6
    steps = mix_datasets([data["a"], data["b"]], tmp_path / "s", MixConfig(by="steps", total=10)).report["sources"]
    assert 3 <= steps["a"]["steps"] <= 5 and 3 <= steps["b"]["steps"] <= 5    # equal quotas of 5 steps


@pytest.mark.parametrize("options, message", [
    ({"weights": (1, 1), "total": 1}, "--total 1 is fewer episodes than the 2 inputs"),
    ({"weights": (1, 1), "total": 9}, "'b' has only 4 episodes \\(at most 8 in all\\)"),
    ({"weights": (100, 1)}, "these weights give 'b' no episode"),
    ({"weights": (100, 1), "total": 10}, "--total 10 gives 'b' no episode"),
    ({"by": "steps"}, "--by steps shares out --weights or --total"),
])
def test_mix_refuses_totals_it_cannot_meet(data, tmp_path, options, message):
    with pytest.raises(DataOpError, match=message):
        mix_datasets([data["a"], data["b"]], tmp_path / "m", MixConfig(**options))
    assert not (tmp_path / "m").exists()


def test_mix_refuses_other_spaces_naming_the_difference(data, tmp_path):
    other = write(tmp_path / "o", [episode(0)], obs_space=gym.spaces.Box(-100.0, 100.0, (2,), np.float64))
    with pytest.raises(DataOpError, match=r"different observation spaces \(observation_space.dtype: 'float32' vs "
                                          r"'float64'\)"):
        mix_datasets([data["a"], other], tmp_path / "m", MixConfig())
    with pytest.raises(DataOpError, match="'b' has only 4 episodes"):
        mix_datasets([data["a"], data["b"]], tmp_path / "m", MixConfig(weights=(1, 1), total=10))
    assert not (tmp_path / "m").exists()


def test_relabel_scale_shift_clip_exactly(data, tmp_path):
    result = relabel_dataset(data["a"], tmp_path / "r", RelabelConfig(scale=2.0, shift=-1.0, clip=(-0.5, 10.0)))
    eps = _by_id(result.path)
    assert eps["e3"].rewards.tolist() == [5.0, -0.5]                   # [3, 0] -> [5, -1] -> clip
    assert eps["e7"].rewards.tolist() == [10.0, -0.5, -0.5]            # 2*7-1 = 13 -> 10
    assert eps["e3"].obs.tolist() == _by_id(data["a"])["e3"].obs.tolist()


def test_relabel_return_range_and_a_reward_function(data, tmp_path):
    scaled = _by_id(relabel_dataset(data["a"], tmp_path / "r1", RelabelConfig(return_range=18.0)).path)
    assert scaled["e9"].rewards.tolist() == [18.0, 0.0]                # 9 * 18 / (9 - 0)
    dense = relabel_dataset(data["a"], tmp_path / "r2", RelabelConfig(reward_fn="tests.data_ops.rewards:step_index"))
    assert _by_id(dense.path)["e5"].rewards.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert dense.info.lineage[-1]["parameters"]["reward_fn"] == "tests.data_ops.rewards:step_index"
    same = relabel_dataset(data["a"], tmp_path / "r3", RelabelConfig(scale=1.0, shift=0.0, terminal_when=None,
                                                                     reward_fn="x:y"), reward_fn=step_index)
    assert same.info.fingerprint == dense.info.fingerprint


def test_relabel_terminal_flags_from_a_predicate(data, tmp_path):
    result = relabel_dataset(data["a"], tmp_path / "t", RelabelConfig(terminal_when="next_obs[1] >= 3"))
    eps = _by_id(result.path)
    for i in range(10):  # T = 2 + i % 3: the last next_obs[1] is T
        assert (eps[f"e{i}"].terminated, eps[f"e{i}"].truncated) == ((True, False) if 2 + i % 3 >= 3 else (False, True))
    assert validate_dataset(result.path).ok


def test_relabel_terminal_predicate_on_a_one_dimensional_value_bare_or_indexed(data, tmp_path):
    result = relabel_dataset(data["a"], tmp_path / "t", RelabelConfig(terminal_when="action == 1 and action[0] >= 1"))
    eps = _by_id(result.path)
    for i in range(10):  # the last action is (T - 1) % 3 with T = 2 + i % 3: 1 where i % 3 == 0
        assert eps[f"e{i}"].terminated == (i % 3 == 0)


@pytest.mark.parametrize("config, message", [
    (RelabelConfig(reward_fn="tests.data_ops.rewards:wrong_length"), "returned 3 value\\(s\\) for the 2 steps"),
    (RelabelConfig(reward_fn="tests.data_ops.rewards:raises"), "raised RuntimeError on episode"),
    (RelabelConfig(reward_fn="tests.data_ops.rewards:missing"), "has no function 'missing'"),
    (RelabelConfig(reward_fn="no_such_module_x:f"), "cannot import 'no_such_module_x'"),
    (RelabelConfig(terminal_when="next_obs[5] > 1"), "index out of range"),
    (RelabelConfig(terminal_when="next_obs > 1"), "next_obs has 2 dimensions: index one"),
    (RelabelConfig(terminal_when="reward > 'a'"), "--terminal-when: cannot compute .* mixes values of types"),
])
def test_relabel_refusals_write_nothing(data, tmp_path, config, message):
    with pytest.raises(DataOpError, match=message):
        relabel_dataset(data["a"], tmp_path / "r", config)
    assert list(tmp_path.iterdir()) == []


def test_dedup_removes_duplicate_chunks_and_episodes(data, tmp_path):
    src = write(tmp_path / "src", [episode(i) for i in range(6)] + [episode(2, prefix="copy-"),
                                                                    episode(4, prefix="copy-")], rows_per_file=4)
    shutil.copy(src / "part-00000.parquet", src / "part-00000-again.parquet")  # 4 rows twice
    result = dedup_dataset(src, tmp_path / "d")
    assert _by_id(result.path).keys() == {"e0", "e1", "copy-2", "e3", "copy-4", "e5"}  # the smaller id is kept
    rep = result.report
    assert (rep["rows_in"], rep["duplicate_rows_removed"], rep["duplicate_episodes_removed"], rep["episodes_out"]) == \
        (12, 4, 2, 6)
    assert rep["steps_removed"] == lengths([0, 1, 2, 3]) + lengths([2, 4])
    assert rep["examples"] == [{"kept": "copy-2", "removed": ["e2"], "copies": 2},
                               {"kept": "copy-4", "removed": ["e4"], "copies": 2}]
    assert validate_dataset(result.path).ok


def test_dedup_refuses_rows_that_share_a_key_but_differ(data, tmp_path):
    a = write(tmp_path / "a", [episode(1)], rows_per_file=1)
    b = write(tmp_path / "b", [episode(1, reward_bonus=0.5)], rows_per_file=1)
    shutil.copy(b / "part-00000.parquet", a / "part-00001.parquet")
    with pytest.raises(DataOpError, match="are both episode 'e1' chunk 0 but differ"):
        dedup_dataset(a, tmp_path / "d")
    assert not (tmp_path / "d").exists()
