"""Module-to-env connectors: module outputs (tensors) -> actions the env accepts."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.connectors.connector import Batch, ConnectorV2
from offlinerl.core import columns as C

__all__ = ["ActionsToEnv"]


class ActionsToEnv(ConnectorV2):
    """``ACTIONS`` tensor -> numpy in the env's dtype; Box actions clipped to the bounds.

    The stock policy already squashes Box actions into the bounds (tanh scaled
    to ``[low, high]``); clipping guards custom modules and float round-off.
    """

    def __init__(self, action_space: gym.Space, clip: bool = True) -> None:
        self.action_space = action_space
        self.clip = clip

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        a = batch[C.ACTIONS]
        a = a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            a = a.astype(np.int64).reshape(-1)
        elif isinstance(space, gym.spaces.Box):
            a = a.reshape((len(a), *space.shape)).astype(space.dtype)
            if self.clip:
                a = np.clip(a, space.low, space.high)
        else:
            a = a.astype(space.dtype)
        batch[C.ACTIONS] = a
        return batch
