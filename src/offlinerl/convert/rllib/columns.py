"""RLlib new-stack per-step layout (``output_write_episodes=False``): decode step
rows, then stitch each episode's steps back together.

Two Ray Data stages use these functions: :func:`read_piece` (``map_batches``
over (file, row group) pieces: decode every row, attach its file and row
position) and :func:`stitch_group` (``groupby(key).map_groups``: order one
episode's rows by (file, row), join them with
:func:`offlinerl.convert.stitch.stitch_rows`, build the episode row). Which
columns a recording has, and how its extra columns are described, is :mod:`offlinerl.convert.rllib.step_columns`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.convert.limits import DecodeBudget, DecodeLimits
from offlinerl.convert.packing import PackedDecodeError, unpack_any
from offlinerl.convert.grouped import GroupSettings, empty_batch, output_rows, quarantine_row
from offlinerl.convert.rllib.common import arrow_row, decode_reason, fit_value, group_records, row_error, split_row_error
from offlinerl.convert.stitch import StitchProblem, stitch_rows
from offlinerl.convert.rllib.step_columns import CORE_COLUMNS, is_list, plain
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_concat, from_arrow, to_arrow, value_type
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["StepSettings", "step_schema", "read_piece", "stitch_group"]

KEY, FILE, ROW, ERROR, SIG, OBS_SIG, NEXT_SIG = "_key", "_file", "_row", "_error", "_sig", "_obs_sig", "_new_obs_sig"
NO_EPISODE_KEY = "\x00(rows without eps_id)"


@dataclass(frozen=True)
class StepSettings:
    """Decoding settings sent to the read tasks."""

    group: GroupSettings
    """Spaces, extra columns, chunk size."""
    files: tuple[str, ...]
    """All input files, in order (index = file position)."""
    limits: DecodeLimits = field(default_factory=DecodeLimits)
    """Caps on packed values: each, and all of one row group together (``max_expansion`` × its size)."""


def step_schema(settings: GroupSettings) -> pa.Schema:
    """Arrow schema of decoded step rows (the input of the group-by)."""
    obs_t, act_t = value_type(settings.observation_space), value_type(settings.action_space)
    fields = [
        pa.field(KEY, pa.string()), pa.field(S.EPISODE_ID, pa.string()), pa.field(S.AGENT_ID, pa.string()),
        pa.field(S.MODULE_ID, pa.string()), pa.field(FILE, pa.int32()), pa.field(ROW, pa.int64()),
        pa.field(ERROR, pa.string()), pa.field(SIG, pa.binary()), pa.field(OBS_SIG, pa.binary()),
        pa.field(NEXT_SIG, pa.binary()), pa.field(S.OBS, obs_t), pa.field("new_obs", obs_t),
        pa.field(S.ACTIONS, act_t), pa.field(S.REWARDS, pa.float64()), pa.field(S.TERMINATED, pa.bool_()),
        pa.field(S.TRUNCATED, pa.bool_()),
    ]
    fields += [pa.field(n, S.extra_value_type(s)) for n, s in settings.extra_columns.items()]
    return pa.schema(fields)


def _decode_space_column(arr: pa.Array, space: gym.Space, name: str, errors: list, budget: DecodeBudget) -> Any:
    """Decode a column into a space batch; rows that fail (or overrun ``budget``) get an error and a zero value."""
    arr = plain(arr)
    fast = _numeric_batch(arr, space)
    if fast is not None:
        return fast
    leaf = _leaf_form(space)
    values = []
    for i, v in enumerate(arr.to_pylist()):
        try:
            if v is None:
                raise ValueError(f"{name} is null")
            decoded = unpack_any(v, budget) if isinstance(v, (str, bytes)) else v
            if leaf and isinstance(decoded, np.ndarray) and (decoded.dtype, decoded.shape) == leaf:
                values.append(decoded)  # already exactly the space's form
            else:
                values.append(fit_value(decoded, space, name))
        except (PackedDecodeError, ValueError, TypeError) as exc:
            errors[i] = errors[i] or row_error(decode_reason(exc), f"{name}: {exc}")
            values.append(None)
    return _stack(values, space)


def _leaf_form(space: gym.Space) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of one value of a Box/MultiDiscrete/MultiBinary space; None for other spaces."""
    if isinstance(space, gym.spaces.MultiBinary):
        return np.dtype(np.int8), tuple(space.shape)
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete)):
        return np.dtype(space.dtype), tuple(space.shape)
    return None


