"""Flattening observations of any supported space into ``[N, D]`` float32 rows.

Box values are flattened row-major, Discrete values become one-hot vectors,
MultiDiscrete/MultiBinary values are cast to float, Dict/Tuple leaves are
concatenated in the space's order. The same function serves the learner
connectors (dataset rows) and the env-to-module connectors (env observations),
so both sides always see identical model inputs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.episodes.spaces import SpaceError, flat_size, leaf_spaces

__all__ = ["flat_dim", "flatten_batch"]


def _leaf_dim(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    return flat_size(space)


def flat_dim(space: gym.Space) -> int:
    """Width of one flattened value of ``space``."""
    return sum(_leaf_dim(s) for _, s in leaf_spaces(space))


def _leaf_flatten(values: np.ndarray, space: gym.Space) -> np.ndarray:
    values = np.asarray(values)
    if isinstance(space, gym.spaces.Discrete):
        idx = values.reshape(-1).astype(np.int64) - int(space.start)
        if len(idx) and (idx.min() < 0 or idx.max() >= space.n):
            raise SpaceError(f"Discrete value out of range [{space.start}, {space.start + space.n}): {values.reshape(-1)[:5]}")
        out = np.zeros((len(idx), int(space.n)), dtype=np.float32)
        out[np.arange(len(idx)), idx] = 1.0
        return out
    return values.reshape(len(values), -1).astype(np.float32, copy=False)


def _leaves(batch: Any, space: gym.Space) -> list[tuple[np.ndarray, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        return [x for k, s in space.spaces.items() for x in _leaves(batch[k], s)]
    if isinstance(space, gym.spaces.Tuple):
        return [x for i, s in enumerate(space.spaces) for x in _leaves(batch[i], s)]
    return [(batch, space)]


def flatten_batch(batch: Any, space: gym.Space) -> np.ndarray:
    """Space batch of N values -> ``[N, flat_dim(space)]`` float32 (contiguous)."""
    parts = [_leaf_flatten(v, s) for v, s in _leaves(batch, space)]
    out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return np.ascontiguousarray(out, dtype=np.float32)
