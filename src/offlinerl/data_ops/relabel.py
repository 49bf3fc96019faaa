"""``relabel``: new rewards (scale, shift, clip, return-range scaling, a user function) and terminal flags from
a predicate; everything else of every row is kept.

The rewards of every step become ``clip(f(r) * scale * k + shift, lo, hi)``, where ``f`` is the user's reward
function (``module:function``, identity by default) and ``k = return_range / (max return - min return)`` over
the episodes of the input (IQL's locomotion scaling with ``return_range=1000``; 1 without). ``f`` is called
once per row as ``f(obs, actions, rewards, next_obs)`` with numpy arrays of the row's T steps (``obs`` holds
``obs[:T]``, ``next_obs`` ``obs[1:]``) and must return T finite rewards. It is named on the command line only
(``--reward-fn``), never read from a file: naming it imports its module, which runs code.

``terminal_when`` is a step predicate (:mod:`offlinerl.data_ops.expr`: names ``reward``, ``action``, ``obs``,
``next_obs``, indexable as ``next_obs[0]``) evaluated on the last step of every episode's last row: true makes
the episode terminated; false makes an episode that had ended (terminated or truncated) truncated, and leaves
one that had neither as it was. Where agents' spaces differ (format version 2) it sees each agent's own values,
never the storage's padding, and an index past any agent's own width is refused before anything is read.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.data_ops.errors import DataOpError
from offlinerl.data_ops.expr import Expression, parse
from offlinerl.data_ops.summary import check_input, summarise
from offlinerl.data_ops.write import OpResult, check_out, write_output
from offlinerl.episodes import schema as S
from offlinerl.episodes.arrow import batch_slice, from_arrow
from offlinerl.episodes.spaces import flat_size

__all__ = ["RelabelConfig", "relabel_dataset", "resolve_function", "STEP_NAMES"]

#: Names a ``terminal_when`` predicate may use.
STEP_NAMES = ("reward", "action", "obs", "next_obs")


@dataclass(frozen=True, kw_only=True)
class RelabelConfig:
    """What ``relabel`` changes."""

    scale: float = 1.0
    """Multiply every reward by this."""
    shift: float = 0.0
    """Then add this."""
    clip: tuple[float, float] | None = None
    """Then clip to ``[lo, hi]``."""
    return_range: float | None = None
    """Also multiply by ``return_range / (max return - min return)`` of the input's episodes."""
    reward_fn: str | None = None
    """``module:function`` computing the rewards of a row first (command line only; see the module docstring)."""
    terminal_when: str | None = None
    """Step predicate on each episode's last step deciding its terminal flag."""

    def __post_init__(self) -> None:
        for name, value in (("--scale", self.scale), ("--shift", self.shift)):
            if not np.isfinite(value):
                raise DataOpError(f"relabel: {name} must be a finite number, got {value}")
        if self.clip is not None and not (len(self.clip) == 2 and np.isfinite(self.clip).all()
                                          and self.clip[0] <= self.clip[1]):
            raise DataOpError(f"relabel: --clip needs finite LO,HI with LO <= HI, got {self.clip}")
        if self.return_range is not None and not (self.return_range > 0 and np.isfinite(self.return_range)):
            raise DataOpError(f"relabel: --return-range must be a positive finite number, got {self.return_range}")
        if self.return_range is not None and self.reward_fn is not None:
            raise DataOpError("relabel: --return-range scales the input's returns; it cannot follow --reward-fn")
        if (self.scale, self.shift, self.clip, self.return_range, self.reward_fn, self.terminal_when) == (
                1.0, 0.0, None, None, None, None):
            raise DataOpError("relabel: nothing to change; give --scale, --shift, --clip, --return-range, "
                              "--reward-fn or --terminal-when")


def resolve_function(text: str) -> Callable[..., Any]:
    """The function ``module:function`` names (its module is imported). Raises :class:`DataOpError`."""
    module, sep, name = text.partition(":")
    if not sep or not module or not name or not all(p.isidentifier() for p in module.split(".") + name.split(".")):
        raise DataOpError(f"--reward-fn: expected module:function (e.g. mypkg.rewards:dense), got {text!r}")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is one line
        raise DataOpError(f"--reward-fn {text}: cannot import {module!r} ({type(exc).__name__}: {exc})") from None
    for part in name.split("."):
        obj = getattr(obj, part, None)
    if not callable(obj):
        raise DataOpError(f"--reward-fn {text}: {module!r} has no function {name!r}")
    return obj


