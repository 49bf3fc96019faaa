"""Connectors: small callables over column batches, one concern each.

- learner side (episode rows -> train batch): ``AddTransitions``,
  ``AddNextObservations``, ``ComputeReturnsToGo``, ``AddExtraColumns``;
- both sides (same class, same state): ``FlattenObservations``, ``NormalizeObservations``;
- module to env: ``ActionsToEnv``.
"""

from offlinerl.connectors.common import FlattenObservations, NormalizeObservations, RunningMeanStd
from offlinerl.connectors.connector import ConnectorPipeline, ConnectorV2
from offlinerl.connectors.episode_columns import EpisodeColumns
from offlinerl.connectors.learner import AddExtraColumns, AddNextObservations, AddTransitions, ComputeReturnsToGo
from offlinerl.connectors.module_to_env import ActionsToEnv

__all__ = [
    "ActionsToEnv",
    "AddExtraColumns",
    "AddNextObservations",
    "AddTransitions",
    "ComputeReturnsToGo",
    "ConnectorPipeline",
    "ConnectorV2",
    "EpisodeColumns",
    "FlattenObservations",
    "NormalizeObservations",
    "RunningMeanStd",
]
