"""``dataset.json``: the metadata every episode dataset directory carries."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gymnasium as gym

from offlinerl.episodes.agent_spaces import agent_spaces_from_json, agent_spaces_json, check_fits_storage
from offlinerl.episodes.fingerprint import is_fingerprint
from offlinerl.episodes.schema import FORMAT_VERSION
from offlinerl.episodes.spaces import space_from_json, space_to_json
from offlinerl.config_io import NestingError, plain_json

__all__ = ["AGENT_SPACES_VERSION", "DatasetInfo", "DatasetInfoError", "INFO_FILE", "MAX_INFO_BYTES", "read_info", "recorded_env_kwargs", "SUPPORTED_VERSIONS"]

INFO_FILE = "dataset.json"
#: Largest ``dataset.json`` read (16 MiB; ours are a few KiB, Dict spaces included).
MAX_INFO_BYTES = 16 * 1024 * 1024
SUPPORTED_VERSIONS = (1, 2)
#: The format version of a dataset whose agents act in different spaces (``episodes.agent_spaces``).
AGENT_SPACES_VERSION = 2


class DatasetInfoError(ValueError):
    """``dataset.json`` is missing, does not parse, or has invalid content."""


@dataclass
class DatasetInfo:
    """Contents of ``dataset.json``."""

    observation_space: gym.Space
    """Space of one observation (all T+1 of each row); with ``agent_spaces``, the storage space of every agent's."""
    action_space: gym.Space
    """Space of one action, as stored in the data; with ``agent_spaces``, the storage space of every agent's."""
    num_episodes: int = 0
    """Number of distinct episodes (chunks of one episode count once)."""
    num_steps: int = 0
    """Total number of transitions (sum of T over rows)."""
    num_rows: int = 0
    """Number of parquet rows (episodes plus extra chunks)."""
    module_ids: list[str] | None = None
    """Sorted modules the rows train (per row ``module_id``, else ``agent_id``, else ``default_policy``), so a
    job knows them without reading the data; None: not recorded (datasets written before it)."""
    env_id: str | None = None
    """Gymnasium id of the environment the data came from, if known."""
    env_spec: dict[str, Any] | None = None
    """Gymnasium ``EnvSpec`` as JSON (kwargs, max_episode_steps), if known."""
    extra_columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Optional per-step columns: name -> {"dtype": numpy dtype | "json" | "string", "shape": [...]}."""
    max_steps_per_row: int | None = None
    """Longest chunk the writer allowed; longer episodes were split."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the data came from: converter or collector, sources, counts, notes."""
    fingerprint: str | None = None
    """Content fingerprint of the rows (``offlinerl.episodes.fingerprint``: stable across re-writes and file
    splits, changed by any value); None: not recorded (datasets written before it)."""
    lineage: list[dict[str, Any]] = field(default_factory=list)
    """The steps that made the dataset, oldest first: operation, parameters, parent fingerprints, tool."""
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    """UTC creation time, ISO 8601."""
    format_version: int = FORMAT_VERSION
    """Episode format version (2 with ``agent_spaces``)."""
    agent_spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None
    """Agents of different spaces (``episodes.agent_spaces``): each agent's own ``(observation, action)`` spaces,
    its rows' values the first of the storage columns; None when every row is in the two spaces above."""

    def __post_init__(self) -> None:
        if self.agent_spaces is not None:
            self.format_version = max(self.format_version, AGENT_SPACES_VERSION)

    def spaces_of(self, agent_id: str | None) -> tuple[gym.Space, gym.Space]:
        """The ``(observation, action)`` spaces of ``agent_id``'s rows."""
        if self.agent_spaces is None:
            return self.observation_space, self.action_space
        if agent_id not in self.agent_spaces:
            raise DatasetInfoError(f"agent {agent_id!r} has no entry in agent_spaces ({', '.join(self.agent_spaces)})")
        return self.agent_spaces[agent_id]

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The ``gymnasium.make`` keyword arguments of the recorded task: the env spec's ``kwargs`` (e.g. a
        maze map and a fixed goal) and its ``max_episode_steps``; empty if no spec of ``env_id`` was recorded."""
        return recorded_env_kwargs(self.env_id, self.env_spec)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "offlinerl-episodes",
            "format_version": self.format_version,
            "created_at": self.created_at,
            "env_id": self.env_id,
            "env_spec": self.env_spec,
            "observation_space": space_to_json(self.observation_space),
            "action_space": space_to_json(self.action_space),
            "num_episodes": self.num_episodes,
            "num_steps": self.num_steps,
            "num_rows": self.num_rows,
            "module_ids": self.module_ids,
            "max_steps_per_row": self.max_steps_per_row,
            "extra_columns": self.extra_columns,
            "provenance": self.provenance,
            "fingerprint": self.fingerprint,
            "lineage": self.lineage,
            **({} if self.agent_spaces is None else {"agent_spaces": agent_spaces_json(self.agent_spaces)}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = INFO_FILE) -> "DatasetInfo":
        if not isinstance(data, dict):
            raise DatasetInfoError(f"{source}: expected a JSON object, got {type(data).__name__}")
        version = data.get("format_version")
        if version not in SUPPORTED_VERSIONS:
            raise DatasetInfoError(
                f"{source}: unknown format_version {version!r} (this offlinerl reads {list(SUPPORTED_VERSIONS)})"
            )
        for key in ("observation_space", "action_space"):
            if key not in data:
                raise DatasetInfoError(f"{source}: missing key {key!r}")
        try:
            obs_space = space_from_json(data["observation_space"])
            act_space = space_from_json(data["action_space"])
        except ValueError as exc:
            raise DatasetInfoError(f"{source}: {exc}") from exc
        try:
            agent_spaces = agent_spaces_from_json(data.get("agent_spaces"), source)
            if agent_spaces is not None:
                check_fits_storage(agent_spaces, obs_space, act_space, source)
        except ValueError as exc:
            raise DatasetInfoError(str(exc)) from None
        if (version >= AGENT_SPACES_VERSION) != (agent_spaces is not None):
            raise DatasetInfoError(f"{source}: format_version {version} "
                                   f"{'needs' if version >= AGENT_SPACES_VERSION else 'has no'} agent_spaces")
        counts = {}
        for key in ("num_episodes", "num_steps", "num_rows"):
            value = data.get(key, 0)
            if not isinstance(value, int) or value < 0:
                raise DatasetInfoError(f"{source}: {key} must be a non-negative integer, got {value!r}")
            counts[key] = value
        module_ids = data.get("module_ids")
        if module_ids is not None and not (isinstance(module_ids, list) and all(isinstance(m, str) for m in module_ids)):
            raise DatasetInfoError(f"{source}: module_ids must be a list of strings (or null), got {module_ids!r}")
        fingerprint = data.get("fingerprint")
        if fingerprint is not None and not is_fingerprint(fingerprint):
            raise DatasetInfoError(f"{source}: fingerprint must be 64 hex digits (or null), got {fingerprint!r}")
        lineage = data.get("lineage") or []
        if not (isinstance(lineage, list) and all(isinstance(e, dict) for e in lineage)):
            raise DatasetInfoError(f"{source}: lineage must be a list of objects, got {type(lineage).__name__}")
        return cls(
            fingerprint=fingerprint,
            lineage=[dict(e) for e in lineage],
            observation_space=obs_space,
            action_space=act_space,
            module_ids=None if module_ids is None else sorted(module_ids),
            env_id=data.get("env_id"),
            env_spec=data.get("env_spec"),
            extra_columns=dict(data.get("extra_columns") or {}),
            max_steps_per_row=data.get("max_steps_per_row"),
            provenance=dict(data.get("provenance") or {}),
            created_at=data.get("created_at", ""),
            format_version=version,
            agent_spaces=agent_spaces,
            **counts,
        )

    def write(self, directory: str | Path) -> Path:
        path = Path(directory) / INFO_FILE
        path.write_text(json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n")
        return path


def recorded_env_kwargs(env_id: str | None, env_spec: Any) -> dict[str, Any]:
    """``gymnasium.make`` keyword arguments that rebuild the task an env spec (gymnasium's ``EnvSpec`` JSON, as
    converters, Minari and ``collect`` record it) describes for ``env_id``: its ``kwargs`` plus its
    ``max_episode_steps``. Empty when there is no spec, or it is of another env (a ``module:`` prefix of
    ``env_id`` is ignored in the comparison)."""
    if not env_id or not isinstance(env_spec, dict) or not isinstance(env_spec.get("id"), str):
        return {}
    if env_spec["id"] not in (env_id, env_id.split(":", 1)[-1]):
        return {}
    kwargs = env_spec.get("kwargs")
    out = dict(kwargs) if isinstance(kwargs, dict) else {}
    steps = env_spec.get("max_episode_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        out["max_episode_steps"] = steps
    return out


def read_info(directory: str | Path) -> DatasetInfo:
    """Read and check ``DIRECTORY/dataset.json``; raises :class:`DatasetInfoError`."""
    path = Path(directory) / INFO_FILE
    if not Path(directory).is_dir():
        raise DatasetInfoError(f"{directory}: not a dataset directory")
    if not path.is_file():
        raise DatasetInfoError(f"{path}: missing (every dataset directory needs a {INFO_FILE})")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_INFO_BYTES + 1)
        if len(raw) > MAX_INFO_BYTES:
            raise DatasetInfoError(f"{path}: larger than {MAX_INFO_BYTES:,} bytes; a {INFO_FILE} holds the spaces "
                                   "and counts of a dataset (a few KiB), so this is not one")
        data = plain_json(raw.decode("utf-8"))
    except NestingError as exc:
        raise DatasetInfoError(f"{path}: not dataset metadata: {exc}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetInfoError(f"{path}: does not parse as JSON: {exc}") from exc
    return DatasetInfo.from_json(data, source=str(path))
