"""OfflineData (lazy Ray Data reads) and the batch sources learners sample from.

Names are imported on first use: Ray Data's workers import ``offlinerl.data.offline_data`` for its
transforms, and must not import the sources (torch) with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "OfflineData": "offlinerl.data.offline_data",
    "episodes_to_transitions": "offlinerl.data.offline_data",
    "FixedBatchSource": "offlinerl.data.sources",
    "FixedBatchSpec": "offlinerl.data.sources",
    "InMemorySource": "offlinerl.data.sources",
    "InMemorySpec": "offlinerl.data.sources",
    "StreamingSource": "offlinerl.data.sources",
    "StreamingSpec": "offlinerl.data.sources",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'offlinerl.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
