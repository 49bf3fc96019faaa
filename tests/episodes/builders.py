"""Small builders shared by the episode tests: spaces of every kind, seeded episodes, crafted datasets."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq

from offlinerl.episodes import DatasetInfo, SingleAgentEpisode, episodes_to_table
from offlinerl.episodes.episode import infer_extra_columns

INF = np.inf

#: One space of every kind the format stores, by name.
SPACES = {
    "box_f32": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "box_f64_inf": gym.spaces.Box(np.array([[-INF, 0.0], [-1.0, -INF]]), np.array([[INF, INF], [1.0, 5.0]]),
                                  dtype=np.float64),
    "image_u8": gym.spaces.Box(0, 255, (6, 5, 3), np.uint8),
    "discrete_start": gym.spaces.Discrete(5, start=-2),
    "multi_discrete": gym.spaces.MultiDiscrete(np.array([3, 4]), start=np.array([1, -1])),
    "multi_discrete_2d": gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
    "multi_binary": gym.spaces.MultiBinary(4),
    "multi_binary_2d": gym.spaces.MultiBinary([2, 3]),
    "dict_nested": gym.spaces.Dict({
        "pos": gym.spaces.Box(-INF, INF, (2,), np.float32),
        "cam": gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)}),
        "mode": gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), gym.spaces.MultiBinary(2))),
    }),
    "tuple_nested": gym.spaces.Tuple((
        gym.spaces.Box(-2.0, 2.0, (1,), np.float64),
        gym.spaces.Dict({"k": gym.spaces.MultiDiscrete([2, 2]), "d": gym.spaces.Discrete(4)}),
    )),
}


def stack(space: gym.Space, values: list) -> object:
    """A space batch from a list of single values."""
    if isinstance(space, gym.spaces.Dict):
        return {k: stack(s, [v[k] for v in values]) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(stack(s, [v[i] for v in values]) for i, s in enumerate(space.spaces))
    dtype = np.int64 if isinstance(space, gym.spaces.Discrete) else (
        np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype)
    return np.stack([np.asarray(v) for v in values]).astype(dtype)


def sample_batch(space: gym.Space, n: int, seed: int) -> object:
    space.seed(seed)
    return stack(space, [space.sample() for _ in range(n)])


def make_episode(i: int, obs_space: gym.Space, act_space: gym.Space, steps: int, **kw) -> SingleAgentEpisode:
    rng = np.random.default_rng(i)
    return SingleAgentEpisode(
        id=f"ep-{i}",
        obs=sample_batch(obs_space, steps + 1, seed=1000 + i),
        actions=sample_batch(act_space, steps, seed=2000 + i),
        rewards=rng.normal(size=steps).astype(np.float32),
        **kw,
    )


def write_raw(path: Path, episodes_per_file: list[list[SingleAgentEpisode]], obs_space, act_space,
              extra_columns=None, row_group_size=None, **info_overrides) -> Path:
    """Write a dataset WITHOUT the writer's checks (to craft broken data); counts computed unless overridden."""
    path.mkdir(parents=True)
    every = [e for eps in episodes_per_file for e in eps]
    if extra_columns is None:
        extra_columns = infer_extra_columns(every)
    for i, eps in enumerate(episodes_per_file):
        table = episodes_to_table(eps, obs_space, act_space, extra_columns)
        pq.write_table(table, path / f"part-{i:05d}.parquet", row_group_size=row_group_size)
    counts = {
        "num_episodes": len({(e.id, e.agent_id) for e in every}),
        "num_steps": sum(len(e) for e in every),
        "num_rows": len(every),
    }
    counts.update(info_overrides)
    DatasetInfo(obs_space, act_space, extra_columns=dict(extra_columns or {}), **counts).write(path)
    return path
