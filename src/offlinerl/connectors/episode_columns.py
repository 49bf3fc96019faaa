"""``EpisodeColumns``: many episode rows as flat columns (what learner connectors read).

Decoding is vectorised over all rows of an Arrow table: no per-step Python.
``obs`` holds T+1 entries per row, everything per-step holds T.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_concat, from_arrow, split_list_array
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["EpisodeColumns"]


@dataclass
class EpisodeColumns:
    """Rows of episodes, concatenated column-wise."""

    obs: Any
    """Space batch of ``sum(T_i + 1)`` observations."""
    actions: Any
    """Space batch of ``sum(T_i)`` actions."""
    rewards: np.ndarray
    """``[sum T_i]`` float32."""
    lengths: np.ndarray
    """``[rows]`` int64: T_i of each row."""
    terminated: np.ndarray
    """``[rows]`` bool."""
    truncated: np.ndarray
    """``[rows]`` bool."""
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Numeric per-step extra columns, ``[sum T_i, ...]``."""

    @property
    def num_steps(self) -> int:
        return int(self.lengths.sum())

    def obs_index(self) -> np.ndarray:
        """Index into ``obs`` of the observation before each step: ``[sum T_i]``."""
        rows = len(self.lengths)
        return np.arange(self.num_steps, dtype=np.int64) + np.repeat(np.arange(rows, dtype=np.int64), self.lengths)

    def last_step_mask(self) -> np.ndarray:
        """``[sum T_i]`` bool: the final step of each row."""
        mask = np.zeros(self.num_steps, dtype=bool)
        ends = np.cumsum(self.lengths) - 1
        mask[ends[self.lengths > 0]] = True
        return mask

    @classmethod
    def from_arrow(
        cls,
        table: pa.Table,
        observation_space: gym.Space,
        action_space: gym.Space,
        extra_columns: Sequence[str] = (),
    ) -> "EpisodeColumns":
        obs_values, obs_len = split_list_array(table.column(S.OBS))
        act_values, lengths = split_list_array(table.column(S.ACTIONS))
        rew_values, _ = split_list_array(table.column(S.REWARDS))
        if not np.array_equal(obs_len, lengths + 1):
            bad = int(np.flatnonzero(obs_len != lengths + 1)[0])
            ids = table.column(S.EPISODE_ID) if S.EPISODE_ID in table.column_names else None
            who = f"episode {ids[bad].as_py()!r}" if ids is not None else f"row {bad}"
            raise ValueError(f"{who}: obs has {obs_len[bad]} entries, expected T+1 = {lengths[bad] + 1}")
        extras = {}
        for name in extra_columns:
            if name in table.column_names:
                values, _ = split_list_array(table.column(name))
                if pa.types.is_fixed_size_list(values.type):
                    extras[name] = values.flatten().to_numpy(zero_copy_only=False).reshape(len(values), -1)
                else:
                    extras[name] = values.to_numpy(zero_copy_only=False)
        return cls(
            obs=from_arrow(obs_values, observation_space),
            actions=from_arrow(act_values, action_space),
            rewards=rew_values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False),
            lengths=lengths.astype(np.int64),
            terminated=table.column(S.TERMINATED).to_numpy(zero_copy_only=False).astype(bool),
            truncated=table.column(S.TRUNCATED).to_numpy(zero_copy_only=False).astype(bool),
            extras=extras,
        )

    @classmethod
    def from_episodes(cls, episodes: Sequence[SingleAgentEpisode]) -> "EpisodeColumns":
        return cls(
            obs=batch_concat([e.obs for e in episodes]),
            actions=batch_concat([e.actions for e in episodes]),
            rewards=np.concatenate([e.rewards for e in episodes]).astype(np.float32),
            lengths=np.array([len(e) for e in episodes], dtype=np.int64),
            terminated=np.array([e.terminated for e in episodes], dtype=bool),
            truncated=np.array([e.truncated for e in episodes], dtype=bool),
        )
