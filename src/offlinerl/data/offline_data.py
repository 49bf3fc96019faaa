"""``OfflineData``: an episode dataset turned into train batches with Ray Data.

``read_parquet -> map_batches(episode rows -> transitions via the learner
connectors, vectorised over whole blocks)`` and then one of two modes:

- **in-memory** (the fast path): the transitions are materialised once, the
  observation statistics are fitted on them, and each learner receives its
  shard as contiguous arrays (``InMemorySpec``) sampled uniformly;
- **streaming** (larger than memory): a statistics pass first (if observations
  are normalised: one Ray task per row group, or in this process where the
  sample's files are small, over at most about ``data.stats_max_steps`` steps of
  a fixed sample of files and episodes, so its time does not grow with the
  dataset), then a lazy dataset split per learner with ``streaming_split``, read
  as whole blocks pooled and permuted in each learner (``StreamingSpec``).

A multi-agent dataset (rows with ``agent_id`` / ``module_id``: ``module_ids`` lists several) trains one module
per id (each row's ``module_id``, else its ``agent_id``; with the config's ``policy_mapping``, the module it maps the
row's agent to, ``offlinerl.core.policy_mapping``: the module ids, the module column, the streams and the statistics
are all the mapped ones), each learner drawing ``train_batch_size`` transitions of every module per update: each
module's observation statistics are fitted on its own rows (``env_to_module_pipeline(module_id)``; the connector state
is ``{module_id: state}``); in memory, each module's transitions are held apart and split over the learners;
streaming, each module's rows are a stream of their own (the files are read once per module and the other
modules' rows dropped before they become transitions), split over the learners and pooled as one module's
would be. A stream per module keeps each module's pool to its own shuffle buffer however unequal the modules'
shares, serves every module's transitions uniformly as in-memory mode does, and gives every learner the same
number of each module's transitions per epoch (``streaming_split(equal=True)`` per module), so the learners,
which update in lockstep, also start their epochs together (Ray Data's split waits for every learner there).

Ray Data's parallelism is capped below the cluster's CPU count so the readers
and the learners never starve each other (RLlib's default offline pipeline
deadlocks on 2 CPUs this way).
"""

from __future__ import annotations

import functools
import math
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np
import pyarrow as pa

from offlinerl.config_io import ConfigError
from offlinerl.connectors import (ConnectorPipeline, EpisodeColumns, ObservationConnectors, env_to_module_pipeline,
                                  join_module_states, learner_pipeline, observation_connectors, split_module_states)
from offlinerl.connectors.common import RunningMeanStd
from offlinerl.core import columns as C
from offlinerl.core.flatten import flat_dim
from offlinerl.core.policy_mapping import PolicyMapping, mapped_module_id
from offlinerl.data.errors import reading
from offlinerl.data.holdout import dataset_episode_ids, holdout_episode_ids, keep_episodes
from offlinerl.episodes import parquet_files, read_dataset, read_info
from offlinerl.episodes import schema as S
from offlinerl.episodes.agent_spaces import module_spaces
from offlinerl.episodes.info import DatasetInfo
from offlinerl.episodes.parquet_size import check_parquet_size
from offlinerl.episodes.scan import ScanUnit, iter_unit_batches, plan_units, run_units, small_files

if TYPE_CHECKING:  # not imported by Ray Data's workers, which import this module for its transforms
    from offlinerl.data.config import OfflineDataConfig

__all__ = ["OfflineData", "data_mode", "estimated_bytes", "episodes_to_transitions", "sample_episodes", "MODULE_COLUMN", "row_module_ids"]

_EPISODE_COLUMNS = [S.EPISODE_ID, S.OBS, S.ACTIONS, S.REWARDS, S.TERMINATED, S.TRUNCATED]
#: Per-step column naming the module that learns from a transition (multi-agent datasets only).
MODULE_COLUMN = "_module_id"
#: Fewest files the streaming statistics sample reads (all, if fewer): files often differ systematically
#: (one recording day or behaviour policy each), so a sample from a handful of files could be biased.
STATS_MIN_FILES = 16


