"""OfflineData (Ray Data pipelines) and the batch sources learners sample from."""

from offlinerl.data.offline_data import OfflineData, episodes_to_transitions
from offlinerl.data.sources import (
    FixedBatchSource,
    FixedBatchSpec,
    InMemorySource,
    InMemorySpec,
    StreamingSource,
    StreamingSpec,
)

__all__ = [
    "FixedBatchSource",
    "FixedBatchSpec",
    "InMemorySource",
    "InMemorySpec",
    "OfflineData",
    "StreamingSource",
    "StreamingSpec",
    "episodes_to_transitions",
]
