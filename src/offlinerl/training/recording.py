"""Online experience recorded as an episode dataset (``offlinerl finetune --record DIR``).

Each iteration's chunks are staged as a small dataset of their own,
``<parts>/iter-000001/`` (written atomically, like every dataset), as soon as
they are sampled. ``write`` joins the parts into one dataset at ``DIR``,
atomically, with the episodes still running at the end marked truncated (the end
of the recording), so ``offlinerl validate`` accepts it and an offline job can
train on it. A resumed job first drops the parts of iterations after its
checkpoint (``truncate``): the dataset then holds every step the job's
iterations sampled, once.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import gymnasium as gym
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.episodes import DatasetInfo, SingleAgentEpisode, load_episodes, parquet_files, write_dataset
from offlinerl.episodes import schema as S
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW

__all__ = ["OnlineRecording", "close_episodes"]

_PART = "iter-{:06d}"


def _closed(chunk: SingleAgentEpisode, last_chunk_index: int) -> SingleAgentEpisode:
    """``chunk``, marked truncated if it is the last of an episode that never ended (the end of the recording)."""
    if chunk.terminated or chunk.truncated or chunk.chunk_index != last_chunk_index:
        return chunk
    return replace(chunk, truncated=True)


def close_episodes(chunks: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Mark the last chunk of every episode that never ended as truncated (end of recording)."""
    last: dict[str, int] = {}
    for c in chunks:
        last[c.id] = max(last.get(c.id, c.chunk_index), c.chunk_index)
    return [_closed(c, last[c.id]) for c in chunks]


class OnlineRecording:
    """Sampled chunks staged per iteration in ``parts``, joined into one dataset by ``write``."""

    def __init__(self, parts: str | Path, *, observation_space: gym.Space, action_space: gym.Space,
                 env_id: str | None, provenance: Mapping[str, Any], inputs: Sequence[str | Path] = (),
                 agent_spaces: Any = None) -> None:
        self.parts = Path(parts)
        self.observation_space, self.action_space = observation_space, action_space
        self.agent_spaces = agent_spaces  # agents of different spaces: episodes.agent_spaces
        self.env_id = env_id
        self.provenance = dict(provenance)
        self.inputs = [str(p) for p in inputs]

    def _part_dirs(self) -> list[tuple[int, Path]]:
        if not self.parts.is_dir():
            return []
        out = []
        for p in self.parts.iterdir():
            if p.is_dir() and p.name.startswith("iter-") and p.name[5:].isdigit() and (p / "dataset.json").is_file():
                out.append((int(p.name[5:]), p))
        return sorted(out)

    def truncate(self, iteration: int) -> None:
        """Drop the parts of iterations after ``iteration`` (a resumed job samples those again)."""
        for i, p in self._part_dirs():
            if i > iteration:
                shutil.rmtree(p)

    def add(self, iteration: int, chunks: Sequence[SingleAgentEpisode]) -> None:
        """Stage the chunks ``iteration`` (1-based) sampled."""
        if not chunks:
            return
        longest = max(len(c) for c in chunks)
        write_dataset(list(chunks), self.parts / _PART.format(iteration), observation_space=self.observation_space,
                      action_space=self.action_space, env_id=self.env_id, overwrite=True,
                      max_steps_per_row=max(DEFAULT_MAX_STEPS_PER_ROW, longest), agent_spaces=self.agent_spaces)

    def write(self, dest: str | Path, *, overwrite: bool = False) -> DatasetInfo | None:
        """Join the parts into one episode dataset at ``dest`` (None: nothing was recorded)."""
        numbered = self._part_dirs()
        if not numbered:
            return None
        parts = [p for _, p in numbered]
        last: dict[str, int] = {}
        longest = 0
        for part in parts:
            for f in parquet_files(part):
                t = pq.read_table(f, columns=[S.EPISODE_ID, S.CHUNK_INDEX, S.REWARDS])
                for eid, chunk in zip(t.column(S.EPISODE_ID).to_pylist(), t.column(S.CHUNK_INDEX).to_pylist()):
                    last[eid] = max(last.get(eid, chunk), chunk)
                if t.num_rows:
                    longest = max(longest, int(pc.max(pc.list_value_length(t.column(S.REWARDS))).as_py()))

        def episodes() -> Iterator[SingleAgentEpisode]:
            for part in parts:
                for c in load_episodes(part, reassemble=False):
                    yield _closed(c, last[c.id])

        return write_dataset(episodes(), dest, observation_space=self.observation_space, action_space=self.action_space,
                             env_id=self.env_id, provenance={**self.provenance, "iterations": numbered[-1][0]},
                             overwrite=overwrite, inputs=self.inputs,
                             max_steps_per_row=max(DEFAULT_MAX_STEPS_PER_ROW, longest), agent_spaces=self.agent_spaces)
