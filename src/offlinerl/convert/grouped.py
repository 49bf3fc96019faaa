"""Converters that group records into episodes with Ray Data (``groupby(key).map_groups``):
the rows a group function returns, the shuffle they run with, and the final write.

A group function returns episode rows in the dataset schema plus bookkeeping columns
(``_status`` ok/quarantined, the group's quarantine records as JSON, exact duplicates
dropped, truncated-by-recording, steps); a quarantined group returns one placeholder row
that only carries its records. The driver tallies those columns into the
``ConversionReport`` and :func:`write_grouped` writes the ok rows, the quarantine file and
``dataset.json``. Used by ``convert rllib-parquet`` and ``convert table``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.convert.quarantine import QuarantineWriter
from offlinerl.convert.report import ConversionReport
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import pad_episode, spaces_differ
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table
from offlinerl.episodes.io import write_dataset

__all__ = [
    "STATUS", "QUARANTINE", "DUPLICATES", "BY_RECORDING", "STEPS", "INTERNAL_COLUMNS",
    "GroupSettings", "empty_batch", "with_internal", "output_rows", "quarantine_row", "drop_internal",
    "sort_shuffle", "write_grouped",
]

STATUS = "_status"
QUARANTINE = "_quarantine"
DUPLICATES = "_duplicates"
BY_RECORDING = "_truncated_by_recording"
STEPS = "_steps"
INTERNAL_COLUMNS = (STATUS, QUARANTINE, DUPLICATES, BY_RECORDING, STEPS)


@dataclass(frozen=True)
class GroupSettings:
    """What a per-episode group function needs to build output rows (picklable, sent to Ray tasks)."""

    observation_space: gym.Space
    """Space of one observation."""
    action_space: gym.Space
    """Space of one action."""
    extra_columns: Mapping[str, Mapping[str, Any]]
    """Extra per-step columns kept: name -> {"dtype", "shape"}."""
    max_steps_per_row: int
    """Longer episodes are split into chunks of this many steps."""
    agent_spaces: Mapping[str, tuple[gym.Space, gym.Space]] | None = None
    """Agents of different spaces (``offlinerl.episodes.agent_spaces``): each agent's own, the two above the
    storage spaces; None: every row in the two above."""


def empty_batch(space: gym.Space, n: int) -> Any:
    """A space batch of ``n`` zero values (placeholder for unreadable steps)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: empty_batch(s, n) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(empty_batch(s, n) for s in space.spaces)
    if isinstance(space, gym.spaces.Discrete):
        return np.zeros(n, dtype=np.int64)
    dtype = np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype
    return np.zeros((n, *space.shape), dtype=dtype)


def with_internal(table: pa.Table, status: str, quarantine: Sequence[dict] | None, duplicates: int,
                  by_recording: bool) -> pa.Table:
    n = table.num_rows
    steps = pc.list_value_length(table.column(S.REWARDS)).cast(pa.int64())
    text = json.dumps(list(quarantine)) if quarantine else None
    return (
        table.append_column(STATUS, pa.array([status] * n, pa.string()))
        .append_column(QUARANTINE, pa.array([text] + [None] * (n - 1), pa.string()))
        .append_column(DUPLICATES, pa.array([duplicates] + [0] * (n - 1), pa.int64()))
        .append_column(BY_RECORDING, pa.array([by_recording] * n, pa.bool_()))
        .append_column(STEPS, steps)
    )


def output_rows(episode: SingleAgentEpisode, settings: GroupSettings, *, duplicates: int = 0,
                by_recording: bool = False, notes: Sequence[dict] | None = None) -> pa.Table:
    """Rows of one converted episode (split into chunks if long) with the bookkeeping columns (agents of different
    spaces: padded into the storage spaces)."""
    episode.check()
    if settings.agent_spaces is not None:
        episode = pad_episode(episode, settings.observation_space, settings.action_space)
    chunks = episode.split(settings.max_steps_per_row)
    table = episodes_to_table(chunks, settings.observation_space, settings.action_space, settings.extra_columns)
    return with_internal(table, "ok", notes, duplicates, by_recording)


def quarantine_row(key: str, records: Sequence[dict], settings: GroupSettings) -> pa.Table:
    """A placeholder row (no steps) that carries the quarantine records of one episode group."""
    placeholder = SingleAgentEpisode(
        id=key,
        obs=empty_batch(settings.observation_space, 1),
        actions=empty_batch(settings.action_space, 0),
        rewards=np.zeros(0, np.float32),
        extras={name: _empty_extra(spec) for name, spec in settings.extra_columns.items()},
    )
    table = episodes_to_table([placeholder], settings.observation_space, settings.action_space, settings.extra_columns)
    return with_internal(table, "quarantined", records, 0, False)


def _empty_extra(spec: Mapping[str, Any]) -> Any:
    if spec["dtype"] in (S.JSON_DTYPE, "string"):
        return []
    return np.zeros((0, *spec.get("shape", ())), dtype=spec["dtype"])


def drop_internal(batch: pa.Table) -> pa.Table:
    """Keep only the converted episode rows, in the episode schema."""
    keep = pc.equal(batch.column(STATUS), "ok")
    return batch.filter(keep).drop_columns(list(INTERNAL_COLUMNS))


@contextlib.contextmanager
def sort_shuffle() -> Iterator[None]:
    """Group with Ray Data's sort-based shuffle: plain tasks, no long-lived aggregator actors
    holding CPUs (on a 2-CPU machine the hash shuffle is several times slower)."""
    from ray.data.context import DataContext, ShuffleStrategy

    ctx = DataContext.get_current()
    before = ctx.shuffle_strategy
    ctx.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    try:
        yield
    finally:
        ctx.shuffle_strategy = before


def write_grouped(ds: Any, tmp: Path, report: ConversionReport, quarantine: Sequence[dict], group: GroupSettings, *,
                  env_id: str | None, env_spec: dict | None, provenance: Mapping[str, Any]) -> None:
    """Write the ok rows of ``ds``, the quarantine file and ``dataset.json`` (``provenance`` + the final
    report) into the output's temporary directory ``tmp``."""
    staging = tmp / "_staging"
    info = write_dataset(
        ds.map_batches(drop_internal, batch_format="pyarrow"), staging,
        observation_space=group.observation_space, action_space=group.action_space,
        env_id=env_id, env_spec=env_spec,
        extra_columns={n: {"dtype": s["dtype"], "shape": s["shape"]} for n, s in group.extra_columns.items()},
        max_steps_per_row=group.max_steps_per_row, provenance={**provenance, "report": report.to_json()},
        agent_spaces=group.agent_spaces if spaces_differ(group.agent_spaces) else None,
    )
    for f in staging.iterdir():
        os.rename(f, tmp / f.name)
    shutil.rmtree(staging)
    report.episodes = info.num_episodes
    with QuarantineWriter(tmp) as out:
        for rec in quarantine:
            out.write(rec)
    report.quarantine_file = out.relative_path
    info.provenance["report"] = report.to_json()
    info.write(tmp)