@dataclass(frozen=True)
class RelabelRows:
    """The per-batch work of ``relabel`` (runs in Ray tasks)."""

    config: RelabelConfig
    factor: float
    fn: Callable[..., Any] | None
    terminal: Expression | None
    last_rows: Mapping[str, frozenset[int]]
    observation_space: gym.Space
    action_space: gym.Space
    agent_spaces: Any = None
    """Agents of different spaces (``episodes.agent_spaces``): ``--reward-fn`` sees each agent's own values."""

    def _own(self, agent: str | None, obs: Any, act: Any) -> tuple[Any, Any]:
        """One row's observations and actions in its agent's own spaces (the storage columns' first values)."""
        if self.agent_spaces is None or agent not in self.agent_spaces:
            return obs, act
        own_obs, own_act = self.agent_spaces[agent]
        obs = obs[:, :own_obs.shape[0]] if isinstance(own_obs, gym.spaces.Box) else obs
        act = act[:, :own_act.shape[0]] if isinstance(own_act, gym.spaces.Box) else act
        return obs, act

    def _rewards(self, table: pa.Table, offsets: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        if self.fn is None:
            return rewards.astype(np.float64)
        obs_col = table.column(S.OBS).combine_chunks()
        obs = from_arrow(obs_col.values.slice(obs_col.offsets[0].as_py(), len(obs_col.values)), self.observation_space)
        act_col = table.column(S.ACTIONS).combine_chunks()
        act = from_arrow(act_col.values.slice(act_col.offsets[0].as_py(), len(act_col.values)), self.action_space)
        out = np.empty(len(rewards), dtype=np.float64)
        ids = table.column(S.EPISODE_ID).to_pylist()
        chunks = table.column(S.CHUNK_INDEX).to_pylist()
        agents = table.column(S.AGENT_ID).to_pylist() if S.AGENT_ID in table.column_names else [None] * len(ids)
        for i in range(table.num_rows):
            a, b = int(offsets[i]), int(offsets[i + 1])
            o = a + i  # obs holds T + 1 per row
            where = f"episode {ids[i]!r} (chunk {chunks[i]})"
            try:
                row_obs, row_act = self._own(agents[i], batch_slice(obs, o, o + b - a + 1), batch_slice(act, a, b))
                new = self.fn(batch_slice(row_obs, 0, b - a), row_act, rewards[a:b].copy(),
                              batch_slice(row_obs, 1, b - a + 1))
                new = np.asarray(new, dtype=np.float64).reshape(-1)
            except Exception as exc:  # noqa: BLE001 - the user's function: one line naming it and the row
                raise DataOpError(f"--reward-fn {self.config.reward_fn}: raised {type(exc).__name__} on {where}: "
                                  f"{exc}") from None
            if new.shape != (b - a,) or not np.isfinite(new).all():
                raise DataOpError(f"--reward-fn {self.config.reward_fn}: returned {new.shape[0]} value(s) for the "
                                  f"{b - a} steps of {where}, or a non-finite one; it must return T finite rewards")
            out[a:b] = new
        return out

    def _flags(self, table: pa.Table, file: str, first_row: int) -> tuple[pa.Array, pa.Array] | None:
        last = self.last_rows.get(file, frozenset())
        picked = [i for i in range(table.num_rows) if first_row + i in last]
        if self.terminal is None or not picked:
            return None
        sub = table.take(pa.array(picked))
        obs_col = sub.column(S.OBS).combine_chunks()
        obs = from_arrow(obs_col.values.slice(obs_col.offsets[0].as_py(), len(obs_col.values)), self.observation_space)
        act_col = sub.column(S.ACTIONS).combine_chunks()
        act = from_arrow(act_col.values.slice(act_col.offsets[0].as_py(), len(act_col.values)), self.action_space)
        o_end = np.cumsum(np.diff(obs_col.offsets.to_numpy()))
        a_end = np.cumsum(np.diff(act_col.offsets.to_numpy()))
        rew_col = sub.column(S.REWARDS).combine_chunks()
        rewards = rew_col.values.to_numpy(zero_copy_only=False)[rew_col.offsets[0].as_py():]
        flat = lambda x: x.reshape(len(x), -1)  # noqa: E731
        values = {"reward": rewards[a_end - 1], "action": flat(np.asarray(act)[a_end - 1]),
                  "obs": flat(np.asarray(obs)[o_end - 2]), "next_obs": flat(np.asarray(obs)[o_end - 1])}
        agents = sub.column(S.AGENT_ID).to_pylist() if S.AGENT_ID in sub.column_names else [None] * len(picked)
        hit = np.zeros(len(picked), dtype=bool)
        for agent in set(agents):  # each agent's steps in its own spaces (version 2: no padding seen)
            rows = np.flatnonzero(np.array([a == agent for a in agents]))
            part = {k: v[rows] for k, v in values.items()}
            part["obs"], part["action"] = self._own(agent, part["obs"], part["action"])
            part["next_obs"] = self._own(agent, part["next_obs"], part["action"])[0]
            part = {k: v[:, 0] if v.ndim == 2 and v.shape[1] == 1 else v for k, v in part.items()}  # one per step
            hit[rows] = np.broadcast_to(self.terminal.evaluate(part).astype(bool), (len(rows),))
        term = np.asarray(table.column(S.TERMINATED).to_pylist(), dtype=bool)
        trunc = np.asarray(table.column(S.TRUNCATED).to_pylist(), dtype=bool)
        for j, i in enumerate(picked):
            ended = term[i] or trunc[i]
            term[i], trunc[i] = bool(hit[j]), bool(not hit[j] and ended)
        return pa.array(term), pa.array(trunc)

    def __call__(self, table: pa.Table, file: str, first_row: int) -> pa.Table:
        col = table.column(S.REWARDS).combine_chunks()
        offsets = col.offsets.to_numpy().astype(np.int64)
        offsets = offsets - offsets[0]
        flat = col.values.slice(col.offsets[0].as_py(), int(offsets[-1])).to_numpy(zero_copy_only=False)
        new = self._rewards(table, offsets, flat.astype(np.float32))
        new = new * (self.config.scale * self.factor) + self.config.shift
        if self.config.clip is not None:
            new = np.clip(new, *self.config.clip)
        rewards = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(new.astype(np.float32)))
        table = table.set_column(table.schema.get_field_index(S.REWARDS), S.REWARDS, rewards)
        flags = self._flags(table, file, first_row)
        if flags is not None:
            table = table.set_column(table.schema.get_field_index(S.TERMINATED), S.TERMINATED, flags[0])
            table = table.set_column(table.schema.get_field_index(S.TRUNCATED), S.TRUNCATED, flags[1])
        return table


