"""All transitions of a small dataset as numpy arrays, without Ray (for reference loops and tests)."""

from __future__ import annotations

from pathlib import Path
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from offlinerl.connectors import (ConnectorPipeline, EpisodeColumns, env_to_module_pipeline, learner_pipeline,
                                  observation_connectors)
from offlinerl.connectors.pipelines import LearnerConnectorsConfig
from offlinerl.core import columns as C
from offlinerl.episodes import parquet_files, read_info

__all__ = ["load_transitions"]


def load_transitions(path: str | Path, normalize: bool,
                     config: LearnerConnectorsConfig | None = None) -> tuple[dict[str, np.ndarray], ConnectorPipeline]:
    """Every transition of the dataset (obs, actions, rewards, next obs, flags; and the columns
    ``config.learner_connectors`` adds, if a config is given) as arrays, and the env-side observation
    pipeline that gives evaluation the same preprocessing."""
    info = read_info(path)
    table = pa.concat_tables([pq.read_table(f) for f in parquet_files(path)])
    episodes = EpisodeColumns.from_arrow(table, info.observation_space, info.action_space)
    observations = observation_connectors(info.observation_space, normalize)
    arrays = learner_pipeline(observations, info.action_space, config, normalize=False)({}, episodes)
    if normalize:
        observations.normalize.fit(arrays[C.OBS])
        arrays = observations.normalize(arrays)
    return arrays, env_to_module_pipeline(info.observation_space, normalize, observations.get_state())