def row_module_ids(table: pa.Table, policy_mapping: PolicyMapping | None = None) -> np.ndarray:
    """Module of each row (``schema.row_module_id``: ``module_id``, else ``agent_id``, else the default module; with
    a ``policy_mapping``, the module it maps the row's agent to: ``policy_mapping.mapped_module_id``)."""
    n = table.num_rows
    mids = table.column(S.MODULE_ID).to_pylist() if S.MODULE_ID in table.column_names else [None] * n
    aids = table.column(S.AGENT_ID).to_pylist() if S.AGENT_ID in table.column_names else [None] * n
    return np.array([mapped_module_id(policy_mapping, m, a) for m, a in zip(mids, aids)], dtype=object)


def sample_episodes(table: pa.Table, fraction: float) -> pa.Table:
    """The rows of about ``fraction`` of the episodes, chosen by a hash of ``(episode_id, agent_id)``: the same
    rows whatever the blocks or the files' order, and every chunk of a chosen episode."""
    ids = table.column(S.EPISODE_ID).to_pylist()
    agents = table.column(S.AGENT_ID).to_pylist() if S.AGENT_ID in table.column_names else [None] * len(ids)
    limit = fraction * 2**32
    keep = [zlib.crc32(f"{e}\0{a}".encode()) < limit for e, a in zip(ids, agents)]
    return table.filter(pa.array(keep, type=pa.bool_()))


def episodes_to_transitions(table: pa.Table, pipeline: ConnectorPipeline, observation_space, action_space,
                            extra_columns: tuple[str, ...] = (), with_module_ids: bool = False,
                            drop_episodes: np.ndarray | None = None, module_id: str | None = None,
                            policy_mapping: PolicyMapping | None = None) -> dict[str, np.ndarray]:
    """The ``map_batches`` function: a block of episode rows -> a dict of transition columns (without the rows of
    ``drop_episodes``, the held-out episode ids; with ``module_id``, of the rows of that module only; rows are
    assigned to modules by ``row_module_ids`` with ``policy_mapping``)."""
    if drop_episodes is not None:
        table = keep_episodes(table, drop_episodes, held_out=False)
    if module_id is not None:
        table = table.filter(pa.array(row_module_ids(table, policy_mapping) == module_id, type=pa.bool_()))
    episodes = EpisodeColumns.from_arrow(table, observation_space, action_space, extra_columns)
    batch = pipeline({}, episodes)
    if with_module_ids:
        batch[MODULE_COLUMN] = np.repeat(row_module_ids(table, policy_mapping), episodes.lengths).astype(str)
    return batch


def transitions_block(table: pa.Table, **kwargs: Any) -> pa.Table:
    """Ray Data's ``map_batches`` function: :func:`episodes_to_transitions` as an Arrow table Ray Data keeps as it
    is. Handed a dict of arrays, Ray Data infers each 1-D column's Arrow type with ``pyarrow.infer_type``, which
    walks every value in Python: 70% of a streaming job's map task (BC, Pendulum). Here 1-D columns become Arrow
    arrays of their own dtype and wider ones Ray Data's tensor columns, the types its own conversion picks."""
    from ray.data.extensions import ArrowTensorArray

    batch = episodes_to_transitions(table, **kwargs)
    return pa.table({k: ArrowTensorArray.from_numpy(v) if v.ndim > 1 else pa.array(v) for k, v in batch.items()})