def _numeric_batch(arr: pa.Array, space: gym.Space) -> np.ndarray | None:
    """Vectorised decoding of a null-free numeric (list) column of a leaf space; None -> decode row by row."""
    leaf = _leaf_form(space)
    if arr.null_count or (leaf is None and not isinstance(space, gym.spaces.Discrete)):
        return None
    dtype, shape = leaf if leaf else (np.dtype(np.int64), ())
    size = int(np.prod(shape))
    if is_list(arr.type) and (pa.types.is_integer(arr.type.value_type) or pa.types.is_floating(arr.type.value_type)):
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
        if len(arr) and (lengths != size).any() or arr.flatten().null_count:
            return None
        flat = arr.flatten().to_numpy(zero_copy_only=False)
    elif size == 1 and (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or pa.types.is_boolean(arr.type)):
        flat = arr.to_numpy(zero_copy_only=False)
    else:
        return None
    out = flat.astype(dtype)
    if out.dtype != flat.dtype and not np.array_equal(out, flat, equal_nan=flat.dtype.kind == "f"):
        return None  # lossy: the row-by-row path names the rows
    return out.reshape((len(arr), *shape))


def _stack(values: Sequence[Any], space: gym.Space) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {k: _stack([None if v is None else v[k] for v in values], s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_stack([None if v is None else v[i] for v in values], s) for i, s in enumerate(space.spaces))
    out = empty_batch(space, len(values))
    for i, v in enumerate(values):
        if v is not None:
            out[i] = v
    return out


def _decode_extra(arr: pa.Array, spec: Mapping[str, Any], name: str, errors: list,
                  budget: DecodeBudget) -> tuple[pa.Array, np.ndarray]:
    """An extra column as (Arrow values of the step type, numpy form for fingerprints)."""
    arr = plain(arr)
    if spec["dtype"] in ("string", S.JSON_DTYPE):
        text = arr.cast(pa.string())
        return text, np.array([hashlib.blake2b((v or "").encode(), digest_size=8).digest() for v in text.to_pylist()])
    shape = tuple(spec.get("shape", ()))
    box = gym.spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.dtype(spec["dtype"]))
    if spec.get("packed") or is_list(arr.type) or arr.null_count:
        batch = _decode_space_column(arr, box, name, errors, budget)
    else:
        batch = arr.to_numpy(zero_copy_only=False).astype(spec["dtype"])
    batch = np.ascontiguousarray(batch)
    flat = pa.array(batch.reshape(-1), type=pa.from_numpy_dtype(batch.dtype))
    values = pa.FixedSizeListArray.from_arrays(flat, int(np.prod(shape))) if shape else flat
    return values, batch


def _row_digests(columns: Sequence[Any], n: int) -> list[bytes]:
    """Per-row fingerprints over the leaves of several batches (row i of every column)."""
    parts = []
    for col in columns:
        if isinstance(col, (dict, tuple)):
            leaves = list(col.values()) if isinstance(col, dict) else list(col)
            parts.append(np.frombuffer(b"".join(_row_digests(leaves, n)), np.uint8).reshape(n, 16))
        else:
            parts.append(np.ascontiguousarray(col).reshape(n, -1).view(np.uint8).reshape(n, -1))
    matrix = np.ascontiguousarray(np.concatenate(parts, axis=1)) if parts else np.zeros((n, 0), np.uint8)
    return [hashlib.blake2b(matrix[i].tobytes(), digest_size=16).digest() for i in range(n)]


