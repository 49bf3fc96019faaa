"""``SingleAgentEpisode``: one episode (or chunk) as columnar numpy, and its
conversion to and from Arrow rows of the episode schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import (
    batch_concat,
    batch_len,
    batch_slice,
    from_arrow,
    list_array,
    split_list_array,
    to_arrow,
)

__all__ = ["SingleAgentEpisode", "episodes_to_table", "table_to_episodes", "infer_extra_columns"]


@dataclass
class SingleAgentEpisode:
    """One agent's episode, or a chunk of it, stored column-wise.

    ``obs`` has T+1 entries (``obs[t+1]`` follows ``actions[t]``); ``actions``,
    ``rewards`` and every ``extras`` column have T. Observations and actions are
    space batches (arrays, or dicts/tuples of arrays for Dict/Tuple spaces).
    """

    id: str
    obs: Any
    actions: Any
    rewards: np.ndarray
    terminated: bool = False
    truncated: bool = False
    chunk_index: int = 0
    t_start: int = 0
    agent_id: str | None = None
    module_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rewards = np.asarray(self.rewards, dtype=np.float32).reshape(-1)
        self.terminated = bool(self.terminated)
        self.truncated = bool(self.truncated)

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def episode_return(self) -> float:
        return float(np.sum(self.rewards, dtype=np.float64))

    def check(self) -> None:
        """Raise ``ValueError`` if the column lengths or flags are inconsistent."""
        t = len(self)
        problems = []
        if t < 1:
            problems.append("an episode needs at least one step")
        if batch_len(self.obs) != t + 1:
            problems.append(f"obs has {batch_len(self.obs)} entries, expected T+1 = {t + 1}")
        if batch_len(self.actions) != t:
            problems.append(f"actions has {batch_len(self.actions)} entries, expected T = {t}")
        for name, values in self.extras.items():
            if len(values) != t:
                problems.append(f"extra column {name!r} has {len(values)} entries, expected T = {t}")
        if self.terminated and self.truncated:
            problems.append("terminated and truncated are both true")
        if problems:
            raise ValueError(f"episode {self.id!r} (chunk {self.chunk_index}): " + "; ".join(problems))

    def split(self, max_steps: int) -> list["SingleAgentEpisode"]:
        """Cut into chunks of at most ``max_steps`` steps; only the last keeps the end flags."""
        if len(self) <= max_steps:
            return [self]
        chunks = []
        starts = list(range(0, len(self), max_steps))
        for i, start in enumerate(starts):
            stop = min(start + max_steps, len(self))
            last = i == len(starts) - 1
            chunks.append(
                replace(
                    self,
                    obs=batch_slice(self.obs, start, stop + 1),
                    actions=batch_slice(self.actions, start, stop),
                    rewards=self.rewards[start:stop],
                    terminated=self.terminated and last,
                    truncated=self.truncated and last,
                    chunk_index=self.chunk_index + i,
                    t_start=self.t_start + start,
                    extras={k: v[start:stop] for k, v in self.extras.items()},
                )
            )
        return chunks

    @classmethod
    def concat(cls, chunks: Sequence["SingleAgentEpisode"]) -> "SingleAgentEpisode":
        """Reassemble consecutive chunks (ordered by ``chunk_index``) into one episode."""
        chunks = sorted(chunks, key=lambda c: c.chunk_index)
        if len(chunks) == 1:
            return chunks[0]
        first, last = chunks[0], chunks[-1]
        for prev, nxt in zip(chunks, chunks[1:]):
            if nxt.t_start != prev.t_start + len(prev):
                raise ValueError(
                    f"episode {first.id!r}: chunk {nxt.chunk_index} starts at t={nxt.t_start}, "
                    f"expected {prev.t_start + len(prev)}"
                )
        obs = batch_concat([batch_slice(c.obs, 0, len(c)) for c in chunks] + [batch_slice(last.obs, len(last), len(last) + 1)])
        extras = {}
        for k, v in first.extras.items():
            parts = [c.extras[k] for c in chunks]
            extras[k] = np.concatenate(parts) if isinstance(v, np.ndarray) else [x for p in parts for x in p]
        return replace(
            first,
            obs=obs,
            actions=batch_concat([c.actions for c in chunks]),
            rewards=np.concatenate([c.rewards for c in chunks]),
            terminated=last.terminated,
            truncated=last.truncated,
            extras=extras,
        )


def infer_extra_columns(episodes: Iterable[SingleAgentEpisode]) -> dict[str, dict[str, Any]]:
    """Describe the extra columns of the first episode (all episodes must share them)."""
    for ep in episodes:
        return {name: S.extra_spec_for(name, values) for name, values in ep.extras.items()}
    return {}


def _extra_to_arrow(per_episode: list[Any], spec: Mapping[str, Any]) -> pa.Array:
    """Encode one extra column of several episodes (a list of per-episode values)."""
    if spec["dtype"] == S.JSON_DTYPE:
        steps = [v for values in per_episode for v in values]
        return pa.array([v if isinstance(v, str) else json.dumps(v) for v in steps], type=pa.string())
    if spec["dtype"] == "string":
        return pa.array([str(v) for values in per_episode for v in values], type=pa.string())
    arr = np.ascontiguousarray(np.concatenate(per_episode), dtype=np.dtype(spec["dtype"]))
    flat = pa.array(arr.reshape(-1), type=pa.from_numpy_dtype(arr.dtype))
    shape = tuple(spec.get("shape", ()))
    return pa.FixedSizeListArray.from_arrays(flat, int(np.prod(shape))) if shape else flat


def _extra_from_arrow(values: pa.Array, spec: Mapping[str, Any]) -> Any:
    if spec["dtype"] == S.JSON_DTYPE:
        return [None if v is None else json.loads(v) for v in values.to_pylist()]
    if spec["dtype"] == "string":
        return values.to_pylist()
    shape = tuple(spec.get("shape", ()))
    flat = values.flatten() if shape else values
    return flat.to_numpy(zero_copy_only=False).astype(spec["dtype"], copy=False).reshape((len(values), *shape))


def episodes_to_table(
    episodes: Sequence[SingleAgentEpisode],
    observation_space: gym.Space,
    action_space: gym.Space,
    extra_columns: Mapping[str, Mapping[str, Any]] | None = None,
) -> pa.Table:
    """Encode episodes as rows of the episode schema (vectorised over all rows)."""
    extra_columns = dict(extra_columns if extra_columns is not None else infer_extra_columns(episodes))
    schema = S.episode_schema(observation_space, action_space, extra_columns)
    steps = np.array([len(e) for e in episodes], dtype=np.int64)
    columns: dict[str, pa.Array] = {
        S.EPISODE_ID: pa.array([str(e.id) for e in episodes], type=pa.string()),
        S.CHUNK_INDEX: pa.array([e.chunk_index for e in episodes], type=pa.int32()),
        S.T_START: pa.array([e.t_start for e in episodes], type=pa.int64()),
        S.AGENT_ID: pa.array([e.agent_id for e in episodes], type=pa.string()),
        S.MODULE_ID: pa.array([e.module_id for e in episodes], type=pa.string()),
    }
    if episodes:
        obs = to_arrow(batch_concat([e.obs for e in episodes]), observation_space)
        act = to_arrow(batch_concat([e.actions for e in episodes]), action_space)
        rew = pa.array(np.concatenate([e.rewards for e in episodes]), type=pa.float32())
    else:
        obs, act, rew = (pa.array([], type=schema.field(n).type.value_type) for n in (S.OBS, S.ACTIONS, S.REWARDS))
    columns[S.OBS] = list_array(steps + 1, obs)
    columns[S.ACTIONS] = list_array(steps, act)
    columns[S.REWARDS] = list_array(steps, rew)
    columns[S.TERMINATED] = pa.array([e.terminated for e in episodes], type=pa.bool_())
    columns[S.TRUNCATED] = pa.array([e.truncated for e in episodes], type=pa.bool_())
    for name, spec in extra_columns.items():
        missing = [e.id for e in episodes if name not in e.extras]
        if missing:
            raise ValueError(f"extra column {name!r} is missing from episode {missing[0]!r}")
        if episodes:
            values = _extra_to_arrow([e.extras[name] for e in episodes], spec)
        else:
            values = pa.array([], type=S.extra_value_type(spec))
        columns[name] = list_array(steps, values)
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


def table_to_episodes(
    table: pa.Table,
    observation_space: gym.Space,
    action_space: gym.Space,
    extra_columns: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[SingleAgentEpisode]:
    """Decode rows of the episode schema (any extra columns present are kept)."""
    if table.num_rows == 0:
        return []
    names = set(table.column_names)
    extra_columns = dict(extra_columns or {})
    obs_values, obs_len = split_list_array(table.column(S.OBS))
    act_values, steps = split_list_array(table.column(S.ACTIONS))
    rew_values, _ = split_list_array(table.column(S.REWARDS))
    obs = from_arrow(obs_values, observation_space)
    act = from_arrow(act_values, action_space)
    rew = rew_values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    extras = {}
    for name, spec in extra_columns.items():
        if name in names:
            values, _ = split_list_array(table.column(name))
            extras[name] = _extra_from_arrow(values, spec)
    col = {n: table.column(n).to_pylist() for n in S.BOOKKEEPING_COLUMNS if n in names}
    episodes = []
    o = a = 0
    for i in range(table.num_rows):
        t = int(steps[i])
        episodes.append(
            SingleAgentEpisode(
                id=col[S.EPISODE_ID][i],
                obs=batch_slice(obs, o, o + int(obs_len[i])),
                actions=batch_slice(act, a, a + t),
                rewards=rew[a : a + t],
                terminated=col[S.TERMINATED][i],
                truncated=col[S.TRUNCATED][i],
                chunk_index=col.get(S.CHUNK_INDEX, [0] * table.num_rows)[i],
                t_start=col.get(S.T_START, [0] * table.num_rows)[i],
                agent_id=col.get(S.AGENT_ID, [None] * table.num_rows)[i],
                module_id=col.get(S.MODULE_ID, [None] * table.num_rows)[i],
                extras={k: v[a : a + t] for k, v in extras.items()},
            )
        )
        o += int(obs_len[i])
        a += t
    return episodes
