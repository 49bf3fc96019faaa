"""Pieces shared by both RLlib new-stack layouts: the per-group output rows
(episode rows plus bookkeeping), quarantine records and value checks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.convert.limits import ValueTooLargeError
from offlinerl.convert.packing import PackedDecodeError, RefusedPickleError
from offlinerl.convert.rllib.msgpack import EpisodeStateError
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import list_array
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table

__all__ = [
    "STATUS",
    "QUARANTINE",
    "DUPLICATES",
    "BY_RECORDING",
    "STEPS",
    "INTERNAL_COLUMNS",
    "GroupSettings",
    "empty_batch",
    "fit_value",
    "digest",
    "record",
    "row_error",
    "split_row_error",
    "decode_reason",
    "group_records",
    "output_rows",
    "arrow_row",
    "quarantine_row",
    "drop_internal",
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


def fit_value(value: Any, space: gym.Space, what: str) -> Any:
    """Check one decoded value against ``space`` (structure, shape, lossless dtype); return it in the space's form."""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, Mapping) or set(value) != set(space.spaces):
            raise ValueError(f"{what}: expected a dict with keys {sorted(space.spaces)}, got {type(value).__name__}")
        return {k: fit_value(value[k], s, f"{what}.{k}") for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            raise ValueError(f"{what}: expected a tuple of {len(space.spaces)}")
        return tuple(fit_value(v, s, f"{what}.{i}") for i, (v, s) in enumerate(zip(value, space.spaces)))
    arr = np.asarray(value)
    if isinstance(space, gym.spaces.Discrete):
        if arr.size != 1 or arr.dtype.kind not in "iub":
            raise ValueError(f"{what}: expected one integer for {space}, got {arr.dtype} of shape {arr.shape}")
        return np.int64(arr.reshape(()))
    shape = tuple(space.shape)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{what}: shape {arr.shape} does not fit {space}")
    dtype = np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype
    out = arr.reshape(shape).astype(dtype)
    if arr.dtype != out.dtype and not np.array_equal(out, arr, equal_nan=arr.dtype.kind == "f"):
        raise ValueError(f"{what}: values of dtype {arr.dtype} do not fit {space} without loss")
    return out


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    return [np.ascontiguousarray(np.asarray(value))]


def digest(*values: Any) -> bytes:
    """A 128-bit fingerprint of values (dtype, shape and bytes of every leaf): equal iff identical."""
    h = hashlib.blake2b(digest_size=16)
    for v in values:
        for leaf in _leaves(v):
            h.update(f"{leaf.dtype.str}{leaf.shape}".encode())
            h.update(leaf.tobytes())
    return h.digest()


def record(file: str, row: int | None, level: str, reason: str, message: str, **more: Any) -> dict[str, Any]:
    """One quarantine record (a JSONL line, docs/convert.md): ``row`` is 0-based here and stored 1-based,
    ``None`` for a whole file; ``level`` is ``row`` (the row itself is bad), ``episode`` (its episode is
    quarantined whole) or ``file``."""
    return {"file": file, "row": None if row is None else row + 1, "level": level, "reason": reason,
            "message": message, **more}


def row_error(reason: str, message: str) -> str:
    """A row's own problem as the ``_error`` column carries it to the group function (code, tab, message)."""
    return f"{reason}\t{message}"


def split_row_error(error: str) -> tuple[str, str]:
    """``(reason, message)`` of a :func:`row_error` text."""
    reason, _, message = error.partition("\t")
    return reason, message


def decode_reason(exc: BaseException) -> str:
    """The reason code of a value that could not be decoded."""
    if isinstance(exc, ValueTooLargeError):
        return "too_large"
    if isinstance(exc, RefusedPickleError):
        return "refused_pickle"
    if isinstance(exc, PackedDecodeError):
        return "bad_packed_value"
    if isinstance(exc, EpisodeStateError):
        return "bad_record"
    return "bad_value"


def group_records(paths: Sequence[str], files: Sequence[int], rows: Sequence[int], errors: Sequence[str | None],
                  reason: str, message: str, **more: Any) -> list[dict[str, Any]]:
    """Quarantine records for every row of one episode group: a row's own problem where it has one
    (level ``row``), else why the episode was dropped (level ``episode``)."""
    return [record(paths[f], r, "row", *split_row_error(e), **more) if e else
            record(paths[f], r, "episode", reason, message, **more)
            for f, r, e in zip(files, rows, errors)]


def _with_internal(table: pa.Table, status: str, quarantine: Sequence[dict] | None, duplicates: int,
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
    """Rows of one converted episode (split into chunks if long) with the bookkeeping columns."""
    episode.check()
    chunks = episode.split(settings.max_steps_per_row)
    table = episodes_to_table(chunks, settings.observation_space, settings.action_space, settings.extra_columns)
    return _with_internal(table, "ok", notes, duplicates, by_recording)


def arrow_row(settings: GroupSettings, *, episode_id: str, agent_id: str | None, module_id: str | None,
              obs: pa.Array, actions: pa.Array, rewards: pa.Array, terminated: bool, truncated: bool,
              extras: Mapping[str, pa.Array], duplicates: int = 0, by_recording: bool = False) -> pa.Table:
    """One episode row built straight from Arrow step values (already of the schema's value types).

    The fast path for episodes that fit in one row: no round trip through numpy.
    """
    steps = len(actions)
    schema = S.episode_schema(settings.observation_space, settings.action_space, settings.extra_columns)
    columns = {
        S.EPISODE_ID: pa.array([episode_id], pa.string()), S.CHUNK_INDEX: pa.array([0], pa.int32()),
        S.T_START: pa.array([0], pa.int64()), S.AGENT_ID: pa.array([agent_id], pa.string()),
        S.MODULE_ID: pa.array([module_id], pa.string()),
        S.OBS: list_array([steps + 1], obs), S.ACTIONS: list_array([steps], actions),
        S.REWARDS: list_array([steps], pc.cast(rewards, pa.float32(), safe=False)),
        S.TERMINATED: pa.array([terminated]), S.TRUNCATED: pa.array([truncated]),
        **{name: list_array([steps], values) for name, values in extras.items()},
    }
    table = pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)
    return _with_internal(table, "ok", None, duplicates, by_recording)


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
    return _with_internal(table, "quarantined", records, 0, False)


def _empty_extra(spec: Mapping[str, Any]) -> Any:
    if spec["dtype"] in (S.JSON_DTYPE, "string"):
        return []
    return np.zeros((0, *spec.get("shape", ())), dtype=spec["dtype"])


def drop_internal(batch: pa.Table) -> pa.Table:
    """Keep only the converted episode rows, in the episode schema."""
    keep = pc.equal(batch.column(STATUS), "ok")
    return batch.filter(keep).drop_columns(list(INTERNAL_COLUMNS))
