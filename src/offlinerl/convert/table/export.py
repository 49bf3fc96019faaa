"""Write an episode dataset out as a step table, with the spec that converts it back.

One row per observation: an episode of T steps gives T+1 rows (``episode``,
``agent`` when the episodes carry an ``agent_id``, ``t``, one ``obs_i``
column per flattened observation value, ``action`` (or ``action_i``),
``reward``, ``terminated``, ``truncated`` and ``action_logp`` when the
dataset has it). The last row holds the final observation: its
action, reward and flag cells are empty. Observations and actions must be Box
or Discrete. Floats are written with Python's shortest round-tripping
``repr``, so a CSV table converts back to the same values.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.info import read_info, recorded_env_kwargs
from offlinerl.episodes.io import load_episodes
from offlinerl.episodes.spaces import space_to_json

__all__ = ["write_step_table"]


def _width(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return 1
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise ValueError(f"write_step_table: only Box and Discrete spaces, not {space}")


def write_step_table(dataset: str | Path, path: str | Path, fmt: str = "csv") -> Path:
    """Write ``dataset`` as ``path`` (``csv``, ``parquet`` or ``jsonl``) and ``path.spec.yaml``; return the spec path.

    Meant for small datasets (loaded in memory) and for checking a spec by round trip.
    """
    if fmt not in ("csv", "parquet", "jsonl"):
        raise ValueError(f"write_step_table: format must be csv, parquet or jsonl, not {fmt!r}")
    info = read_info(dataset)
    obs_w, act_w = _width(info.observation_space), _width(info.action_space)
    has_logp = "action_logp" in (info.extra_columns or {})
    obs_cols = [f"obs_{i}" for i in range(obs_w)]
    act_cols = ["action"] if isinstance(info.action_space, gym.spaces.Discrete) else [f"action_{i}" for i in range(act_w)]
    episodes = load_episodes(dataset)
    if any(ep.module_id is not None for ep in episodes):
        raise ValueError("write_step_table: episodes with a module_id (a table spec maps agents, not modules)")
    agents = any(ep.agent_id is not None for ep in episodes)
    rows: list[dict[str, Any]] = []
    for ep in episodes:  # agents of different spaces: each agent's own values, empty cells after them
        obs = np.asarray(ep.obs).reshape(len(ep.rewards) + 1, -1)
        acts = np.asarray(ep.actions).reshape(len(ep.rewards), -1)
        for t in range(len(ep.rewards) + 1):
            row: dict[str, Any] = {"episode": ep.id, **({"agent": ep.agent_id} if agents else {}),
                                   "t": ep.t_start + t}
            row.update({c: None for c in obs_cols})
            row.update({c: v.item() for c, v in zip(obs_cols, obs[t])})
            last = t == len(ep.rewards)
            row.update({c: None for c in act_cols})
            row.update({c: None if last else v.item() for c, v in zip(act_cols, acts[min(t, len(acts) - 1)])})
            row["reward"] = None if last else float(ep.rewards[t])
            end = t == len(ep.rewards) - 1
            row["terminated"] = None if last else bool(end and ep.terminated)
            row["truncated"] = None if last else bool(end and ep.truncated)
            if has_logp:
                row["action_logp"] = None if last else float(ep.extras["action_logp"][t])
            rows.append(row)
    path = Path(path)
    if fmt == "csv":
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows([{k: ("" if v is None else repr(v) if isinstance(v, float) else v)
                               for k, v in r.items()} for r in rows])
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    spec = {"episode_id": "episode", **({"agent": "agent"} if agents else {}), "step": "t", "observation": obs_cols,
            "action": act_cols[0] if len(act_cols) == 1 else act_cols, "reward": "reward",
            "terminated": {"column": "terminated"}, "truncated": {"column": "truncated"},
            **({"action_logp": "action_logp"} if has_logp else {}),
            **({"observation_space": space_to_json(info.observation_space),
                "action_space": space_to_json(info.action_space)} if info.agent_spaces is None else
               {"agent_spaces": agent_spaces_json(info.agent_spaces)}),
            **({"env": info.env_id} if info.env_id else {}),
            **({"env_kwargs": kwargs} if (kwargs := recorded_env_kwargs(info.env_id, info.env_spec)) else {})}
    spec_path = path.with_name(path.name + ".spec.yaml")
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_path
