"""The one place that assembles connector pipelines, from (spaces, config, fitted state).

    learner        episode connectors           + observation connectors
                   (config.learner_connectors:     (flatten, then normalise
                   transitions, next obs, ...)      if the job normalises)
    env-to-module                                  observation connectors: same classes, same state
    module-to-env  actions to the env's dtype, Box actions clipped to the bounds

A job's observation connectors live in one ``ObservationConnectors`` per module
(a multi-agent dataset trains several modules, each with statistics fitted on its
own rows). A module's learner pipeline uses those very objects, so fitting the
statistics fits them for the learner; every env-to-module pipeline is a new copy
restored from their ``get_state()``, the state a checkpoint saves and a weight
sync sends. State always goes through the pipelines' own ``get_state``/``set_state``
(keyed by connector name), so nothing outside this package names a connector.

A job's connector state (``join_module_states``, ``split_module_states``) is its
module's state for one module, ``{module_id: state}`` for several.

Callers pass what the config says (``config.normalize_observations``); a
``config`` of ``None`` means the default episode connectors (transitions and
next observations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

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
    "join_module_states",
    "learner_pipeline",
    "module_to_env_pipeline",
    "observation_connectors",
    "split_module_states",
    "transition_connectors",
]

#: The connectors a state keyed by connector names may name (``split_module_states`` tells the two forms apart).
_OBSERVATION_CONNECTORS = frozenset({FlattenObservations.__name__, NormalizeObservations.__name__})


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


def join_module_states(states: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A job's connector state from each module's (``{module_id: state}``): one module's state as it is (keyed by
    connector name, the format of every single-module checkpoint), several modules' as ``{module_id: state}``."""
    if len(states) == 1:
        return dict(next(iter(states.values())))
    return {mid: dict(state) for mid, state in states.items()}


def split_module_states(state: Mapping[str, Any], module_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each module's connector state in a job's (the inverse of ``join_module_states``).

    One module: ``state`` itself. Several: ``{module_id: state}`` (a module it leaves out gets ``{}``: not fitted
    yet), or a state keyed by connector names, which every module shares (a multi-module checkpoint written
    before statistics were per module). ``ConnectorStateError`` names a module the job does not train."""
    ids = list(module_ids)
    if len(ids) == 1:
        return {ids[0]: dict(state)}
    if set(state) <= _OBSERVATION_CONNECTORS:
        return {mid: dict(state) for mid in ids}
    unknown = sorted(set(state) - set(ids))
    if unknown:
        raise ConnectorStateError(f"{unknown[0]}: no module of that name (the job trains {ids}); a multi-module "
                                  "state is {module_id: state}")
    for mid, s in state.items():
        if not isinstance(s, Mapping):
            raise ConnectorStateError(f"{mid} must be an object (that module's connector state)")
    return {mid: dict(state.get(mid, {})) for mid in ids}


def module_to_env_pipeline(action_space: gym.Space) -> ConnectorPipeline:
    """Module outputs -> actions the env accepts (numpy, the env's dtype, Box actions within bounds)."""
    return ConnectorPipeline([ActionsToEnv(action_space)])
