"""A dataset as whole episodes for OPE: steps in episode order, lengths, initial states, behaviour log-probs; of a
multi-agent dataset, one module's rows at a time (each agent's episode an episode of its own)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from offlinerl.connectors import EpisodeColumns
from offlinerl.core import columns as C
from offlinerl.data.holdout import dataset_episode_ids, holdout_episode_ids, keep_episodes
from offlinerl.data.offline_data import row_module_ids
from offlinerl.episodes import DatasetInfo, parquet_files, read_info
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import module_spaces
from offlinerl.episodes.validate import require_schema, require_valid

__all__ = ["OPEEpisodes", "is_multi_agent", "load_ope_episodes", "ope_episodes", "read_ope_table", "table_module_ids"]


@dataclass(frozen=True)
class OPEEpisodes:
    """Every step of a single-agent dataset (or of one module's rows), grouped into whole episodes (chunks joined in
    order)."""

    info: DatasetInfo
    """The dataset's metadata (spaces, env id)."""
    obs: Any
    """Space batch of all rows' observations (T+1 per row), raw."""
    step_obs: np.ndarray
    """``[S]`` index into ``obs`` of s_t of each step."""
    actions: Any
    """Space batch of ``S`` data actions."""
    rewards: np.ndarray
    """``[S]`` float32."""
    terminateds: np.ndarray
    """``[S]`` bool: the step reached a terminal state (no bootstrap)."""
    episode_lengths: np.ndarray
    """``[E]`` int64 steps per episode; the steps of episode i follow those of episode i − 1."""
    initial_obs: np.ndarray
    """``[E]`` index into ``obs`` of each episode's first observation."""
    action_logp: np.ndarray | None
    """``[S]`` log μ(a_t|s_t) of the behaviour policy, or ``None`` if the dataset does not record it."""

    @property
    def num_episodes(self) -> int:
        return len(self.episode_lengths)


def read_ope_table(path: str | Path, validate: bool = True, holdout: Any = None) -> tuple[DatasetInfo, pa.Table]:
    """A dataset's metadata and rows, (by default) validated first; ``holdout`` (a ``HoldoutConfig``: ``fraction``,
    ``seed``): only the episodes that a job with the same ``data.holdout`` kept out of training."""
    if validate:
        require_valid(path)
    else:
        require_schema(path)
    info = read_info(path)
    table = pa.concat_tables([pq.read_table(f) for f in parquet_files(path)])
    if holdout is not None:
        held = holdout_episode_ids(dataset_episode_ids(path), holdout.fraction, holdout.seed)
        table = keep_episodes(table, held, held_out=True)
    return info, table


def is_multi_agent(table: pa.Table) -> bool:
    """Some row carries an ``agent_id``."""
    return S.AGENT_ID in table.column_names and table.column(S.AGENT_ID).null_count < len(table)


def table_module_ids(table: pa.Table, policy_mapping: Any = None) -> list[str]:
    """The sorted modules of the rows (``module_id``, else ``agent_id``, else ``default_policy``; with a
    checkpoint's ``policy_mapping``, the modules it maps the rows' agents to)."""
    return sorted(set(row_module_ids(table, policy_mapping).tolist()))


def ope_episodes(info: DatasetInfo, table: pa.Table, module_id: str | None = None,
                 policy_mapping: Any = None) -> OPEEpisodes:
    """``table``'s episodes; ``module_id``: only the rows of that module (``module_id``, else ``agent_id``, or as
    ``policy_mapping`` maps the rows' agents), one episode per (``episode_id``, ``agent_id``). Without it a
    multi-agent table is refused."""
    if module_id is not None:
        table = table.filter(pa.array(row_module_ids(table, policy_mapping) == module_id, type=pa.bool_()))
    elif is_multi_agent(table):
        raise ValueError("a multi-agent dataset: evaluate one module at a time (module_id)")
    if info.agent_spaces is not None and module_id is not None:  # agents of different spaces: the module's own
        pairs = [(module_id, a) for a in set(table.column(S.AGENT_ID).to_pylist())]
        (obs_space, act_space), = module_spaces(pairs, info.agent_spaces, info.observation_space, info.action_space,
                                                [module_id]).values()
        info = replace(info, observation_space=obs_space, action_space=act_space, agent_spaces=None)
    agents = is_multi_agent(table)
    keys = [S.EPISODE_ID, *([S.AGENT_ID] if agents else []), S.CHUNK_INDEX]
    table = table.take(pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys]))
    cols = EpisodeColumns.from_arrow(table, info.observation_space, info.action_space, extra_columns=[C.ACTION_LOGP])
    ids = table.column(S.EPISODE_ID).to_numpy(zero_copy_only=False)
    first_row = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, dtype=bool)  # [rows]
    if agents and len(ids):
        aids = np.array(table.column(S.AGENT_ID).to_pylist(), dtype=object)
        first_row[1:] |= aids[1:] != aids[:-1]  # one episode per agent of an env episode
    row_episode = np.cumsum(first_row) - 1
    episode_lengths = np.bincount(row_episode, weights=cols.lengths, minlength=int(first_row.sum())).astype(np.int64)
    row_obs_start = np.cumsum(np.r_[0, cols.lengths[:-1] + 1]).astype(np.int64)  # [rows]
    terminateds = cols.last_step_mask() & np.repeat(cols.terminated, cols.lengths)
    logp = cols.extras.get(C.ACTION_LOGP)
    if logp is not None:
        logp = np.asarray(logp, dtype=np.float64).reshape(cols.num_steps)
    return OPEEpisodes(info=info, obs=cols.obs, step_obs=cols.obs_index(), actions=cols.actions,
                       rewards=cols.rewards, terminateds=terminateds, episode_lengths=episode_lengths,
                       initial_obs=row_obs_start[first_row], action_logp=logp)


def load_ope_episodes(path: str | Path, validate: bool = True, holdout: Any = None,
                      module_id: str | None = None) -> OPEEpisodes:
    """Read (and by default first validate) a dataset's episodes (``read_ope_table``, ``ope_episodes``); a
    multi-agent dataset needs ``module_id``: the module whose rows to read."""
    info, table = read_ope_table(path, validate, holdout)
    try:
        return ope_episodes(info, table, module_id)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
