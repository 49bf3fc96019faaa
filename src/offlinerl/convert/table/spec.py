"""The spec of ``offlinerl convert table``: which column of a step table is what.

A spec is a small YAML (or JSON) file, loaded into a frozen :class:`TableSpec`::

    episode_id: episode              # the column that names the episode
    agent: null                      # optional: the column naming each row's agent (multi-agent logs)
    step: t                          # sort key: an integer step index (gaps and duplicates are checked) ...
    # step: {column: ts, kind: timestamp}   # ... or a timestamp (numbers or ISO-8601 text; duplicates checked)
    observation: [x, x_dot, theta, theta_dot]   # scalar columns in vector order, or one list column: obs,
                                     # or a Dict space: {position: [x, y], velocity: v}
    next_observation: null           # optional (same forms): the observation after this row's action
    action: action                   # one column (scalar or list), or a list of scalar columns
    reward: reward
    terminated: {column: done}       # a bool column, or {rule: last_step} or {rule: none}
    truncated: {rule: none}
    action_logp: logp                # optional behaviour log-prob column ...
    # propensity: p                  # ... or the probability of the action (stored as its log)
    observation_space: null          # optional space JSON (docs/episode-format.md §6); inferred if absent
    action_space: null
    agent_spaces: null               # optional, with agent: {agent id: {observation_space, action_space}} for
                                     # agents of different spaces (else inferred per agent where they differ)
    env: null                        # optional gymnasium env id (its spaces when none are declared)
    env_kwargs: null                 # optional, with env: its make keyword arguments (the recorded task)

The final observation: with ``next_observation`` every row is one transition
and an episode of n rows has n steps (``obs[n]`` = the last row's
``next_observation``). Without it every row is a state and the **last row of
an episode is its final observation**: its action, reward and log-prob cells
are not used (they may be empty), so an episode of n rows has n-1 steps. End
flags are read from the last step row, or from the final row when set there.

With ``agent``, rows are grouped by (episode id, agent id): each agent's rows of
an episode make one episode row with ``agent_id`` set (text; an integer is
written as its decimal digits), and every check above holds per agent. Agents
of different spaces (widths) are written as a version-2 dataset
(``offlinerl.episodes.agent_spaces``): their spaces declared in ``agent_spaces``,
taken from a PettingZoo ``env``, or inferred per agent.

Spec files are plain data: over :data:`MAX_SPEC_BYTES` or with YAML anchors or
aliases they are refused, and an unknown key is an error naming the key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.config_io import MAX_CONFIG_BYTES, ConfigError, load_file
from offlinerl.trusted import env_id_problem

__all__ = ["TableSpec", "Columns", "EndFlag", "load_spec", "spec_from_dict", "MAX_SPEC_BYTES", "LEAF"]

#: Largest spec file read (1 MiB; a spec is a few hundred bytes).
MAX_SPEC_BYTES = MAX_CONFIG_BYTES
#: The leaf name of a value that is not a Dict.
LEAF = ""
_RULES = ("last_step", "none")


@dataclass(frozen=True)
class Columns:
    """Where one value (an observation or an action) is read from."""

    leaves: tuple[tuple[str, tuple[str, ...]], ...]
    """``(key, columns)`` per leaf: key ``""`` for a plain value, the Dict key otherwise; one column holds a
    scalar or a list, several hold scalars in vector order."""

    @property
    def is_dict(self) -> bool:
        """Whether the value is a Dict of leaves."""
        return self.leaves[0][0] != LEAF

    @property
    def columns(self) -> tuple[str, ...]:
        """Every source column used."""
        return tuple(c for _, cols in self.leaves for c in cols)


@dataclass(frozen=True)
class EndFlag:
    """How ``terminated`` or ``truncated`` is known."""

    column: str | None = None
    """A boolean column (true/false, 1/0), or None for a rule."""
    rule: str | None = None
    """``last_step``: the episode ends this way at its last step; ``none``: never."""


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """A step-table spec (module docstring: the file format)."""

    episode_id: str
    """Column naming the episode (text or integer)."""
    agent: str | None = None
    """Column naming each row's agent (text or integer); None: single-agent. With it, an episode is the rows of
    one (episode id, agent id) and its row carries ``agent_id``."""
    step: str
    """Column ordering the steps of an episode."""
    step_kind: str = "index"
    """``index`` (integers; consecutive within an episode) or ``timestamp`` (numbers or ISO-8601; increasing)."""
    observation: Columns
    """Observation columns."""
    next_observation: Columns | None = None
    """Next-observation columns; None: the last row of an episode is its final observation."""
    action: Columns
    """Action columns (no Dict)."""
    reward: str
    """Reward column."""
    terminated: EndFlag
    """Termination: a column or a rule."""
    truncated: EndFlag
    """Truncation: a column or a rule."""
    action_logp: str | None = None
    """Behaviour log-probability column, stored as the extra column ``action_logp``."""
    propensity: str | None = None
    """Behaviour probability column (0 < p <= 1), stored as its log in ``action_logp``."""
    observation_space: dict[str, Any] | None = None
    """Observation space JSON; None: inferred (or the env's)."""
    action_space: dict[str, Any] | None = None
    """Action space JSON; None: inferred (or the env's)."""
    agent_spaces: dict[str, Any] | None = None
    """With ``agent``: each agent's ``{"observation_space", "action_space"}`` JSON, for agents of different spaces
    (instead of ``observation_space`` / ``action_space``); None: one space for every agent, or inferred per agent."""
    env: str | None = None
    """Gymnasium env id; None: the dataset has no env. A spec is a file that may have been handed over, so a
    ``module:Env-v0`` id is refused unless ``module`` is allow-listed (:mod:`offlinerl.trusted`)."""

    env_kwargs: dict[str, Any] | None = None
    """With ``env``: the keyword arguments it is made with and the dataset records (``env_spec``), e.g. MPE's
    ``max_cycles`` or a maze map; None: the env's defaults."""

    def __post_init__(self) -> None:
        if self.env_kwargs is not None and self.env is None:
            raise ConvertUsageError("spec: env_kwargs needs env")
        if self.step_kind not in ("index", "timestamp"):
            raise ConvertUsageError(f"spec: step.kind must be index or timestamp, not {self.step_kind!r}")
        if self.action.is_dict:
            raise ConvertUsageError("spec: action: a Dict of columns is not supported (one column or a list)")
        if self.action_logp and self.propensity:
            raise ConvertUsageError("spec: give action_logp or propensity, not both")
        if self.terminated.rule == "last_step" and self.truncated.rule == "last_step":
            raise ConvertUsageError("spec: terminated and truncated cannot both be {rule: last_step}")
        if self.next_observation is not None and ({k for k, _ in self.next_observation.leaves}
                                                  != {k for k, _ in self.observation.leaves}):
            raise ConvertUsageError("spec: next_observation must have the same form (keys) as observation")
        if self.agent_spaces is not None and (self.agent is None or self.observation_space or self.action_space):
            raise ConvertUsageError("spec: agent_spaces needs agent and replaces observation_space / action_space")
        if self.agent is not None and self.agent in (self.episode_id, self.step):
            raise ConvertUsageError(f"spec: agent: {self.agent!r} is also the "
                                    f"{'episode_id' if self.agent == self.episode_id else 'step'} column")

    @property
    def used_columns(self) -> tuple[str, ...]:
        """Every source column the spec reads."""
        cols = [self.episode_id, *([self.agent] if self.agent else []), self.step, *self.observation.columns,
                *self.action.columns, self.reward]
        cols += self.next_observation.columns if self.next_observation else ()
        cols += [f.column for f in (self.terminated, self.truncated) if f.column]
        cols += [c for c in (self.action_logp, self.propensity) if c]
        return tuple(dict.fromkeys(cols))

    @property
    def logp_column(self) -> str | None:
        """The column that gives ``action_logp`` (log-prob or propensity)."""
        return self.action_logp or self.propensity


_KEYS = {f for f in TableSpec.__dataclass_fields__ if f != "step_kind"}


def _columns(value: Any, key: str) -> Columns:
    def cols(v: Any, where: str) -> tuple[str, ...]:
        if isinstance(v, str) and v:
            return (v,)
        if isinstance(v, list) and v and all(isinstance(c, str) and c for c in v):
            return tuple(v)
        raise ConvertUsageError(f"spec: {where}: expected a column name or a list of column names, got {v!r}")

    if isinstance(value, Mapping):
        if not value:
            raise ConvertUsageError(f"spec: {key}: an empty mapping")
        return Columns(tuple((str(k), cols(v, f"{key}.{k}")) for k, v in value.items()))
    return Columns(((LEAF, cols(value, key)),))


def _flag(value: Any, key: str) -> EndFlag:
    if isinstance(value, str) and value:
        return EndFlag(column=value)
    if isinstance(value, Mapping) and len(value) == 1:
        if isinstance(value.get("column"), str):
            return EndFlag(column=value["column"])
        if value.get("rule") in _RULES:
            return EndFlag(rule=value["rule"])
    raise ConvertUsageError(f"spec: {key}: expected a column name, {{column: NAME}}, {{rule: last_step}} or "
                            f"{{rule: none}}, got {value!r}")


def _text(data: Mapping[str, Any], key: str, required: bool = True) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ConvertUsageError(f"spec: {key}: expected a column name" + (" (required)" if value is None else
                                                                         f", got {value!r}"))
    return value


def spec_from_dict(data: Any) -> TableSpec:
    """Build a :class:`TableSpec` from a mapping; :class:`ConvertUsageError` names the wrong key."""
    if not isinstance(data, Mapping):
        raise ConvertUsageError(f"spec: expected a mapping of keys, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - _KEYS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(_KEYS), n=1)
        raise ConvertUsageError(f"spec: unknown key {unknown[0]!r}" + (f" (did you mean {close[0]!r}?)" if close
                                else "") + f" (known: {', '.join(sorted(_KEYS))})")
    for key in ("observation", "action", "terminated", "truncated"):
        if data.get(key) is None:
            raise ConvertUsageError(f"spec: {key} is required")
    step, kind = data.get("step"), "index"
    if isinstance(step, Mapping):
        extra = sorted(set(step) - {"column", "kind"})
        if extra:
            raise ConvertUsageError(f"spec: step: unknown key {extra[0]!r} (known: column, kind)")
        step, kind = step.get("column"), step.get("kind", "index")
    for key in ("observation_space", "action_space", "agent_spaces", "env_kwargs"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            what = {"agent_spaces": "mapping of agent ids", "env_kwargs": "mapping of keyword arguments"}.get(
                key, "space in JSON form")
            raise ConvertUsageError(f"spec: {key}: expected a {what} (a mapping)")
    return TableSpec(
        episode_id=_text(data, "episode_id"), agent=_text(data, "agent", False),
        step=_text({"step": step}, "step"), step_kind=kind,
        observation=_columns(data["observation"], "observation"),
        next_observation=_columns(data["next_observation"], "next_observation")
        if data.get("next_observation") is not None else None,
        action=_columns(data["action"], "action"), reward=_text(data, "reward"),
        terminated=_flag(data["terminated"], "terminated"), truncated=_flag(data["truncated"], "truncated"),
        action_logp=_text(data, "action_logp", False), propensity=_text(data, "propensity", False),
        observation_space=data.get("observation_space"), action_space=data.get("action_space"),
        agent_spaces=data.get("agent_spaces"), env=_text(data, "env", False), env_kwargs=data.get("env_kwargs"),
    )


def load_spec(path: str | Path) -> TableSpec:
    """Read a spec file (YAML, or JSON for ``.json``); :class:`ConvertUsageError` on any problem."""
    try:
        data = load_file(path, "specs")
    except ConfigError as exc:
        raise ConvertUsageError(f"--spec {exc}") from None
    spec = spec_from_dict(data)
    if spec.env is not None and (problem := env_id_problem(spec.env, f"--spec {path}: env")) is not None:
        raise ConvertUsageError(problem)
    return spec
