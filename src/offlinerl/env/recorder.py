"""Turning a vector env's step stream into ``SingleAgentEpisode``s.

One :class:`EpisodeRecorder` per sub-env slot: it accumulates T+1
observations, T actions, rewards and per-step extras of the running episode,
cuts chunks of it on demand (continuing with the same ``episode_id``,
``chunk_index + 1`` and ``t_start + T``) and finishes it with the exact
``terminated``/``truncated`` flags.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from offlinerl.episodes.arrow import batch_concat, batch_slice
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["EpisodeRecorder"]


class EpisodeRecorder:
    """The running episode of one sub-env."""

    def __init__(self, episode_id: str, ticket: int, first_obs: Any) -> None:
        self.episode_id = episode_id
        self.ticket = ticket
        """Start order of this episode within its runner (episodes are returned in this order)."""
        self.chunk_index = 0
        self.t_start = 0
        self.episode_return = 0.0
        self.episode_length = 0
        self._obs = [first_obs]
        self._actions: list[Any] = []
        self._rewards: list[float] = []
        self._extras: dict[str, list[np.ndarray]] = {}

    def __len__(self) -> int:
        """Steps recorded since the last cut."""
        return len(self._rewards)

    def add_step(self, action: Any, reward: float, next_obs: Any, extras: dict[str, np.ndarray]) -> None:
        """Record one transition; ``action``/``next_obs``/extras are length-1 space batches."""
        self._actions.append(action)
        self._rewards.append(float(reward))
        self._obs.append(next_obs)
        for name, value in extras.items():
            self._extras.setdefault(name, []).append(value)
        self.episode_return += float(reward)
        self.episode_length += 1

    def _episode(self, terminated: bool, truncated: bool) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            id=self.episode_id,
            obs=batch_concat(self._obs),
            actions=batch_concat(self._actions),
            rewards=np.asarray(self._rewards, dtype=np.float32),
            terminated=terminated,
            truncated=truncated,
            chunk_index=self.chunk_index,
            t_start=self.t_start,
            extras={k: np.concatenate(v) for k, v in self._extras.items()},
        )

    def cut(self) -> SingleAgentEpisode:
        """Return the steps so far as a chunk and continue from its last observation."""
        chunk = self._episode(False, False)
        self.chunk_index += 1
        self.t_start += len(self)
        self._obs = [batch_slice(self._obs[-1], 0, 1)]
        self._actions, self._rewards, self._extras = [], [], {}
        return chunk

    def finish(self, terminated: bool, truncated: bool) -> SingleAgentEpisode:
        """The final chunk (the whole episode if never cut), with its end flags."""
        if terminated and truncated:
            # Gymnasium allows both; the format does not: a terminal state wins (no bootstrap).
            truncated = False
        return self._episode(terminated, truncated)
