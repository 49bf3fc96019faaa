"""An online job's checkpointed experience: the ``replay/`` episode dataset and the add groups it is split into.

``algorithm.json``'s ``replay.groups`` says how many rows each add took and in which iteration; the rows are the
groups' episodes in order. :func:`write_replay` is what ``write_checkpoint`` calls, :func:`read_replay` what
``Checkpoint.replay_episodes`` calls once it has checked the size and hash of every file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym

from offlinerl.episodes import DatasetInfoError, SingleAgentEpisode, load_episodes, read_info, write_dataset
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW
from offlinerl.training.checkpoint_meta import METADATA_FILE, REPLAY_DIR, CheckpointError, CheckpointMeta

__all__ = ["ReplayEpisodes", "read_replay", "write_replay"]


@dataclass(frozen=True)
class ReplayEpisodes:
    """The online experience an online job's replays were filled from, as a checkpoint keeps it.

    ``groups[g]`` are the episodes (chunks, or whole episodes) one add brought, in order; the learner pipeline
    and the split over learners turn them into the same transitions again (``offlinerl.training.experience``).
    Written as an episode dataset whose rows are the groups' episodes in order; chunk indices are renumbered
    from 0 per episode (the oldest chunks of an episode may have left the replays), nothing else changes.
    """

    groups: Sequence[Sequence[SingleAgentEpisode]]
    """Episodes of each add, oldest add first."""
    iterations: Sequence[int]
    """The iteration of each add."""
    observation_space: gym.Space
    action_space: gym.Space
    agent_spaces: Any = None
    """Agents of different spaces (``episodes.agent_spaces``): each agent's, the two above the storage spaces."""


def _renumbered(episodes: Sequence[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Chunk indices from 0 per episode: the rows are then a valid episode dataset."""
    first: dict[tuple, int] = {}
    for ep in episodes:
        key = (ep.id, ep.agent_id)
        first[key] = min(first.get(key, ep.chunk_index), ep.chunk_index)
    return [ep if not first[(ep.id, ep.agent_id)] else replace(ep, chunk_index=ep.chunk_index - first[(ep.id, ep.agent_id)])
            for ep in episodes]


def write_replay(replay: ReplayEpisodes, directory: Path) -> dict[str, Any]:
    """Write ``replay`` as an episode dataset in ``directory``; returns ``algorithm.json``'s ``replay`` record."""
    episodes = _renumbered([ep for group in replay.groups for ep in group])
    longest = max((len(ep) for ep in episodes), default=0)
    write_dataset(episodes, directory, observation_space=replay.observation_space,
                  action_space=replay.action_space, max_steps_per_row=max(DEFAULT_MAX_STEPS_PER_ROW, longest),
                  provenance={"collector": "offlinerl online replay (checkpoint)"}, agent_spaces=replay.agent_spaces)
    return {"dir": REPLAY_DIR, "groups": [{"iteration": int(i), "rows": len(g)}
                                          for i, g in zip(replay.iterations, replay.groups)]}


def read_replay(path: Path, meta: CheckpointMeta, check_file: Callable[..., Path], observation_space: gym.Space,
                action_space: gym.Space) -> ReplayEpisodes:
    """The replay of checkpoint ``path``, grouped by add, after ``check_file(name, required=True)`` passed for
    every file ``meta`` records under ``replay/`` and no other file is there."""
    groups_meta = meta.replay["groups"]
    directory = path / REPLAY_DIR
    names = sorted(n for n in meta.files if n.startswith(f"{REPLAY_DIR}/"))
    if not names:
        raise CheckpointError(f"{path / METADATA_FILE}: records no files of {REPLAY_DIR}/; refused")
    for name in names:
        check_file(name, required=True)
    unlisted = sorted(f.name for f in directory.iterdir() if f"{REPLAY_DIR}/{f.name}" not in names)
    if unlisted:
        raise CheckpointError(f"{directory}: holds files algorithm.json does not record ({unlisted[:3]}); refused")
    try:
        episodes = load_episodes(directory, reassemble=False)
    except (DatasetInfoError, OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{directory}: cannot be read as an episode dataset ({exc})") from None
    if len(episodes) != sum(g["rows"] for g in groups_meta):
        raise CheckpointError(f"{directory}: {len(episodes)} rows, algorithm.json's replay.groups count "
                              f"{sum(g['rows'] for g in groups_meta)}")
    groups, start = [], 0
    for g in groups_meta:
        groups.append(episodes[start:start + g["rows"]])
        start += g["rows"]
    return ReplayEpisodes(groups, [g["iteration"] for g in groups_meta], observation_space, action_space,
                          read_info(directory).agent_spaces)
