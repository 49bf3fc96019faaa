"""The learner side and the acting side preprocess observations identically (DESIGN: "one connector
definition and one state serve both"): the same episodes through the learner pipeline and, step by step
as an env runner or evaluation feeds them, through the env-to-module pipeline give equal arrays, for every
kind of observation space, with and without normalisation, also after the state went through a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.cql import CQLConfig
from offlinerl.connectors import (ConnectorStateError, EpisodeColumns, env_to_module_pipeline, learner_pipeline,
                                  module_to_env_pipeline, observation_connectors)
from offlinerl.core import columns as C
from offlinerl.core.flatten import flat_dim
from offlinerl.data.transitions import load_transitions
from offlinerl.episodes import load_episodes, write_dataset
from offlinerl.episodes.arrow import batch_map
from offlinerl.training.checkpoint import Checkpoint, CheckpointError, CheckpointMeta
from tests.episodes.builders import make_episode

SPACES = {
    "box": gym.spaces.Box(-5.0, 5.0, (3,), np.float32),
    "discrete": gym.spaces.Discrete(5, start=-2),
    "dict": gym.spaces.Dict({
        "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
        "flags": gym.spaces.MultiBinary(2),
    }),
    "image": gym.spaces.Box(0, 255, (3, 8, 8), np.uint8),
}
ACTIONS = gym.spaces.Discrete(3)


@pytest.fixture(scope="module", params=sorted(SPACES))
def dataset(request, tmp_path_factory) -> tuple[Path, gym.Space]:
    space = SPACES[request.param]
    episodes = [make_episode(i, space, ACTIONS, steps=5 + 3 * i, terminated=i % 2 == 0, truncated=i % 2 == 1)
                for i in range(4)]
    path = tmp_path_factory.mktemp(request.param) / "data"
    write_dataset(episodes, path, observation_space=space, action_space=ACTIONS)
    return path, space


def _act_step_by_step(env_to_module, episodes, space) -> tuple[np.ndarray, np.ndarray]:
    """What acting sees: one observation at a time (a batch of one, like a 1-env runner), episode by episode."""
    obs, next_obs = [], []
    for ep in episodes:
        steps = [env_to_module({C.OBS: batch_map(lambda a: a[t:t + 1], ep.obs)})[C.OBS] for t in range(len(ep) + 1)]
        obs.extend(steps[:-1])
        next_obs.extend(steps[1:])
    return np.concatenate(obs), np.concatenate(next_obs)


@pytest.mark.parametrize("normalize", [False, True])
def test_learner_batch_equals_env_to_module_output_step_by_step(dataset, normalize):
    path, space = dataset
    arrays, env_to_module = load_transitions(path, normalize)
    obs, next_obs = _act_step_by_step(env_to_module, load_episodes(path), space)
    assert arrays[C.OBS].shape == (len(obs), flat_dim(space)) and arrays[C.OBS].dtype == np.float32
    np.testing.assert_array_equal(arrays[C.OBS], obs)
    np.testing.assert_array_equal(arrays[C.NEXT_OBS], next_obs)


def _meta(path, connector_state):
    """What algorithm.json says of a checkpoint whose only state that matters here is ``connector_state``."""
    return CheckpointMeta(file=path / "algorithm.json", format_version=2, algorithm="cql", config={},
                          observation_space={}, action_space={}, module_class="", learner_class="",
                          connector_state=connector_state, iteration=0, num_updates=0)


@pytest.mark.parametrize("normalize", [False, True])
def test_state_through_a_checkpoint_gives_the_same_output(dataset, normalize, tmp_path):
    """Fitted learner state -> algorithm.json (JSON) -> Checkpoint.env_to_module: identical arrays, in one batch too."""
    path, space = dataset
    episodes = load_episodes(path)
    observations = observation_connectors(space, normalize)
    columns = EpisodeColumns.from_episodes(episodes)
    if normalize:  # as OfflineData does: flatten everything, fit once, then the full pipeline
        observations.normalize.fit(learner_pipeline(observations, ACTIONS, normalize=False)({}, columns)[C.OBS])
    train = learner_pipeline(observations, ACTIONS)({}, EpisodeColumns.from_episodes(episodes))
    saved = json.loads(json.dumps(observations.get_state()))
    assert saved == ({"NormalizeObservations": observations.normalize.get_state()} if normalize else {})
    ckpt = Checkpoint(tmp_path, _meta(tmp_path, saved), CQLConfig(normalize_observations=normalize), space, ACTIONS,
                      object, object)
    acting = ckpt.env_to_module()
    np.testing.assert_array_equal(train[C.OBS], _act_step_by_step(acting, episodes, space)[0])
    whole = acting({C.OBS: batch_map(lambda a: a[:-1], episodes[0].obs)})[C.OBS]
    np.testing.assert_array_equal(train[C.OBS][:len(episodes[0])], whole)
    assert acting.get_state() == saved


def test_bad_or_missing_statistics_are_one_checkpoint_error_for_any_space(tmp_path):
    space = SPACES["dict"]  # flattened width 7 (one-hot Discrete), not the 5 values a row stores
    dim = flat_dim(space)
    config = CQLConfig(normalize_observations=True)
    good = {"count": 3, "mean": [0.0] * dim, "var": [1.0] * dim}
    Checkpoint(tmp_path, _meta(tmp_path, {"NormalizeObservations": good}), config, space, ACTIONS, object,
               object).env_to_module()
    for state, key in [({"NormalizeObservations": {**good, "mean": [0.0] * 5}}, "mean"),
                       ({"NormalizeObservations": {**good, "var": [1.0] * (dim - 1) + [float("nan")]}}, "var"),
                       ({}, "mean"), ({"NormalizeObservations": {"count": 0}}, "mean")]:
        ckpt = Checkpoint(tmp_path, _meta(tmp_path, state), config, space, ACTIONS, object, object)
        with pytest.raises(CheckpointError, match=rf"algorithm\.json: connector_state\.NormalizeObservations\.{key} "
                                                  rf"must be {dim} finite numbers"):
            ckpt.env_to_module()
    with pytest.raises(ConnectorStateError, match="NormalizeObservations.mean"):
        env_to_module_pipeline(space, True, {"NormalizeObservations": {"count": 1, "mean": "x", "var": [1.0] * dim}})


def test_acting_pipelines_share_nothing_with_the_learner():
    """A copy carries the state; later changes to the learner's statistics do not leak into a running env."""
    space = SPACES["box"]
    observations = observation_connectors(space, True)
    observations.normalize.fit(np.arange(12, dtype=np.float32).reshape(4, 3))
    acting = env_to_module_pipeline(space, True, observations.get_state())
    before = acting({C.OBS: np.ones((1, 3), np.float32)})[C.OBS].copy()
    observations.normalize.fit(np.full((4, 3), 100.0, np.float32))
    np.testing.assert_array_equal(acting({C.OBS: np.ones((1, 3), np.float32)})[C.OBS], before)


def test_module_to_env_pipeline_casts_to_the_env():
    out = module_to_env_pipeline(ACTIONS)({C.ACTIONS: np.array([2.0, 0.0])})[C.ACTIONS]
    assert out.dtype == np.int64 and out.tolist() == [2, 0]