def read_piece(pieces: pa.Table, *, settings: StepSettings) -> pa.Table:
    """``map_batches`` function: decode the rows of (file, row group) pieces into step rows."""
    tables = []
    for piece in pieces.to_pylist():
        tables.append(_read_one(piece["file_index"], piece["row_group"], piece["row_offset"], settings))
    return pa.concat_tables(tables)


def _read_one(file_index: int, row_group: int, row_offset: int, settings: StepSettings) -> pa.Table:
    g = settings.group
    path = settings.files[file_index]
    table = pq.ParquetFile(path).read_row_group(row_group)
    n = table.num_rows
    errors: list[str | None] = [None] * n
    names = set(table.column_names)
    for col in CORE_COLUMNS[3:]:
        if col not in names:
            errors = [e or row_error("missing_column", f"column {col!r} missing from this file") for e in errors]
    for col in g.extra_columns:
        if col not in names:
            errors = [e or row_error("missing_column", f"extra column {col!r} missing from this file")
                      for e in errors]
    def column(name: str, fill: pa.Array) -> pa.Array:
        return plain(table.column(name)) if name in names else fill
    nulls = pa.nulls(n, pa.string())
    eps = column("eps_id", nulls).cast(pa.string()).to_pylist()
    agents = column("agent_id", nulls).cast(pa.string()).to_pylist()
    modules = column("module_id", nulls).cast(pa.string()).to_pylist()
    zeros = pa.array([0] * n, pa.int64())
    budget = settings.limits.budget(table.nbytes)  # all packed values of this row group together
    obs = _decode_space_column(column("obs", nulls), g.observation_space, "obs", errors, budget)
    new_obs = _decode_space_column(column("new_obs", nulls), g.observation_space, "new_obs", errors, budget)
    actions = _decode_space_column(column("actions", nulls), g.action_space, "actions", errors, budget)
    reward_col = column("rewards", zeros)
    rewards = np.asarray(reward_col.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
    for i in np.flatnonzero(reward_col.is_null().to_numpy(zero_copy_only=False)):
        errors[i] = errors[i] or row_error("null_value", "rewards is null")
    term, trunc = (_flags(column(c, pa.array([False] * n)), c, errors) for c in ("terminateds", "truncateds"))
    extras, extra_values = {}, []
    for name, spec in g.extra_columns.items():
        source = table.column(name) if name in names else pa.nulls(n, S.extra_value_type(spec))
        extras[name], hashable = _decode_extra(source, spec, name, errors, budget)
        extra_values.append(hashable)
    for i, e in enumerate(eps):
        if e is None:
            errors[i] = errors[i] or row_error("null_value", "eps_id is null")
    keys = [NO_EPISODE_KEY if e is None else f"{e}\x1f{a or ''}" for e, a in zip(eps, agents)]
    columns = {
        KEY: pa.array(keys, pa.string()), S.EPISODE_ID: pa.array(eps, pa.string()),
        S.AGENT_ID: pa.array(agents, pa.string()), S.MODULE_ID: pa.array(modules, pa.string()),
        FILE: pa.array([file_index] * n, pa.int32()), ROW: pa.array(np.arange(row_offset, row_offset + n), pa.int64()),
        ERROR: pa.array(errors, pa.string()),
        SIG: pa.array(_row_digests([obs, new_obs, actions, rewards, term, trunc, *extra_values], n), pa.binary()),
        OBS_SIG: pa.array(_row_digests([obs], n), pa.binary()),
        NEXT_SIG: pa.array(_row_digests([new_obs], n), pa.binary()),
        S.OBS: to_arrow(obs, g.observation_space), "new_obs": to_arrow(new_obs, g.observation_space),
        S.ACTIONS: to_arrow(actions, g.action_space), S.REWARDS: pa.array(rewards, pa.float64()),
        S.TERMINATED: pa.array(term), S.TRUNCATED: pa.array(trunc), **extras,
    }
    schema = step_schema(g)
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


def _flags(arr: pa.Array, name: str, errors: list) -> np.ndarray:
    for i in np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False)):
        errors[i] = errors[i] or row_error("null_value", f"{name} is null")
    return arr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _where(files: Sequence[str], f: int, r: int) -> str:
    """``file:row`` of a row, 1-based like the quarantine records."""
    return f"{files[f]}:{r + 1}"