def _one_step(obs_width: int, act_width: int) -> dict[str, np.ndarray]:
    """Zeros for one step in the shapes ``RelabelRows._flags`` gives a ``--terminal-when`` predicate."""
    vector = lambda width: np.zeros((1, width) if width > 1 else 1, dtype=np.float32)  # noqa: E731
    return {"reward": np.zeros(1, dtype=np.float32), "action": vector(act_width), "obs": vector(obs_width),
            "next_obs": vector(obs_width)}


def _last_rows(summary) -> dict[str, frozenset[int]]:
    """file -> rows that are the last chunk of their (episode, agent)."""
    rows = summary.rows
    key = np.array([f"{i}\x00{a}" for i, a in zip(rows["id"], rows["agent"])], dtype=object)
    order = np.lexsort((rows["chunk"], key))
    is_last = np.ones(len(order), dtype=bool)
    is_last[:-1] = key[order][1:] != key[order][:-1]
    out: dict[str, set[int]] = {}
    for r in order[is_last]:
        out.setdefault(rows["file"][r], set()).add(int(rows["row"][r]))
    return {f: frozenset(v) for f, v in out.items()}


def relabel_dataset(path: str | Path, out: str | Path, config: RelabelConfig, *, overwrite: bool = False,
                    reward_fn: Callable[..., Any] | None = None) -> OpResult:
    """Write ``path`` with relabelled rewards and flags to ``out``. ``reward_fn``: the function itself (from
    Python), else the one ``config.reward_fn`` names is imported."""
    path = Path(path)
    check_out(out, overwrite, [path])
    info = check_input(path)
    fn = reward_fn if reward_fn is not None else (resolve_function(config.reward_fn) if config.reward_fn else None)
    terminal = None
    if config.terminal_when is not None:
        if not all(isinstance(s, (gym.spaces.Box, gym.spaces.Discrete))
                   for s in (info.observation_space, info.action_space)):
            raise DataOpError("relabel: --terminal-when needs Box or Discrete observation and action spaces")
        terminal = parse(config.terminal_when, names=STEP_NAMES, what="--terminal-when", predicate=True)
        for agent, (obs_space, act_space) in (info.agent_spaces or {None: (info.observation_space,
                                                                           info.action_space)}).items():
            obs_width, act_width = flat_size(obs_space), flat_size(act_space)
            try:
                terminal.check_widths({"obs": obs_width, "next_obs": obs_width, "action": act_width, "reward": 1})
                terminal.evaluate(_one_step(obs_width, act_width))  # a type error here, not in a Ray task
            except DataOpError as exc:
                raise DataOpError(f"--terminal-when: agent {agent!r}: {exc}" if agent is not None else str(exc)) from None
    summary = summarise(path, desc="relabel", info=info)
    episodes = summary.episodes()
    factor = 1.0
    if config.return_range is not None:
        spread = float(episodes.returns.max() - episodes.returns.min()) if len(episodes) else 0.0
        if not spread > 0:
            raise DataOpError(f"relabel: --return-range: every episode of {path} has the same return")
        factor = config.return_range / spread
    transform = RelabelRows(config=config, factor=factor, fn=fn, terminal=terminal,
                            last_rows=_last_rows(summary) if terminal is not None else {},
                            observation_space=info.observation_space, action_space=info.action_space,
                            agent_spaces=info.agent_spaces)
    params = {k: v for k, v in vars(config).items() if v is not None}
    report = {"episodes": len(episodes), "steps": episodes.num_steps, "reward_factor": factor * config.scale,
              "terminated_before": int(episodes.terminated.sum())}
    return write_output([(summary, transform)], out, operation="relabel", parameters=params, report=report,
                        overwrite=overwrite)
