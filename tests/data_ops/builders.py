"""Small real episode datasets with hand-checkable values for the data-operation tests."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from offlinerl.episodes import SingleAgentEpisode, write_dataset

OBS = gym.spaces.Box(-100.0, 100.0, (2,), np.float32)
ACT = gym.spaces.Discrete(3)


def episode(i: int, *, prefix: str = "e", reward_bonus: float = 0.0) -> SingleAgentEpisode:
    """Episode ``e{i}``: T = 2 + i % 3 steps, obs[t] = [i, t], actions t % 3, rewards [i, 0, ...] (return i),
    behavior_level i % 2; even i terminated, odd truncated."""
    steps = 2 + i % 3
    rewards = np.zeros(steps, dtype=np.float32)
    rewards[0] = i + reward_bonus
    obs = np.stack([np.full(steps + 1, i), np.arange(steps + 1)], axis=1).astype(np.float32)
    return SingleAgentEpisode(id=f"{prefix}{i}", obs=obs, actions=np.arange(steps) % 3, rewards=rewards,
                              terminated=i % 2 == 0, truncated=i % 2 == 1,
                              extras={"behavior_level": np.full(steps, i % 2, dtype=np.int8)})


def lengths(ids: range | list[int]) -> int:
    return sum(2 + i % 3 for i in ids)


def write(path: Path, episodes, *, rows_per_file: int = 3, obs_space: gym.Space = OBS, **kwargs) -> Path:
    write_dataset(list(episodes), path, observation_space=obs_space, action_space=ACT, rows_per_file=rows_per_file,
                  **kwargs)
    return path


def base(path: Path, n: int = 10, **kwargs) -> Path:
    """Episodes e0..e{n-1} in files of 3 rows."""
    return write(path, (episode(i) for i in range(n)), **kwargs)
