"""Connectors: small callables over column batches, one concern each.

- learner side (episode rows -> train batch): ``AddTransitions``,
  ``AddNextObservations``, ``AddNextActions``, ``ComputeReturnsToGo``, ``AddExtraColumns``;
- both sides (same class, same state): ``FlattenObservations``, ``NormalizeObservations``;
- module to env: ``ActionsToEnv``.

Pipelines are assembled in one place, ``connectors/pipelines.py``:
``learner_pipeline``, ``env_to_module_pipeline``, ``module_to_env_pipeline``
(and the ``ObservationConnectors`` holding a module's fitted state; ``join_module_states`` /
``split_module_states``: a job's state, one module's or ``{module_id: state}``).
"""

from offlinerl.connectors.common import FlattenObservations, NormalizeObservations, RunningMeanStd
from offlinerl.connectors.connector import ConnectorPipeline, ConnectorStateError, ConnectorV2
from offlinerl.connectors.episode_columns import EpisodeColumns
from offlinerl.connectors.learner import (AddExtraColumns, AddNextActions, AddNextObservations, AddTransitions,
                                         ComputeReturnsToGo)
from offlinerl.connectors.module_to_env import ActionsToEnv
from offlinerl.connectors.pipelines import (ObservationConnectors, env_to_module_pipeline, join_module_states,
                                            learner_pipeline, module_to_env_pipeline, observation_connectors,
                                            split_module_states, transition_connectors)

__all__ = [
    "ActionsToEnv",
    "AddExtraColumns",
    "AddNextActions",
    "AddNextObservations",
    "AddTransitions",
    "ComputeReturnsToGo",
    "ConnectorPipeline",
    "ConnectorStateError",
    "ConnectorV2",
    "EpisodeColumns",
    "FlattenObservations",
    "NormalizeObservations",
    "ObservationConnectors",
    "RunningMeanStd",
    "env_to_module_pipeline",
    "join_module_states",
    "learner_pipeline",
    "module_to_env_pipeline",
    "observation_connectors",
    "split_module_states",
    "transition_connectors",
]
