"""Learner connectors: episode rows (``EpisodeColumns``) -> a transition batch.

Each reads ``episodes`` and adds columns to ``batch``. An algorithm config lists
the ones it needs (``learner_connectors``, e.g. ``[AddTransitions(),
ComputeReturnsToGo(0.99)]``); ``pipelines.learner_pipeline`` appends the
observation connectors (flatten, normalise). All work is vectorised over every
step of every row.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.connectors.connector import Batch, ConnectorV2
from offlinerl.connectors.episode_columns import EpisodeColumns
from offlinerl.core import columns as C
from offlinerl.discount import segment_discounted_cumsum
from offlinerl.episodes.arrow import batch_map

__all__ = ["AddTransitions", "AddNextObservations", "AddNextActions", "ComputeReturnsToGo", "AddExtraColumns"]


def _need(episodes: Any, who: str) -> EpisodeColumns:
    if not isinstance(episodes, EpisodeColumns):
        raise TypeError(f"{who} reads EpisodeColumns, got {type(episodes).__name__}")
    return episodes


def _actions(actions: Any, space: gym.Space | None) -> np.ndarray:
    a = np.asarray(actions)
    if a.dtype.kind in "iu":
        return a.astype(np.int64, copy=False)
    return np.ascontiguousarray(a.reshape(len(a), -1), dtype=np.float32)


class AddTransitions(ConnectorV2):
    """``OBS`` (raw space batch), ``ACTIONS``, ``REWARDS``, ``TERMINATEDS``, ``TRUNCATEDS`` per step.

    The flags are 1.0 only on the last step of a row that ended that way; a
    non-final chunk of a long episode has neither (its last step bootstraps).
    """

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        ep = _need(episodes, self.name)
        idx = ep.obs_index()
        last = ep.last_step_mask()
        row_of_step = np.repeat(np.arange(len(ep.lengths)), ep.lengths)
        batch[C.OBS] = batch_map(lambda a: a[idx], ep.obs)
        batch[C.ACTIONS] = _actions(ep.actions, None)
        batch[C.REWARDS] = ep.rewards.astype(np.float32, copy=False)
        batch[C.TERMINATEDS] = (last & ep.terminated[row_of_step]).astype(np.float32)
        batch[C.TRUNCATEDS] = (last & ep.truncated[row_of_step]).astype(np.float32)
        return batch


class AddNextObservations(ConnectorV2):
    """``NEXT_OBS``: the observation after each step (``obs[t+1]`` of the same row)."""

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        ep = _need(episodes, self.name)
        idx = ep.obs_index() + 1
        batch[C.NEXT_OBS] = batch_map(lambda a: a[idx], ep.obs)
        return batch


class AddNextActions(ConnectorV2):
    """``NEXT_ACTIONS``: the data's action after each step (``actions[t+1]`` of the same row), and
    ``HAS_NEXT_ACTIONS``: 0.0 on a row's last step, which has none (``NEXT_ACTIONS`` repeats its own
    action there), 1.0 elsewhere.

    A row's last step is an episode's end or, for a chunk of a longer episode (online experience), the
    chunk's: the mask says so, so chunks need not be joined first.
    """

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        ep = _need(episodes, self.name)
        last = ep.last_step_mask()
        idx = np.arange(ep.num_steps, dtype=np.int64) + (~last)  # the next step, or the step itself at a row's end
        batch[C.NEXT_ACTIONS] = _actions(ep.actions, None)[idx]
        batch[C.HAS_NEXT_ACTIONS] = (~last).astype(np.float32)
        return batch


class ComputeReturnsToGo(ConnectorV2):
    """``RETURNS_TO_GO[t] = sum_k gamma^k r[t+k]`` within each row (no bootstrap).

    A long episode stored as several chunks gets returns within each chunk.
    """

    needs_complete_episodes = True

    def __init__(self, gamma: float) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.gamma = gamma

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        ep = _need(episodes, self.name)
        rtg = segment_discounted_cumsum(ep.rewards.astype(np.float64), ep.lengths, self.gamma)
        batch[C.RETURNS_TO_GO] = rtg.astype(np.float32)
        return batch

    def __repr__(self) -> str:
        return f"ComputeReturnsToGo(gamma={self.gamma})"


class AddExtraColumns(ConnectorV2):
    """Copy numeric per-step extra columns (e.g. ``action_logp``) into the batch."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = tuple(names)

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        ep = _need(episodes, self.name)
        for name in self.names:
            if name not in ep.extras:
                raise KeyError(f"{self.name}: the data has no extra column {name!r} (has {sorted(ep.extras)})")
            batch[name] = ep.extras[name]
        return batch
