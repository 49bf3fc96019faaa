"""Default env-to-module and module-to-env steps of an EnvRunner.

These are used when no connector pipelines are given (e.g. for a
``RandomPolicy``). Training jobs pass the algorithm's own pipelines, whose
state (observation statistics) is synced from the learner side.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from offlinerl.episodes.spaces import leaf_spaces

__all__ = ["FlattenObservations", "ToEnvActions", "flatten_obs_batch"]


def _leaves(batch: Any) -> list[np.ndarray]:
    if isinstance(batch, dict):
        return [x for v in batch.values() for x in _leaves(v)]
    if isinstance(batch, tuple):
        return [x for v in batch for x in _leaves(v)]
    return [np.asarray(batch)]


def flatten_obs_batch(obs: Any, space: gym.Space) -> np.ndarray:
    """A space batch of observations as float32 ``[B, flat_dim]`` (Discrete leaves one-hot)."""
    parts = []
    for (_, leaf), values in zip(leaf_spaces(space), _leaves(obs)):
        if isinstance(leaf, gym.spaces.Discrete):
            one_hot = np.zeros((len(values), leaf.n), dtype=np.float32)
            one_hot[np.arange(len(values)), values.astype(np.int64) - leaf.start] = 1.0
            parts.append(one_hot)
        else:
            parts.append(values.reshape(len(values), -1).astype(np.float32))
    return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]


class FlattenObservations:
    """env-to-module: ``{"obs": space batch}`` → ``{"obs": float32 Tensor[B, flat_dim]}``."""

    def __init__(self, observation_space: gym.Space) -> None:
        self.observation_space = observation_space

    def __call__(self, batch: dict[str, Any], episodes: Any = None, state: Any = None) -> dict[str, Any]:
        return {**batch, "obs": torch.from_numpy(flatten_obs_batch(batch["obs"], self.observation_space))}

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None


class ToEnvActions:
    """module-to-env: module output tensors → numpy; actions cast to the space's dtype, Box clipped."""

    def __init__(self, action_space: gym.Space) -> None:
        self.action_space = action_space

    def __call__(self, batch: dict[str, Any], episodes: Any = None, state: Any = None) -> dict[str, Any]:
        out = {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        space = self.action_space
        actions = np.asarray(out["actions"])
        if isinstance(space, gym.spaces.Box):
            actions = np.clip(actions.reshape(len(actions), *space.shape), space.low, space.high).astype(space.dtype)
        elif isinstance(space, gym.spaces.Discrete):
            actions = actions.reshape(-1).astype(np.int64)
        else:
            actions = actions.astype(space.dtype)
        out["actions"] = actions
        return out

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None