def stitch_group(group: pa.Table, *, settings: StepSettings) -> pa.Table:
    """``map_groups`` function: one episode's step rows -> its episode row(s), or quarantine records."""
    g = settings.group
    group = group.sort_by([(FILE, "ascending"), (ROW, "ascending")])
    key = group.column(KEY)[0].as_py()
    files, rows = group.column(FILE).to_pylist(), group.column(ROW).to_pylist()
    paths = settings.files
    errors = group.column(ERROR).to_pylist()

    def quarantine(reason: str, message: str) -> pa.Table:
        recs = group_records(paths, files, rows, errors, reason, message, eps_id=key.split("\x1f")[0])
        return quarantine_row(key, recs, g)

    if key == NO_EPISODE_KEY:
        return quarantine("null_value", "row has no eps_id")
    bad = [i for i, e in enumerate(errors) if e]
    if bad:
        first = bad[0]
        return quarantine("partly_unreadable", f"episode dropped whole: row {_where(paths, files[first], rows[first])} "
                          f"is unreadable ({split_row_error(errors[first])[1]})")
    sig, osig, nsig = (group.column(c).to_pylist() for c in (SIG, OBS_SIG, NEXT_SIG))
    term, trunc = group.column(S.TERMINATED).to_pylist(), group.column(S.TRUNCATED).to_pylist()
    run = stitch_rows(files, sig, osig, nsig, [a or b for a, b in zip(term, trunc)],
                      where=lambda i: _where(paths, files[i], rows[i]))
    if isinstance(run, StitchProblem):
        return quarantine(run.reason, run.message)
    kept, duplicates, by_recording = run.kept, run.duplicates, run.truncated_by_recording
    last = kept[-1]
    idx = pa.array(kept, pa.int64())
    if len(kept) <= g.max_steps_per_row:
        return arrow_row(
            g, episode_id=key.split("\x1f")[0], agent_id=group.column(S.AGENT_ID)[0].as_py(),
            module_id=group.column(S.MODULE_ID)[0].as_py(),
            obs=pa.concat_arrays([group.column(S.OBS).take(idx).combine_chunks(),
                                  group.column("new_obs").take(pa.array([last], pa.int64())).combine_chunks()]),
            actions=group.column(S.ACTIONS).take(idx).combine_chunks(),
            rewards=group.column(S.REWARDS).take(idx).combine_chunks(),
            terminated=bool(term[last]), truncated=bool(trunc[last]) or by_recording,
            extras={name: group.column(name).take(idx).combine_chunks() for name in g.extra_columns},
            duplicates=duplicates, by_recording=by_recording,
        )
    obs = from_arrow(group.column(S.OBS).take(idx), g.observation_space)
    final = from_arrow(group.column("new_obs").take(pa.array([last], pa.int64())), g.observation_space)
    episode = SingleAgentEpisode(
        id=key.split("\x1f")[0],
        obs=batch_concat([obs, final]),
        actions=from_arrow(group.column(S.ACTIONS).take(idx), g.action_space),
        rewards=group.column(S.REWARDS).take(idx).to_numpy(),
        terminated=bool(term[last]),
        truncated=bool(trunc[last]) or by_recording,
        agent_id=group.column(S.AGENT_ID)[0].as_py(),
        module_id=group.column(S.MODULE_ID)[0].as_py(),
        extras={name: _extra_numpy(group.column(name).take(idx), spec) for name, spec in g.extra_columns.items()},
    )
    return output_rows(episode, g, duplicates=duplicates, by_recording=by_recording)


def _extra_numpy(values: pa.ChunkedArray | pa.Array, spec: Mapping[str, Any]) -> Any:
    values = plain(values)
    if spec["dtype"] in ("string", S.JSON_DTYPE):
        return values.to_pylist()
    shape = tuple(spec.get("shape", ()))
    flat = values.flatten() if shape else values
    return flat.to_numpy(zero_copy_only=False).astype(spec["dtype"]).reshape((len(values), *shape))

