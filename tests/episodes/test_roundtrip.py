"""Every space kind round-trips exactly (dtype, shape, values) through parquet, via pyarrow and via Ray Data."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest

from offlinerl.episodes import (
    batch_equal,
    load_episodes,
    read_dataset,
    read_info,
    space_from_json,
    space_to_json,
    table_to_episodes,
    write_dataset,
)
from tests.episodes.builders import SPACES, make_episode

#: (observation space, action space) pairs covering every kind on both sides.
PAIRS = [
    ("box_f32", "discrete_start"),
    ("box_f64_inf", "box_f32"),
    ("image_u8", "multi_discrete"),
    ("dict_nested", "multi_binary"),
    ("tuple_nested", "dict_nested"),
    ("multi_binary_2d", "tuple_nested"),
    ("discrete_start", "multi_discrete_2d"),
    ("multi_discrete", "box_f64_inf"),
]


def _episodes(obs_space, act_space):
    eps = [make_episode(i, obs_space, act_space, steps=3 + i, terminated=i % 2 == 0, truncated=i % 2 == 1)
           for i in range(5)]
    for i, ep in enumerate(eps):
        ep.extras = {
            "action_logp": np.arange(len(ep), dtype=np.float32) - i,
            "infos": [{"step": t, "note": f"e{i}"} for t in range(len(ep))],
        }
    if isinstance(obs_space, gym.spaces.Box) and obs_space.dtype.kind == "f":
        flat = eps[0].obs.reshape(len(eps[0].obs), -1)
        flat[0, 0], flat[1, 0] = np.inf, -np.inf  # the unbounded dims carry real infinities
    return eps


def _assert_same(got, want):
    assert got.id == want.id and got.chunk_index == want.chunk_index and got.t_start == want.t_start
    assert batch_equal(got.obs, want.obs), f"obs differ for {want.id}"
    assert batch_equal(got.actions, want.actions), f"actions differ for {want.id}"
    assert got.rewards.dtype == np.float32 and np.array_equal(got.rewards, want.rewards)
    assert (got.terminated, got.truncated) == (want.terminated, want.truncated)
    assert (got.agent_id, got.module_id) == (want.agent_id, want.module_id)
    assert got.extras["action_logp"].dtype == np.float32
    assert np.array_equal(got.extras["action_logp"], want.extras["action_logp"])
    assert got.extras["infos"] == want.extras["infos"]


#: Read back through Ray Data too; together these cover every kind (Dict/Tuple nesting holds the rest).
RAY_PAIRS = [("dict_nested", "tuple_nested"), ("box_f64_inf", "multi_discrete_2d"), ("image_u8", "multi_binary_2d"),
             ("discrete_start", "box_f32")]


def _write(tmp_path, obs_name, act_name):
    obs_space, act_space = SPACES[obs_name], SPACES[act_name]
    episodes = _episodes(obs_space, act_space)
    write_dataset(episodes, tmp_path / "ds", observation_space=obs_space, action_space=act_space, rows_per_file=2)
    return episodes


@pytest.mark.parametrize("obs_name,act_name", PAIRS)
def test_round_trip_every_space_kind(tmp_path, obs_name, act_name):
    episodes = _write(tmp_path, obs_name, act_name)
    info = read_info(tmp_path / "ds")
    assert info.observation_space == SPACES[obs_name] and info.action_space == SPACES[act_name]
    assert (info.num_episodes, info.num_rows, info.num_steps) == (5, 5, sum(len(e) for e in episodes))

    loaded = {e.id: e for e in load_episodes(tmp_path / "ds")}
    assert sorted(loaded) == [e.id for e in episodes]
    for want in episodes:
        _assert_same(loaded[want.id], want)


@pytest.mark.parametrize("obs_name,act_name", RAY_PAIRS)
def test_round_trip_through_ray_data(tmp_path, ray_session, obs_name, act_name):
    episodes = _write(tmp_path, obs_name, act_name)
    info = read_info(tmp_path / "ds")
    ds = read_dataset(tmp_path / "ds")
    table = pa.concat_tables([pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b
                              for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)])
    via_ray = {e.id: e for e in table_to_episodes(table, info.observation_space, info.action_space,
                                                   info.extra_columns)}
    assert sorted(via_ray) == [e.id for e in episodes]
    for want in episodes:
        _assert_same(via_ray[want.id], want)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_space_json_round_trip(name):
    space = SPACES[name]
    text = json.dumps(space_to_json(space), allow_nan=False)  # strict JSON: no bare Infinity/NaN
    back = space_from_json(json.loads(text))
    assert back == space
    assert type(back) is type(space)
    if isinstance(space, gym.spaces.Box):
        assert back.dtype == space.dtype and back.shape == space.shape
        assert np.array_equal(back.low, space.low) and np.array_equal(back.high, space.high)
    if name == "box_f64_inf":
        assert '"inf"' in text and '"-inf"' in text
    if name == "discrete_start":
        assert back.start == -2 and back.n == 5