def _unit_obs_moments(unit: ScanUnit, *, columns: list[str], drop_episodes: np.ndarray | None, fraction: float,
                      **transitions_kwargs: Any) -> dict[str, Any]:
    """Count, mean and variance of the (flattened, unnormalised) observations of the transitions of one row group
    (without the ``drop_episodes``; of about ``fraction`` of its episodes, see ``sample_episodes``), per module:
    ``{"modules": {module_id: moments}}``, the id ``""`` where the transitions name no module (one module)."""
    moments: dict[str, RunningMeanStd] = {}
    for _, batch in iter_unit_batches(unit, columns):
        table = pa.Table.from_batches([batch])
        if drop_episodes is not None:
            table = keep_episodes(table, drop_episodes, held_out=False)
        if fraction < 1.0:
            table = sample_episodes(table, fraction)
        if table.num_rows:
            transitions = episodes_to_transitions(table, **transitions_kwargs)
            mids = transitions.get(MODULE_COLUMN)
            for mid in [""] if mids is None else np.unique(mids).tolist():
                obs = transitions[C.OBS] if mids is None else transitions[C.OBS][mids == mid]
                moments.setdefault(mid, RunningMeanStd()).update(obs)
    return {"modules": {mid: m.get_state() for mid, m in moments.items()}}


def estimated_bytes(info: DatasetInfo) -> int:
    """Rough size in memory of a dataset's transitions (obs, next obs, actions, scalars), from ``dataset.json``."""
    obs = flat_dim(info.observation_space) * 4
    act = getattr(info.action_space, "shape", ()) or (1,)
    return int(info.num_steps * (2 * obs + int(np.prod(act)) * 8 + 5 * 4))


def data_mode(config: OfflineDataConfig, info: DatasetInfo) -> str:
    """``in_memory`` or ``streaming``: ``data.mode``, or for ``auto`` whether the transitions fit in
    ``data.in_memory_max_bytes`` (:func:`estimated_bytes`)."""
    mode = config.data.mode
    if mode == "auto":
        return "in_memory" if estimated_bytes(info) <= config.data.in_memory_max_bytes else "streaming"
    return mode


