"""Row-local validation checks, run inside one scan unit (a parquet row group).

Everything here is vectorised over a record batch: the per-step values of all
rows are decoded into flat numpy arrays, checked with array masks, and reduced
to "which rows offend". Only the first few offending rows get a readable
description (step index, leaf path, value, allowed range). The checks that span
rows (unique ids, chunk contiguity, counts) run in the driver on the small
per-row bookkeeping tuples this module returns.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offlinerl.episodes import schema as S
from offlinerl.episodes.scan import ScanUnit, iter_unit_batches
from offlinerl.episodes.spaces import flat_size

__all__ = ["ROW_CHECKS", "check_unit", "leaf_values"]

#: Checks decided row by row, in report order.
ROW_CHECKS = ("lengths", "flags", "finite", "actions", "observations")

#: Per-row bookkeeping returned to the driver (for ids, chunks and counts).
SUMMARY_KEYS = ("row", S.EPISODE_ID, S.AGENT_ID, S.CHUNK_INDEX, S.T_START, "steps", S.TERMINATED, S.TRUNCATED,
                S.MODULE_ID)

_LIST_COLUMNS = (S.OBS, S.ACTIONS, S.REWARDS)


class _Findings:
    """Offending rows of one record batch, per check, with a description for the first few."""

    def __init__(self, n: int, limit: int) -> None:
        self.mask = {c: np.zeros(n, dtype=bool) for c in ROW_CHECKS}
        self.detail: dict[str, dict[int, tuple[str, Any]]] = {c: {} for c in ROW_CHECKS}
        self.limit = limit

    def flag(self, check: str, rows: np.ndarray, describe: Callable[[int], tuple[str, Any]]) -> None:
        new = rows & ~self.mask[check]
        self.mask[check] |= rows
        found = self.detail[check]
        for r in np.flatnonzero(new)[: max(0, self.limit - len(found))]:
            found[int(r)] = describe(int(r))


def _nulls(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.zeros(len(arr), dtype=bool)
    return arr.is_null().to_numpy(zero_copy_only=False)


def _numpy(arr: pa.Array) -> np.ndarray:
    if arr.null_count:
        arr = pc.fill_null(arr, pa.scalar(0, type=arr.type) if not pa.types.is_boolean(arr.type) else False)
    return arr.to_numpy(zero_copy_only=False)


def leaf_values(
    arr: pa.Array, space: gym.Space, path: str = "", null_steps: np.ndarray | None = None
) -> Iterator[tuple[str, gym.Space, np.ndarray, np.ndarray]]:
    """Yield ``(leaf path, leaf space, values (steps, flat size), null steps)`` for an array of space values."""
    nulls = _nulls(arr) if null_steps is None else (null_steps | _nulls(arr))
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from leaf_values(arr.field(key), sub, f"{path}.{key}", nulls)
    elif isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            yield from leaf_values(arr.field(str(i)), sub, f"{path}.{i}", nulls)
    elif isinstance(space, gym.spaces.Discrete):
        yield path, space, _numpy(arr).reshape(-1, 1), nulls
    else:
        size = flat_size(space)
        values = arr.values.slice(arr.offset * size, len(arr) * size)
        value_nulls = _nulls(values).reshape(-1, size).any(axis=1) if size else np.zeros(len(arr), dtype=bool)
        yield path, space, _numpy(values).reshape(len(arr), size), nulls | value_nulls


def _out_of_space(space: gym.Space, data: np.ndarray) -> tuple[np.ndarray, Callable[[int], str]]:
    """Mask of values outside a leaf space (NaN counts as outside) and a text for the allowed range of dim d."""
    if isinstance(space, gym.spaces.Discrete):
        lo, n = int(space.start), int(space.n)
        return (data < lo) | (data >= lo + n), lambda d: f"allowed {lo}..{lo + n - 1} (Discrete n={n}, start={lo})"
    if isinstance(space, gym.spaces.MultiDiscrete):
        lo = space.start.reshape(-1).astype(np.int64)
        hi = lo + space.nvec.reshape(-1).astype(np.int64)
        return (data < lo) | (data >= hi), lambda d: f"allowed {lo[d]}..{hi[d] - 1} (MultiDiscrete)"
    if isinstance(space, gym.spaces.MultiBinary):
        return (data != 0) & (data != 1), lambda d: "allowed 0 or 1 (MultiBinary)"
    low, high = space.low.reshape(-1), space.high.reshape(-1)
    return ~((data >= low) & (data <= high)), lambda d: f"allowed [{low[d]}, {high[d]}] (Box)"


def _index(space: gym.Space | None, d: int) -> str:
    if space is None or isinstance(space, gym.spaces.Discrete):
        return ""
    shape = tuple(space.shape)
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(d, shape)) + "]" if shape else ""


def _flag_values(find, check, column, path, space, data, bad, row_of_step, step_start, allowed):
    """Flag the rows with any ``bad`` value; describe the first bad value of each."""
    bad_step = bad.any(axis=1)
    if not bad_step.any():
        return
    rows = np.zeros(len(step_start), dtype=bool)
    rows[np.unique(row_of_step[bad_step])] = True

    def describe(r: int) -> tuple[str, Any]:
        s = int(np.flatnonzero(bad_step & (row_of_step == r))[0])
        d = int(np.flatnonzero(bad[s])[0])
        value = data[s, d].item()
        text = f"{column}[{s - step_start[r]}]{path}{_index(space, d)} = {value!r}"
        return (f"{text}, {allowed(d)}" if allowed else text), value

    find.flag(check, rows, describe)


def _non_finite_obs(leaf: gym.Space, data: np.ndarray) -> np.ndarray:
    """NaN anywhere, or inf where the matching bound of a Box is finite."""
    if data.dtype.kind != "f":
        return np.zeros(data.shape, dtype=bool)
    if not isinstance(leaf, gym.spaces.Box):
        return ~np.isfinite(data)
    low, high = leaf.low.reshape(-1), leaf.high.reshape(-1)
    return np.isnan(data) | ((data == np.inf) & np.isfinite(high)) | ((data == -np.inf) & np.isfinite(low))


def _check_space_column(find, rb, column, space, lengths, is_obs):
    """Null, finite and in-space checks for every value of ``obs`` or ``actions``."""
    arr = rb.column(rb.schema.get_field_index(column))
    offsets = arr.offsets.to_numpy()
    values = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
    row_of_step = np.repeat(np.arange(len(lengths)), lengths)
    step_start = offsets[:-1] - offsets[0]
    for path, leaf, data, null in leaf_values(values, space):
        where = (column, path, leaf, data)
        at = (row_of_step, step_start)
        if null.any():
            rows = np.zeros(len(lengths), dtype=bool)
            rows[np.unique(row_of_step[null])] = True
            find.flag("lengths", rows, lambda r, p=path: (
                f"{column}[{int(np.flatnonzero(null & (row_of_step == r))[0]) - step_start[r]}]{p} is null", None))
        bad, allowed = _out_of_space(leaf, data)
        bad &= ~null[:, None]
        if not is_obs:
            _flag_values(find, "actions", *where, bad, *at, allowed)
            continue
        non_finite = _non_finite_obs(leaf, data) & ~null[:, None]
        _flag_values(find, "finite", *where, non_finite, *at, lambda d: "NaN, or inf where the bound is finite")
        if data.dtype.kind == "f":
            bad &= np.isfinite(data)
        _flag_values(find, "observations", *where, bad, *at, allowed)


def _in_storage(own: gym.Space, storage: gym.Space) -> gym.Space:
    """An agent's space as values of the storage space: a narrower Box's padding must be 0."""
    if not isinstance(own, gym.spaces.Box) or own.shape == storage.shape:
        return own
    pad = storage.shape[0] - own.shape[0]
    return gym.spaces.Box(np.pad(own.low, (0, pad)), np.pad(own.high, (0, pad)), storage.shape, own.dtype)


def _check_agent_spaces(find, rb, agents, agent_spaces, storage, typed, lengths, limit) -> None:
    """The observations and actions of each agent's rows against that agent's own spaces (padding included: it
    must be 0); a row of an agent ``agent_spaces`` does not list fails ``actions``."""
    agents = np.array(agents, dtype=object)
    unknown = np.array([a not in agent_spaces for a in agents], dtype=bool)
    find.flag("actions", unknown, lambda r: (f"agent {agents[r]!r} has no entry in dataset.json's agent_spaces",
                                             agents[r]))
    for agent, spaces in agent_spaces.items():
        mine = agents == agent
        if not mine.any():
            continue
        own = _Findings(len(agents), limit)
        for name, space, stored, is_obs in ((S.OBS, spaces[0], storage[0], True),
                                            (S.ACTIONS, spaces[1], storage[1], False)):
            if name in typed:
                _check_space_column(own, rb, name, _in_storage(space, stored), np.maximum(lengths[name], 0), is_obs)
        for check, mask in own.mask.items():
            find.flag(check, mask & mine, lambda r, c=check: own.detail[c].get(r, (f"agent {agent}: outside its space",
                                                                                   None)))


def _check_batch(rb, offset, obs_space, act_space, typed, listed, limit, agent_spaces=None):
    n = rb.num_rows
    find = _Findings(n, limit)

    def column(name):
        return rb.column(rb.schema.get_field_index(name))

    def pylist(name):
        return column(name).to_pylist() if name in typed else [None] * n

    ids = pylist(S.EPISODE_ID)
    lengths = {}
    null_lists = {}
    for name in listed:
        c = column(name)
        lengths[name] = pc.fill_null(pc.list_value_length(c), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        null_lists[name] = _nulls(c)
    steps = lengths.get(S.ACTIONS, lengths.get(S.REWARDS))

    # lengths: T+1 observations, T of everything per-step, T >= 1, no nulls
    problems: list[list[str]] = [[] for _ in range(n)]
    for name in S.BOOKKEEPING_COLUMNS:
        if name in typed and name not in (S.AGENT_ID, S.MODULE_ID):
            for r in np.flatnonzero(_nulls(column(name))):
                problems[r].append(f"{name} is null")
    for name in listed:
        for r in np.flatnonzero(null_lists[name]):
            problems[r].append(f"{name} is null")
    if steps is not None:
        for r in np.flatnonzero(steps == 0):
            problems[r].append("the row has no steps (T = len(actions) = 0; T >= 1 is required)")
        for name, got in lengths.items():
            expected = steps + 1 if name == S.OBS else steps
            for r in np.flatnonzero((got != expected) & (got >= 0) & (steps >= 0)):
                problems[r].append(f"len({name}) = {got[r]}, expected {'T+1' if name == S.OBS else 'T'} = {expected[r]}")
    rows = np.array([bool(p) for p in problems], dtype=bool)
    find.flag("lengths", rows, lambda r: ("; ".join(problems[r]), problems[r][0]))

    # flags
    term = _numpy(column(S.TERMINATED)).astype(bool) if S.TERMINATED in typed else np.zeros(n, bool)
    trunc = _numpy(column(S.TRUNCATED)).astype(bool) if S.TRUNCATED in typed else np.zeros(n, bool)
    find.flag("flags", term & trunc, lambda r: ("terminated and truncated are both true", [True, True]))

    # rewards finite
    if S.REWARDS in typed:
        rew = column(S.REWARDS)
        offsets = rew.offsets.to_numpy()
        values = rew.values.slice(offsets[0], offsets[-1] - offsets[0])
        data = _numpy(values).reshape(-1, 1)
        bad = ~np.isfinite(data) & ~_nulls(values)[:, None]
        row_of_step = np.repeat(np.arange(n), np.diff(offsets))
        _flag_values(find, "finite", S.REWARDS, "", None, data, bad, row_of_step,
                     offsets[:-1] - offsets[0], None)
    if agent_spaces is None:
        for name, space, is_obs in ((S.OBS, obs_space, True), (S.ACTIONS, act_space, False)):
            if name in typed:
                _check_space_column(find, rb, name, space, np.maximum(lengths[name], 0), is_obs)
    else:
        _check_agent_spaces(find, rb, pylist(S.AGENT_ID), agent_spaces, (obs_space, act_space), typed, lengths, limit)

    summary = {
        "row": list(range(offset + 1, offset + n + 1)),  # 1-based, as converters and editors count
        S.EPISODE_ID: ids,
        S.AGENT_ID: pylist(S.AGENT_ID),
        S.CHUNK_INDEX: pylist(S.CHUNK_INDEX),
        S.T_START: pylist(S.T_START),
        "steps": [int(s) if s >= 0 else None for s in steps] if steps is not None else [None] * n,
        S.TERMINATED: pylist(S.TERMINATED),
        S.TRUNCATED: pylist(S.TRUNCATED),
        S.MODULE_ID: pylist(S.MODULE_ID),
    }
    return summary, find, ids


def check_unit(
    unit: ScanUnit,
    *,
    obs_space: gym.Space,
    act_space: gym.Space,
    columns: dict[str, tuple[Sequence[str], Sequence[str]]],
    max_examples: int,
    agent_spaces: Mapping[str, tuple[gym.Space, gym.Space]] | None = None,
) -> dict[str, Any]:
    """Run the row checks on one unit; ``columns[file] = (columns of the right type, list-typed columns)``;
    ``agent_spaces``: each agent's rows checked in its own spaces (``episodes.agent_spaces``)."""
    typed, listed = (set(c) for c in columns[unit.file])
    summary: dict[str, list] = {k: [] for k in SUMMARY_KEYS}
    bad = {c: 0 for c in ROW_CHECKS}
    examples: dict[str, list] = {c: [] for c in ROW_CHECKS}
    for offset, rb in iter_unit_batches(unit):
        part, find, ids = _check_batch(rb, offset, obs_space, act_space, typed, listed, max_examples, agent_spaces)
        for k in SUMMARY_KEYS:
            summary[k].extend(part[k])
        for check in ROW_CHECKS:
            bad[check] += int(find.mask[check].sum())
            for r, (detail, value) in sorted(find.detail[check].items()):
                if len(examples[check]) < max_examples:
                    examples[check].append([offset + r + 1, ids[r], detail, value])  # 1-based
    return {"rows": summary, "bad": bad, "examples": examples}
