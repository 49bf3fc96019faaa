"""Episodes and episode datasets: the format every other part of offlinerl reads and writes."""

from offlinerl.episodes.arrow import batch_concat, batch_equal, batch_len, batch_map, batch_slice
from offlinerl.episodes.atomic import OUTPUT_KINDS, QuarantineKeptError, UnsafeOutputError
from offlinerl.episodes.episode import SingleAgentEpisode, episodes_to_table, table_to_episodes
from offlinerl.episodes.info import INFO_FILE, DatasetInfo, DatasetInfoError, read_info
from offlinerl.episodes.io import (
    OutputExistsError,
    atomic_directory,
    load_episodes,
    parquet_files,
    read_dataset,
    write_dataset,
)
from offlinerl.episodes.schema import FORMAT_VERSION, episode_schema
from offlinerl.episodes.spaces import SpaceError, space_from_json, space_to_json

__all__ = [
    "FORMAT_VERSION",
    "INFO_FILE",
    "OUTPUT_KINDS",
    "DatasetInfo",
    "DatasetInfoError",
    "OutputExistsError",
    "QuarantineKeptError",
    "SingleAgentEpisode",
    "SpaceError",
    "UnsafeOutputError",
    "atomic_directory",
    "batch_concat",
    "batch_equal",
    "batch_len",
    "batch_map",
    "batch_slice",
    "episode_schema",
    "episodes_to_table",
    "load_episodes",
    "parquet_files",
    "read_dataset",
    "read_info",
    "space_from_json",
    "space_to_json",
    "table_to_episodes",
    "write_dataset",
]
