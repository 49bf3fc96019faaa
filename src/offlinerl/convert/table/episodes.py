"""One episode's step rows -> one episode row (``groupby(episode[, agent]).map_groups``), or its quarantine records.

Rows are sorted by step (ties by file and position). An episode is written
whole or not at all: one bad row quarantines the episode (the bad row with its
own reason, level ``line``/``row``; the others with level ``episode``). The
steps are joined by the shared stitcher (:func:`offlinerl.convert.stitch.stitch`,
one fragment per step row), which refuses gaps, end flags before the last step
and, with ``next_observation``, a next observation that is not the following
row's observation. With the spec's ``agent`` column a group is one agent's
rows of one episode, and its row carries that ``agent_id`` (``module_id``
stays null: each agent trains its own module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.convert.grouped import GroupSettings, output_rows, quarantine_row
from offlinerl.convert.stitch import Piece, StitchProblem, stitch
from offlinerl.convert.table.rows import (
    ACTION, AGENT, ERROR, FILE, KEY, LOGP, NO_EPISODE, POS, RAW, REWARD, STEP, TERM, TRUNC, next_col, obs_col,
    position_key,
)
from offlinerl.convert.table.spec import LEAF, TableSpec
from offlinerl.episodes.episode import SingleAgentEpisode

__all__ = ["EpisodeSettings", "build_episode", "leaf_spaces", "LOGP_COLUMN"]

LOGP_COLUMN = "action_logp"


@dataclass(frozen=True)
class EpisodeSettings:
    """What the group function needs (picklable)."""

    spec: TableSpec
    """The column mapping."""
    files: tuple[str, ...]
    """Input files (index = file position)."""
    group: GroupSettings
    """Spaces, extra columns, chunk size."""


def leaf_spaces(space: gym.Space) -> list[tuple[str, gym.Space]]:
    """``(key, space)`` per leaf: the Dict's items, or ``("", space)``."""
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.items())
    return [(LEAF, space)]


def _width(space: gym.Space) -> int:
    return 1 if isinstance(space, gym.spaces.Discrete) else int(np.prod(space.shape))


def _leaf_problem(values: list[float], space: gym.Space, what: str, is_action: bool) -> tuple[str, str] | None:
    """Why one leaf value does not fit its space (``wrong_width``, ``out_of_space``), or None."""
    if len(values) != _width(space):
        return "wrong_width", f"{what}: {len(values)} values, the space {space} needs {_width(space)}"
    arr = np.asarray(values, dtype=np.float64)
    if isinstance(space, gym.spaces.Discrete):
        ok = arr[0].is_integer() and space.start <= arr[0] < space.start + space.n
        return None if ok else ("out_of_space", f"{what}: {arr[0]:g} is not in {space}")
    dtype = np.dtype(np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype)
    if dtype.kind in "iub" and not np.all(np.mod(arr, 1) == 0):
        return "out_of_space", f"{what}: non-integer values for {space}"
    if isinstance(space, (gym.spaces.MultiBinary, gym.spaces.MultiDiscrete)):
        ok = space.contains(arr.reshape(space.shape).astype(dtype))
        return None if ok else ("out_of_space", f"{what}: {values} is not in {space}")
    if isinstance(space, gym.spaces.Box):
        low, high = space.low.ravel().astype(np.float64), space.high.ravel().astype(np.float64)
        if is_action:
            cast = arr.astype(dtype).astype(np.float64)
            if not np.all((cast >= low) & (cast <= high)):
                return "out_of_space", f"{what}: {values} is outside the bounds of {space}"
        elif np.any((np.isinf(arr) & np.isfinite(np.where(arr > 0, high, low)))):
            return "out_of_space", f"{what}: an infinite value where {space} has a finite bound"
    return None


def _to_space(flat: np.ndarray, space: gym.Space) -> np.ndarray:
    """(N, width) float64 -> a batch of the leaf space's values."""
    if isinstance(space, gym.spaces.Discrete):
        return flat[:, 0].astype(np.int64)
    dtype = np.int8 if isinstance(space, gym.spaces.MultiBinary) else space.dtype
    return flat.reshape(len(flat), *space.shape).astype(dtype)


