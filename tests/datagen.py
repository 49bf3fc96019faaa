"""Small real datasets for tests: episodes from gymnasium envs written with write_dataset."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from offlinerl.episodes import SingleAgentEpisode, write_dataset


def _policy(env_id: str, obs: np.ndarray, rng: np.random.Generator, eps: float):
    if env_id.startswith("CartPole"):
        good = int(obs[2] + 0.5 * obs[3] > 0)  # a decent hand-written controller
        return good if rng.random() > eps else int(rng.integers(2))
    if env_id.startswith("Pendulum"):
        cos, sin, vel = obs
        a = np.clip(-2.0 * sin - 0.5 * vel, -2.0, 2.0)
        if rng.random() < eps:
            a = rng.uniform(-2.0, 2.0)
        return np.array([a], dtype=np.float32)
    raise ValueError(env_id)


def make_dataset(path: Path, env_id: str = "CartPole-v1", episodes: int = 10, eps: float = 0.3, seed: int = 0,
                 max_steps: int | None = None, rows_per_file: int | None = None) -> Path:
    """Record ``episodes`` episodes of an epsilon-noisy scripted controller."""
    env = gym.make(env_id, max_episode_steps=max_steps) if max_steps else gym.make(env_id)
    rng = np.random.default_rng(seed)
    eps_list = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        o, a, r = [obs], [], []
        while True:
            act = _policy(env_id, obs, rng, eps if i % 2 else min(1.0, eps * 3))
            obs, rew, term, trunc, _ = env.step(act)
            o.append(obs)
            a.append(act)
            r.append(rew)
            if term or trunc:
                break
        eps_list.append(SingleAgentEpisode(f"ep{i}", obs=np.array(o, dtype=np.float32), actions=np.array(a), rewards=r,
                                           terminated=term, truncated=trunc and not term))
    write_dataset(eps_list, path, observation_space=env.observation_space, action_space=env.action_space, env_id=env_id,
                  rows_per_file=rows_per_file or max(1, episodes // 3))
    return path
