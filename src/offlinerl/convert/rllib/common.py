"""Pieces shared by both RLlib new-stack layouts: quarantine records, value checks and the
Arrow fast path for one-row episodes (the per-group output rows are :mod:`offlinerl.convert.grouped`)."""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.convert.grouped import GroupSettings, with_internal
from offlinerl.convert.limits import ValueTooLargeError
from offlinerl.convert.packing import PackedDecodeError, RefusedPickleError
from offlinerl.convert.rllib.msgpack import EpisodeStateError
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import list_array

__all__ = [
    "fit_value",
    "digest",
    "record",
    "row_error",
    "split_row_error",
    "decode_reason",
    "group_records",
    "arrow_row",
]

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
    return with_internal(table, "ok", None, duplicates, by_recording)