class _Rejected(Exception):
    def __init__(self, reason: str, message: str, bad: dict[int, tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.bad = reason, message, bad or {}


def build_episode(group: pa.Table, settings: EpisodeSettings) -> pa.Table:
    """Ray ``map_groups`` function: the rows of one episode (of one agent) -> its episode row(s), or a quarantine
    row."""
    spec, files = settings.spec, settings.files
    key = group.column(KEY)[0].as_py()
    agent = group.column(AGENT)[0].as_py() if spec.agent else None
    ids = {} if key == NO_EPISODE else {"episode_id": key, **({"agent_id": agent} if spec.agent else {})}
    rows = sorted(group.to_pylist(), key=lambda r: (r[STEP] is None, r[STEP] or 0, r[FILE], r[POS] or 0))
    try:
        bad = {i: tuple(r[ERROR].split("\t", 1)) for i, r in enumerate(rows) if r[ERROR]}
        if key == NO_EPISODE:  # every such row has its own error (bad_episode_id, bad_agent_id, bad_json ...)
            raise _Rejected("bad_episode_id", "no readable episode id", bad)
        if bad:
            raise _Rejected("partly_unreadable", "another row of this episode cannot be read", bad)
        return _episode(key, agent, rows, spec, settings.group)
    except _Rejected as rej:
        records = []
        for i, r in enumerate(rows):
            reason, message = rej.bad.get(i, (rej.reason, rej.message))
            path = files[r[FILE]]
            records.append({"file": path, position_key(path): r[POS],
                            "level": ("file" if r[POS] is None else position_key(path)) if i in rej.bad
                            else "episode", "reason": reason, "message": message,
                            **({"raw": r[RAW]} if r[RAW] is not None else {}), **ids})
        return quarantine_row(key, records, settings.group)


def _episode(key: str, agent: str | None, rows: list[dict[str, Any]], spec: TableSpec,
             group: GroupSettings) -> pa.Table:
    steps = [r[STEP] for r in rows]
    dupes = [i for i in range(1, len(rows)) if steps[i] == steps[i - 1]]
    if dupes:
        raise _Rejected("duplicate_step", f"step {steps[dupes[0]]} appears more than once")
    if spec.step_kind == "index":
        gaps = [i for i in range(1, len(rows)) if steps[i] != steps[i - 1] + 1]
        if gaps:
            i = gaps[0]
            raise _Rejected("gap", f"steps {steps[i - 1] + 1}..{steps[i] - 1} are missing")
    n_steps = len(rows) if spec.next_observation else len(rows) - 1
    if n_steps < 1:
        raise _Rejected("too_short", "one row and no next_observation: an episode needs at least one step")
    obs_space, act_space = group.observation_space, group.action_space
    if group.agent_spaces is not None:  # agents of different spaces: each agent's rows in its own
        if agent not in group.agent_spaces:
            raise _Rejected("unknown_agent", f"agent {agent!r} has no spaces (the spec's agent_spaces or the env "
                                             f"name {', '.join(map(repr, group.agent_spaces))})")
        obs_space, act_space = group.agent_spaces[agent]
    obs_leaves = leaf_spaces(obs_space)
    bad: dict[int, tuple[str, str]] = {}
    for i, r in enumerate(rows):
        cells = [(obs_col(k), s, f"observation{'.' + k if k else ''}", False) for k, s in obs_leaves]
        if spec.next_observation:
            cells += [(next_col(k), s, f"next_observation{'.' + k if k else ''}", False) for k, s in obs_leaves]
        if i < n_steps:
            cells.append((ACTION, act_space, "action", True))
            if r[REWARD] is None or (spec.logp_column and r[LOGP] is None):
                bad[i] = ("missing_value", "reward or " + spec.logp_column if r[REWARD] is None and spec.logp_column
                          else ("reward is empty" if r[REWARD] is None else f"{spec.logp_column} is empty"))
                continue
        for col, space, what, is_action in cells:
            if r[col] is None:
                bad[i] = ("missing_value", f"{what} is empty")
                break
            problem = _leaf_problem(r[col], space, what, is_action)
            if problem:
                bad[i] = problem
                break
    if bad:
        raise _Rejected("partly_unreadable", "another row of this episode does not fit the spaces", bad)
    flat = np.array([[x for k, _ in obs_leaves for x in r[obs_col(k)]] for r in rows], dtype=np.float64)
    if spec.next_observation:
        nxt = np.array([[x for k, _ in obs_leaves for x in r[next_col(k)]] for r in rows], dtype=np.float64)
    else:
        nxt = flat[1:]
    term = np.array([bool(r[TERM]) for r in rows[:n_steps]])
    trunc = np.array([bool(r[TRUNC]) for r in rows[:n_steps]])
    if not spec.next_observation:  # flags written on the final-observation row count for the last step
        term[-1] |= bool(rows[-1][TERM])
        trunc[-1] |= bool(rows[-1][TRUNC])
    for flags, rule in ((term, spec.terminated.rule), (trunc, spec.truncated.rule)):
        if rule is not None:
            flags[:] = False
            flags[-1] = rule == "last_step"
    t0 = int(steps[0]) if spec.step_kind == "index" else 0
    pieces = [Piece(t_first=t0 + i, source=(rows[i][FILE], rows[i][POS]), columns={
        "obs": flat[i:i + 1], "next_obs": nxt[i:i + 1],
        "actions": np.array([rows[i][ACTION]], dtype=np.float64),
        "rewards": np.array([rows[i][REWARD]], dtype=np.float64),
        "terminated": term[i:i + 1], "truncated": trunc[i:i + 1],
        LOGP_COLUMN: np.array([0.0 if rows[i][LOGP] is None else rows[i][LOGP]], dtype=np.float64),  # keeps -0.0
    }) for i in range(n_steps)]
    joined = stitch(pieces)
    if isinstance(joined, StitchProblem):
        raise _Rejected({"duplicate": "duplicate_step"}.get(joined.reason, joined.reason), joined.message)
    cols = joined.columns
    obs, start = {}, 0
    for k, s in obs_leaves:
        obs[k] = _to_space(cols["obs"][:, start:start + _width(s)], s)
        start += _width(s)
    episode = SingleAgentEpisode(
        id=key, obs=obs if isinstance(obs_space, gym.spaces.Dict) else obs[LEAF],
        actions=_to_space(cols["actions"], act_space), rewards=cols["rewards"].astype(np.float32),
        terminated=joined.terminated, truncated=joined.truncated, t_start=joined.t_start, agent_id=agent,
        extras={LOGP_COLUMN: cols[LOGP_COLUMN].astype(np.float32)} if spec.logp_column else {},
    )
    return output_rows(episode, group, by_recording=joined.truncated_by_recording)
