"""The episode row schema (format version 1): column names and Arrow types.

One row holds one episode, or one chunk of a long episode. ``obs`` holds T+1
observations (the last is the observation after the final step); every other
per-step column holds T values. See ``docs/episode-format.md``.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.episodes.arrow import value_type

__all__ = [
    "module_id_problem",
    "FORMAT_VERSION",
    "EPISODE_ID",
    "CHUNK_INDEX",
    "T_START",
    "AGENT_ID",
    "MODULE_ID",
    "OBS",
    "ACTIONS",
    "REWARDS",
    "TERMINATED",
    "TRUNCATED",
    "REQUIRED_COLUMNS",
    "BOOKKEEPING_COLUMNS",
    "DEFAULT_MODULE_ID",
    "row_module_id",
    "JSON_DTYPE",
    "episode_schema",
    "extra_value_type",
    "extra_spec_for",
    "extra_spec_from_arrow",
]

FORMAT_VERSION = 1

EPISODE_ID = "episode_id"
CHUNK_INDEX = "chunk_index"
T_START = "t_start"
AGENT_ID = "agent_id"
MODULE_ID = "module_id"
OBS = "obs"
ACTIONS = "actions"
REWARDS = "rewards"
TERMINATED = "terminated"
TRUNCATED = "truncated"

#: Columns every row has, in file order.
REQUIRED_COLUMNS = (
    EPISODE_ID, CHUNK_INDEX, T_START, AGENT_ID, MODULE_ID, OBS, ACTIONS, REWARDS, TERMINATED, TRUNCATED,
)
#: Module of a row that names neither a module nor an agent (a single-agent dataset's rows).
DEFAULT_MODULE_ID = "default_policy"

#: Columns that are not per-step data.
BOOKKEEPING_COLUMNS = (EPISODE_ID, CHUNK_INDEX, T_START, AGENT_ID, MODULE_ID, TERMINATED, TRUNCATED)

#: ``dtype`` of an extra column whose steps are JSON texts (e.g. ``infos``).
JSON_DTYPE = "json"


def extra_value_type(spec: Mapping[str, Any]) -> pa.DataType:
    """Arrow type of one step of an extra column described by ``{"dtype", "shape"}``."""
    if spec["dtype"] in (JSON_DTYPE, "string"):
        return pa.string()
    scalar = pa.from_numpy_dtype(np.dtype(spec["dtype"]))
    shape = tuple(spec.get("shape", ()))
    return pa.list_(scalar, int(np.prod(shape))) if shape else scalar


def extra_spec_for(name: str, values: Any) -> dict[str, Any]:
    """Describe an extra per-step column from one episode's values."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return {"dtype": values.dtype.name, "shape": list(values.shape[1:])}
    if isinstance(values, np.ndarray) and values.dtype.kind in "US":
        return {"dtype": "string", "shape": []}
    if isinstance(values, (list, tuple)) and all(isinstance(v, str) for v in values):
        return {"dtype": "string", "shape": []}
    if isinstance(values, (list, tuple)):
        return {"dtype": JSON_DTYPE, "shape": []}
    raise TypeError(f"extra column {name!r}: cannot store values of type {type(values).__name__}")


def episode_schema(
    observation_space: gym.Space,
    action_space: gym.Space,
    extra_columns: Mapping[str, Mapping[str, Any]] | None = None,
) -> pa.Schema:
    """The Arrow schema of episode rows for the given spaces and extra columns."""
    fields = [
        pa.field(EPISODE_ID, pa.string(), nullable=False),
        pa.field(CHUNK_INDEX, pa.int32(), nullable=False),
        pa.field(T_START, pa.int64(), nullable=False),
        pa.field(AGENT_ID, pa.string()),
        pa.field(MODULE_ID, pa.string()),
        pa.field(OBS, pa.list_(value_type(observation_space)), nullable=False),
        pa.field(ACTIONS, pa.list_(value_type(action_space)), nullable=False),
        pa.field(REWARDS, pa.list_(pa.float32()), nullable=False),
        pa.field(TERMINATED, pa.bool_(), nullable=False),
        pa.field(TRUNCATED, pa.bool_(), nullable=False),
    ]
    for name, spec in (extra_columns or {}).items():
        fields.append(pa.field(name, pa.list_(extra_value_type(spec))))
    return pa.schema(fields)


def extra_spec_from_arrow(step_type: pa.DataType) -> dict[str, Any]:
    """Describe an extra column from the Arrow type of one step (strings are taken as JSON)."""
    if pa.types.is_string(step_type) or pa.types.is_large_string(step_type):
        return {"dtype": JSON_DTYPE, "shape": []}
    if pa.types.is_fixed_size_list(step_type):
        return {"dtype": step_type.value_type.to_pandas_dtype().__name__, "shape": [step_type.list_size]}
    return {"dtype": np.dtype(step_type.to_pandas_dtype()).name, "shape": []}


def module_id_problem(module_id: object) -> str | None:
    """Why ``module_id`` cannot name a module (None if it can): a non-empty string without dots (torch's
    ``ModuleDict`` refuses a dot, and state-dict keys are split on them)."""
    if not isinstance(module_id, str) or not module_id:
        return f"a module id must be a non-empty string, got {module_id!r}"
    if "." in module_id:
        return f"a module id cannot contain '.', got {module_id!r}"
    return None


def row_module_id(module_id: str | None, agent_id: str | None) -> str:
    """The module a row trains: its ``module_id``, else its ``agent_id``, else :data:`DEFAULT_MODULE_ID`."""
    return module_id if module_id is not None else (agent_id if agent_id is not None else DEFAULT_MODULE_ID)
