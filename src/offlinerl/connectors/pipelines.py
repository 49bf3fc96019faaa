"""The one place that assembles connector pipelines, from (spaces, config, fitted state).

    learner        episode connectors           + observation connectors
                   (config.learner_connectors:     (flatten, then normalise
                   transitions, next obs, ...)      if the job normalises)
    env-to-module                                  observation connectors: same classes, same state
    module-to-env  actions to the env's dtype, Box actions clipped to the bounds

A job's observation connectors live in one ``ObservationConnectors``. The
learner pipeline uses those very objects, so fitting the statistics fits them
for the learner; every env-to-module pipeline is a new copy restored from their
``get_state()``, the state a checkpoint saves and a weight sync sends. State
always goes through the pipelines' own ``get_state``/``set_state`` (keyed by
connector name), so nothing outside this package names a connector.

Callers pass what the config says (``config.normalize_observations``); a
``config`` of ``None`` means the default episode connectors (transitions and
next observations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import gymnasium as gym

from offlinerl.connectors.common import FlattenObservations, NormalizeObservations
from offlinerl.connectors.connector import ConnectorPipeline, ConnectorStateError, ConnectorV2
from offlinerl.connectors.learner import AddNextObservations, AddTransitions
from offlinerl.connectors.module_to_env import ActionsToEnv
from offlinerl.core.flatten import flat_dim

__all__ = [
    "LearnerConnectorsConfig",
    "ObservationConnectors",
    "env_to_module_pipeline",
    "learner_pipeline",
    "module_to_env_pipeline",
    "observation_connectors",
    "transition_connectors",
]


class LearnerConnectorsConfig(Protocol):
    """What the learner pipeline reads from a config (an ``AlgorithmConfig`` has it)."""

    def learner_connectors(self, observation_space: gym.Space, action_space: gym.Space) -> list[ConnectorV2]:
        """Episode rows -> train batch columns, before the observation connectors (which are added here)."""


@dataclass(frozen=True)
class ObservationConnectors:
    """What both sides do to observations, in this order; holds a job's one fitted state."""

    flatten: FlattenObservations
    """Any observation space -> ``[N, D]`` float32 (Discrete one-hot, Dict/Tuple leaves concatenated)."""
    normalize: NormalizeObservations | None
    """The observation statistics (fitted on the dataset, then frozen); ``None`` if the job does not normalise."""

    def pipeline(self, normalize: bool = True) -> ConnectorPipeline:
        """These connectors as a pipeline (``normalize=False``: flatten only, e.g. before fitting)."""
        parts: list[ConnectorV2] = [self.flatten]
        if normalize and self.normalize is not None:
            parts.append(self.normalize)
        return ConnectorPipeline(parts)

    @property
    def fitted(self) -> bool:
        """Ready to act: normalised jobs need fitted statistics."""
        return self.normalize is None or self.normalize.fitted

    def get_state(self) -> dict[str, Any]:
        return self.pipeline().get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore through the pipeline's ``set_state``; entries for connectors these do not have are
        left out (a learner-side state may hold more, and a job that does not normalise ignores statistics)."""
        pipeline = self.pipeline()
        names = {c.name for c in pipeline.connectors}
        pipeline.set_state({name: s for name, s in state.items() if name in names})


def observation_connectors(observation_space: gym.Space, normalize: bool,
                           state: Mapping[str, Any] | None = None) -> ObservationConnectors:
    """New observation connectors for ``observation_space``, restored from ``state`` if given."""
    dim = flat_dim(observation_space)
    out = ObservationConnectors(FlattenObservations(observation_space), NormalizeObservations(dim=dim) if normalize else None)
    if state:
        out.set_state(state)
    return out


def transition_connectors() -> list[ConnectorV2]:
    """The default episode connectors: per-step transitions and their next observations."""
    return [AddTransitions(), AddNextObservations()]


def learner_pipeline(observations: ObservationConnectors, action_space: gym.Space,
                     config: LearnerConnectorsConfig | None = None, *,
                     normalize: bool = True) -> ConnectorPipeline:
    """Episode rows (``EpisodeColumns``) -> train batch.

    ``config.learner_connectors(observation_space, action_space)`` (or ``transition_connectors()``
    without a config), then ``observations`` themselves, so the learner and every acting pipeline
    copied from them share one state. ``normalize=False`` stops after flattening (to fit statistics).
    """
    space = observations.flatten.observation_space
    episode = transition_connectors() if config is None else list(config.learner_connectors(space, action_space))
    return ConnectorPipeline([*episode, *observations.pipeline(normalize).connectors])


def env_to_module_pipeline(observation_space: gym.Space, normalize: bool = False,
                           state: Mapping[str, Any] | None = None) -> ConnectorPipeline:
    """Env observations -> module inputs, exactly as the learner pipeline preprocessed the dataset's.

    With ``state`` (a learner pipeline's or a checkpoint's ``get_state()``) a normalising pipeline must
    get fitted statistics, or ``ConnectorStateError`` says which are missing; without it the state
    arrives later (``set_state``, e.g. by a weight sync).
    """
    obs = observation_connectors(observation_space, normalize, state)
    if state is not None and not obs.fitted:
        norm = obs.normalize
        raise ConnectorStateError(f"{norm.name}.mean must be {norm.dim} finite numbers; the state holds no "
                                  "fitted statistics")
    return obs.pipeline()


def module_to_env_pipeline(action_space: gym.Space) -> ConnectorPipeline:
    """Module outputs -> actions the env accepts (numpy, the env's dtype, Box actions within bounds)."""
    return ConnectorPipeline([ActionsToEnv(action_space)])