class OfflineData:
    """The dataset at ``path`` prepared for the learners of one algorithm config (one module per id of
    ``module_ids``; see the module docstring for several).

    ``use_ray=False`` (in-memory mode only): the transitions are read in this process with pyarrow, file by file in
    the order Ray Data reads them, through the same ``episodes_to_transitions``: the same arrays, without Ray
    (``offlinerl.training.setup.ray_reason`` says when a job needs Ray).
    """

    def __init__(self, path: str | Path, config: OfflineDataConfig, extra_columns: tuple[str, ...] = (), *,
                 use_ray: bool = True) -> None:
        self.path = str(Path(path))
        self.use_ray = use_ray
        self.info = read_info(path)
        self.config = config
        self.observation_space = self.info.observation_space
        self.action_space = self.info.action_space
        self.extra_columns = tuple(extra_columns)
        self.module_ids, pairs = self._find_module_ids()
        for mid in self.module_ids:  # torch would refuse it deep in the learner build (a KeyError)
            if (problem := S.module_id_problem(mid)) is not None:
                raise ConfigError(f"{self.path}: its rows train the module {mid!r} (their module_id, else agent_id), "
                                  f"and {problem}; map the agents to valid module ids with policy_mapping")
        self.module_spaces: dict[str, tuple[Any, Any]] = module_spaces(
            pairs, self.info.agent_spaces, self.observation_space, self.action_space, self.module_ids)
        """Each module's ``(observation space, action space)``: the dataset's, or with agents of different spaces
        (``episodes.agent_spaces``) those of the agents the module acts for."""
        # Each module's observation connectors (and fitted statistics, on that module's rows), shared by its
        # learner pipeline and copied into its every env-to-module pipeline; building the learner pipelines
        # checks the config early.
        self.module_observations: dict[str, ObservationConnectors] = {
            mid: observation_connectors(self.module_spaces[mid][0], config.normalize_observations)
            for mid in self.module_ids}
        self._learners = {mid: learner_pipeline(obs, self.module_spaces[mid][1], config)
                          for mid, obs in self.module_observations.items()}
        # Episode ids kept out of training (data.holdout), sorted; None = train on every episode.
        holdout = config.data.holdout
        with reading(self.path):
            self.holdout_ids = (None if holdout is None else
                                holdout_episode_ids(dataset_episode_ids(self.path), holdout.fraction, holdout.seed))
        self.mode = self._choose_mode()
        if not use_ray and self.mode != "in_memory":
            raise ValueError(f"{self.path}: {self.mode} data is read by Ray Data; use_ray=False needs data.mode=in_memory")
        self._arrays: dict[str, np.ndarray] | None = None
        self._module_arrays: dict[str, dict[str, np.ndarray]] | None = None

    def _find_module_ids(self) -> tuple[list[str], list[tuple[str, str | None]]]:
        """The modules the rows train, sorted, and the ``(module, agent)`` pairs of the rows where the agents'
        spaces differ (else none). A ``policy_mapping`` of one module id: that module; else, without a
        mapping, from ``dataset.json`` (written since it records them: the driver reads no data file). A dataset
        written before, a mapping of patterns (applied to agent ids, which ``dataset.json`` does not list), or agents
        of different spaces have the id columns (one value per row) read here; an agent no pattern matches is an
        ``UnmappedAgentError``."""
        mapping = self.config.policy_mapping
        if self.info.agent_spaces is None:
            if isinstance(mapping, str):
                return [mapping], []
            if mapping is None and self.info.module_ids:
                return list(self.info.module_ids), []
        import pyarrow.parquet as pq

        from offlinerl.episodes import parquet_files

        pairs: set[tuple[str | None, str | None]] = set()  # (module_id, agent_id) of the rows
        with reading(self.path):
            for f in parquet_files(self.path):
                t = pq.read_table(f, columns=[S.MODULE_ID, S.AGENT_ID])
                pairs.update(zip(t.column(S.MODULE_ID).to_pylist(), t.column(S.AGENT_ID).to_pylist()))
        mapped = sorted({(mapped_module_id(mapping, m, a), a) for m, a in pairs}, key=str)
        return sorted({m for m, _ in mapped}) or [C.DEFAULT_MODULE_ID], mapped

    @property
    def multi_module(self) -> bool:
        return len(self.module_ids) > 1

    # -- connectors ------------------------------------------------------------------------------
    def _module(self, module_id: str | None) -> str:
        """``module_id``, checked; None: the dataset's only module (``ValueError`` when it trains several)."""
        if module_id is None:
            if self.multi_module:
                raise ValueError(f"{self.path} trains the modules {self.module_ids}; name one (module_id)")
            return self.module_ids[0]
        if module_id not in self.module_observations:
            raise ValueError(f"{self.path}: no module {module_id!r}; the dataset trains {self.module_ids}")
        return module_id

    def learner_pipeline(self, normalize: bool = True, module_id: str | None = None) -> ConnectorPipeline:
        """Episode rows -> train batch of module ``module_id`` (None: the only module); ``normalize=False``: before
        the statistics, to fit them (the same for every module)."""
        if normalize:
            return self._learners[self._module(module_id)]
        mid = self.module_ids[0] if module_id is None else self._module(module_id)
        return learner_pipeline(self.module_observations[mid], self.module_spaces[mid][1], self.config, normalize=False)

    def env_to_module_pipeline(self, module_id: str | None = None) -> ConnectorPipeline:
        """Env observations -> inputs of module ``module_id`` (None: the only module): a copy of its learner side's
        connectors and fitted state."""
        mid = self._module(module_id)
        state = self.module_observations[mid].get_state()
        return env_to_module_pipeline(self.module_spaces[mid][0], self.config.normalize_observations, state)

    def spaces_of(self, module_id: str | None = None) -> tuple[Any, Any]:
        """Module ``module_id``'s ``(observation space, action space)`` (None: the only module's)."""
        return self.module_spaces[self._module(module_id)]

    @property
    def agent_spaces_differ(self) -> bool:
        """The dataset's agents act in different spaces (``episodes.agent_spaces``): each module's transitions are
        made apart, in its own spaces."""
        return self.info.agent_spaces is not None

    def connector_state(self) -> dict[str, Any]:
        """The fitted state (what checkpoints save): ``get_state()`` of the observation connectors; with several
        modules ``{module_id: state}`` (``connectors.join_module_states``)."""
        return join_module_states({mid: obs.get_state() for mid, obs in self.module_observations.items()})

    def set_connector_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``connector_state()`` (several modules: ``connectors.split_module_states``, which also takes
        one state for every module, as multi-module checkpoints were written before statistics were per module)."""
        for mid, s in split_module_states(state, self.module_ids).items():
            self.module_observations[mid].set_state(s)

    def normalizer_of(self, module_id: str | None = None) -> Any:
        """Module ``module_id``'s observation statistics' connector (None: the only module's; ``None`` when the job
        does not normalise)."""
        return self.module_observations[self._module(module_id)].normalize

    @property
    def normalizer(self) -> Any:
        """The observation statistics' connector of the only module (``None`` when the job does not normalise)."""
        return self.normalizer_of()

    @property
    def normalizer_fitted(self) -> bool:
        """The job normalises and every module's statistics are fitted."""
        return self.config.normalize_observations and all(obs.fitted for obs in self.module_observations.values())

    def _unfitted(self) -> dict[str, Any]:
        """The statistics still to fit, by module (none when the job does not normalise)."""
        return {mid: obs.normalize for mid, obs in self.module_observations.items()
                if obs.normalize is not None and not obs.normalize.fitted}

    # -- mode ------------------------------------------------------------------------------------
    def estimated_bytes(self) -> int:
        """Rough size of the transitions in memory (:func:`estimated_bytes`)."""
        return estimated_bytes(self.info)

    def _choose_mode(self) -> str:
        return data_mode(self.config, self.info)

    # -- Ray Data ----------------------------------------------------------------------------------
    def _concurrency(self) -> int:
        if self.config.data.map_concurrency:
            return int(self.config.data.map_concurrency)
        import ray

        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, cpus - 1)

    def transitions(self, normalize: bool = True, preserve_order: bool = False, shuffle_files: bool = False,
                    block_bytes: int | None = None, module_id: str | None = None):
        """The lazy Ray Dataset of transitions (one row per step); ``block_bytes``: in blocks of about this many
        bytes of transitions (else Ray Data's default: at least 200 blocks, whole files once there are more
        files than that). ``module_id``: the transitions of that module only (normalised with its statistics),
        without the module column, with a share of the map tasks (a stream per module)."""
        import ray.data

        kwargs: dict[str, Any] = {"shuffle": "files"} if shuffle_files else {}
        if block_bytes:
            blocks = max(len(parquet_files(self.path)), math.ceil(self.estimated_bytes() / block_bytes))
            # A block holds at least one row, and a row at least one step: num_steps bounds the blocks where a
            # dataset.json predates the row count (0 for both: no cap).
            rows = self.info.num_rows or self.info.num_steps
            kwargs["override_num_blocks"] = min(blocks, rows) if rows else blocks
        ds = read_dataset(self.path, columns=self._read_columns(), **kwargs)
        if preserve_order:
            ds.context.execution_options.preserve_order = True
        concurrency = self._concurrency() if module_id is None else max(1, self._concurrency() // len(self.module_ids))
        return ds.map_batches(
            transitions_block,
            batch_format="pyarrow",
            batch_size=None,
            zero_copy_batch=True,
            fn_kwargs=self._transition_kwargs(normalize, module_id),
            compute=ray.data.TaskPoolStrategy(size=concurrency),
        )

    def _read_columns(self) -> list[str]:
        """The episode columns the transitions are made from (both reads: Ray Data's and the local one)."""
        ids = [S.AGENT_ID, S.MODULE_ID] if self.multi_module else []
        return _EPISODE_COLUMNS + ids + list(self.extra_columns)

    def _transition_kwargs(self, normalize: bool, module_id: str | None = None) -> dict[str, Any]:
        """``episodes_to_transitions``' arguments besides the table (both reads; ``module_id``: one module's)."""
        obs_space, act_space = (self.observation_space, self.action_space) if module_id is None \
            else self.module_spaces[module_id]
        kwargs = {"pipeline": self.learner_pipeline(normalize=normalize, module_id=module_id),
                  "observation_space": obs_space, "action_space": act_space,
                  "extra_columns": self.extra_columns, "with_module_ids": self.multi_module and module_id is None,
                  "drop_episodes": self.holdout_ids}
        if self.config.policy_mapping is not None:
            kwargs["policy_mapping"] = self.config.policy_mapping
        if module_id is not None:
            kwargs["module_id"] = module_id
        return kwargs

    def _read_arrays(self, module_id: str | None = None) -> dict[str, np.ndarray]:
        """Every transition (of module ``module_id``), unnormalised, as contiguous arrays, in order."""
        parts: dict[str, list[np.ndarray]] = {}
        with reading(self.path):
            batches = (self.transitions(normalize=False, preserve_order=True, module_id=module_id)
                       .iter_batches(batch_size=None, batch_format="numpy")
                       if self.use_ray else self._local_transitions(module_id))
            for batch in batches:
                for k, v in batch.items():
                    parts.setdefault(k, []).append(v)
        if not parts:
            raise ValueError(f"{self.path}: the dataset has no transitions"
                             + ("" if module_id is None else f" of module {module_id!r}"))
        return {k: np.ascontiguousarray(np.concatenate(v)) for k, v in parts.items()}

    def load_module_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """In-memory mode, several modules: each module's transitions (normalised with its own statistics), in
        order. Agents of different spaces: each module's are made apart, in its spaces (computed once)."""
        if not self.agent_spaces_differ:
            arrays = self.load_arrays()
            mids = arrays[MODULE_COLUMN]
            return {m: {k: v[mids == m] for k, v in arrays.items() if k != MODULE_COLUMN} for m in self.module_ids}
        if self._module_arrays is None:
            unfitted = self._unfitted()
            out = {}
            for mid in self.module_ids:
                arrays = self._read_arrays(mid)
                out[mid] = self._fit_and_normalize(mid, arrays, unfitted) if self.config.normalize_observations \
                    else arrays
            self._module_arrays = out
        return self._module_arrays

    def load_arrays(self) -> dict[str, np.ndarray]:
        """In-memory mode: every transition, normalised, as contiguous arrays (computed once, in order); several
        modules: with the module column (agents of different spaces: ``load_module_arrays`` only)."""
        if self.agent_spaces_differ:
            raise ValueError(f"{self.path}: its agents act in different spaces, so their transitions do not share "
                             "arrays; use load_module_arrays()")
        if self._arrays is None:
            arrays = self._read_arrays()
            if self.multi_module:
                arrays[MODULE_COLUMN] = arrays[MODULE_COLUMN].astype(str)
            if self.config.normalize_observations:
                arrays = self._normalize_arrays(arrays)
            self._arrays = arrays
        return self._arrays

    def _normalize_arrays(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Fit each module's statistics on its own transitions (unless they are fitted: restored from a
        checkpoint) and normalise them with it (several modules: in place, row by row of the module column)."""
        unfitted = self._unfitted()
        if not self.multi_module:
            return self._fit_and_normalize(self.module_ids[0], arrays, unfitted)
        mids = arrays[MODULE_COLUMN]
        for mid, obs in self.module_observations.items():
            rows = np.flatnonzero(mids == mid)
            if not len(rows):
                continue
            if mid in unfitted:
                obs.normalize.fit(arrays[C.OBS][rows])
            part = obs.normalize({k: arrays[k][rows] for k in obs.normalize.keys if k in arrays})
            for k, v in part.items():
                arrays[k][rows] = v
        return arrays

    def _fit_and_normalize(self, module_id: str, arrays: dict[str, np.ndarray],
                           unfitted: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """One module's transitions normalised with its statistics, fitted on them first unless fitted (restored
        from a checkpoint: not in ``unfitted``)."""
        norm = self.module_observations[module_id].normalize
        if module_id in unfitted:
            norm.fit(arrays[C.OBS])
        return norm(arrays)

    def _local_transitions(self, module_id: str | None = None) -> Iterator[dict[str, np.ndarray]]:
        """``load_arrays`` without Ray: each file's episode rows (the columns ``transitions`` reads) through
        ``episodes_to_transitions`` in this process, files in ``parquet_files`` order (Ray Data's, with
        ``preserve_order``). Each file is sized from its footer first (``check_parquet_size``)."""
        import pyarrow.parquet as pq

        columns, kwargs = self._read_columns(), self._transition_kwargs(normalize=False, module_id=module_id)
        for f in parquet_files(self.path):
            check_parquet_size(f)
            yield episodes_to_transitions(pq.read_table(f, columns=columns), **kwargs)

    def stats_sample(self) -> tuple[list[str], float]:
        """The files and the share of their episodes the streaming statistics pass reads: every file and episode
        up to ``data.stats_max_steps`` steps; beyond, a fixed random choice of files (at least
        ``STATS_MIN_FILES``) and the share of their episodes that makes about ``stats_max_steps`` steps."""
        files = [str(f) for f in parquet_files(self.path)]
        cap, steps = self.config.data.stats_max_steps, self.info.num_steps
        if cap is None or steps <= cap:
            return files, 1.0
        k = min(len(files), max(STATS_MIN_FILES, math.ceil(len(files) * cap / steps)))
        chosen = np.sort(np.random.default_rng(0).choice(len(files), k, replace=False))
        return [files[i] for i in chosen], min(1.0, cap * len(files) / (steps * k))

    def fit_normalizer_streaming(self, local: bool | None = None) -> None:
        """Streaming mode: fit the observation statistics (each module's on its own rows) on the ``stats_sample``
        (all of a dataset up to ``data.stats_max_steps``), one Ray task per row group (``scan.run_units``), merged
        in file order. ``local``: read the row groups one after another in this process instead (the same
        moments); None: where the sampled files hold at most ``scan.LOCAL_SCAN_MAX_BYTES`` (a 1M-step Pendulum
        set: 0.4 s here, against 1.9 s as the session's first Ray Data job)."""
        unfitted = self._unfitted()
        if not unfitted:
            return
        files, fraction = self.stats_sample()
        local = small_files(files) if local is None else local
        ids = [S.AGENT_ID, S.MODULE_ID] if self.multi_module else [S.AGENT_ID]
        with reading(self.path):
            units, unreadable = plan_units(files)
            if unreadable:
                raise OSError(f"cannot read {next(iter(unreadable))}: {next(iter(unreadable.values()))}")
            # one pass for every module; agents of different spaces: a pass per module, in its spaces
            passes = ([(m, self._transition_kwargs(normalize=False, module_id=m)) for m in unfitted]
                      if self.agent_spaces_differ else [(None, self._transition_kwargs(normalize=False))])
            for module, kwargs in passes:
                fn = functools.partial(_unit_obs_moments, columns=_EPISODE_COLUMNS + ids + list(self.extra_columns),
                                       fraction=fraction, **kwargs)
                payloads = list(run_units(units, fn, desc="observation statistics", local=local))
                for p in sorted(payloads, key=lambda p: (p["unit"]["file"], p["unit"]["row_group"])):
                    if "read_error" in p:
                        raise OSError(f"cannot read {p['unit']['file']}: {p['read_error']}")
                    for mid, m in p["modules"].items():
                        norm = unfitted.get(module or mid or self.module_ids[0])
                        if norm is not None and m["count"]:
                            norm.fit_moments(m["count"], np.array(m["mean"]), np.array(m["var"]))

    # -- per-learner sources -------------------------------------------------------------------------
    def source_specs(self, num_shards: int, batch_size: int, seed: int) -> list[Any]:
        """One batch-source spec per learner (``max(1, num_learners)`` of them); with several modules, each draws
        ``batch_size`` transitions of every module per batch (see the module docstring)."""
        # Here, not at the top: Ray Data's workers import this module for its transforms, and the sources need torch.
        from offlinerl.data.sources import InMemorySpec, StreamingSpec

        if self.mode == "in_memory":
            if self.multi_module:
                return self._module_in_memory_specs(self.load_module_arrays(), num_shards, batch_size, seed)
            arrays = self.load_arrays()
            n = len(arrays[C.OBS])
            if num_shards == 1:
                return [InMemorySpec(arrays, batch_size, seed, module_id=self.module_ids[0])]
            import ray

            perm = np.random.default_rng(seed).permutation(n)
            bounds = np.linspace(0, n, num_shards + 1).astype(int)
            return [
                InMemorySpec(ray.put({k: v[np.sort(perm[bounds[i]:bounds[i + 1]])] for k, v in arrays.items()}), batch_size,
                             seed + i, module_id=self.module_ids[0])
                for i in range(num_shards)
            ]
        self.fit_normalizer_streaming()
        if self.multi_module:
            return self._module_streaming_specs(num_shards, batch_size, seed)
        ds = self.transitions(normalize=True, shuffle_files=True, block_bytes=self.config.data.block_bytes)
        # streaming_split even for one learner: the split's executor then runs in a coordinator actor, not in the
        # learner's process, whose Python thread it slowed by a third (BC, 64x64: 360 -> 590 updates/s, in-memory 550).
        iterables = ds.streaming_split(num_shards, equal=True)
        d = self.config.data
        return [StreamingSpec(it, batch_size, d.shuffle_buffer_size, d.prefetch_batches, seed + i, dataset=str(self.path),
                              module_id=self.module_ids[0])
                for i, it in enumerate(iterables)]

    def _module_in_memory_specs(self, per_module: Mapping[str, Mapping[str, np.ndarray]], num_shards: int,
                                batch_size: int, seed: int) -> list[Any]:
        """In-memory, several modules: each module's transitions apart; over several learners, each module's
        split into ``num_shards`` random shards of (about) equal size, learner ``i`` holding shard ``i`` of each.
        Learner ``i`` samples module ``j`` (in ``module_ids`` order) with the seed ``seed + i * modules + j``."""
        from offlinerl.data.sources import MultiModuleInMemorySpec

        if num_shards == 1:
            return [MultiModuleInMemorySpec(per_module, batch_size, seed)]
        import ray

        rng = np.random.default_rng(seed)
        shards: list[dict[str, dict[str, np.ndarray]]] = [{} for _ in range(num_shards)]
        for m, columns in per_module.items():
            n = len(columns[C.OBS])
            if n < num_shards:
                raise ValueError(f"{self.path}: module {m!r} has {n} transitions, fewer than the {num_shards} learners")
            perm = rng.permutation(n)
            bounds = np.linspace(0, n, num_shards + 1).astype(int)
            for i in range(num_shards):
                shards[i][m] = {k: v[np.sort(perm[bounds[i]:bounds[i + 1]])] for k, v in columns.items()}
        modules = len(self.module_ids)
        return [MultiModuleInMemorySpec(ray.put(shard), batch_size, seed + i * modules) for i, shard in enumerate(shards)]

    def _module_streaming_specs(self, num_shards: int, batch_size: int, seed: int) -> list[Any]:
        """Streaming, several modules: a stream per module (``transitions(module_id=...)``), each split over the
        learners with ``streaming_split(equal=True)``; learner ``i`` pools module ``j``'s shard as a one-module
        stream would be, with the seed ``seed + i * modules + j``."""
        from offlinerl.data.sources import MultiModuleSpec, StreamingSpec

        d = self.config.data
        splits = {m: self.transitions(normalize=True, shuffle_files=True, block_bytes=d.block_bytes, module_id=m)
                  .streaming_split(num_shards, equal=True) for m in self.module_ids}
        modules = len(self.module_ids)
        return [MultiModuleSpec({m: StreamingSpec(splits[m][i], batch_size, d.shuffle_buffer_size, d.prefetch_batches,
                                                  seed + i * modules + j, dataset=str(self.path), module_id=m)
                                 for j, m in enumerate(self.module_ids)})
                for i in range(num_shards)]
