import gymnasium as gym
import numpy as np
import pytest

from offlinerl.connectors import (
    ActionsToEnv,
    AddNextObservations,
    AddTransitions,
    ComputeReturnsToGo,
    ConnectorPipeline,
    EpisodeColumns,
    FlattenObservations,
    NormalizeObservations,
)
from offlinerl.core import columns as C
from offlinerl.episodes import SingleAgentEpisode, episodes_to_table

OBS = gym.spaces.Box(-10, 10, (2,), np.float32)
ACT = gym.spaces.Discrete(3)


def _episodes():
    e1 = SingleAgentEpisode("a", obs=np.array([[0, 0], [1, 1], [2, 2]], np.float32), actions=np.array([0, 1]),
                            rewards=[1.0, 2.0], terminated=True)
    e2 = SingleAgentEpisode("b", obs=np.array([[5, 5], [6, 6]], np.float32), actions=np.array([2]),
                            rewards=[3.0], truncated=True)
    return [e1, e2]


def test_learner_pipeline_from_arrow_rows_hand_checked():
    table = episodes_to_table(_episodes(), OBS, ACT)
    ep = EpisodeColumns.from_arrow(table, OBS, ACT)
    pipe = ConnectorPipeline([AddTransitions(), AddNextObservations(), ComputeReturnsToGo(0.5), FlattenObservations(OBS)])
    b = pipe({}, ep)
    np.testing.assert_array_equal(b[C.OBS], [[0, 0], [1, 1], [5, 5]])
    np.testing.assert_array_equal(b[C.NEXT_OBS], [[1, 1], [2, 2], [6, 6]])
    np.testing.assert_array_equal(b[C.ACTIONS], [0, 1, 2])
    np.testing.assert_array_equal(b[C.TERMINATEDS], [0, 1, 0])
    np.testing.assert_array_equal(b[C.TRUNCATEDS], [0, 0, 1])
    np.testing.assert_allclose(b[C.RETURNS_TO_GO], [1 + 0.5 * 2, 2, 3])
    assert b[C.OBS].dtype == np.float32 and b[C.ACTIONS].dtype == np.int64


def test_discrete_and_dict_observations_flatten():
    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,)), "mode": gym.spaces.Discrete(3)})
    flat = FlattenObservations(space)({C.OBS: {"pos": np.array([[0.5, -0.5]]), "mode": np.array([2])}})
    np.testing.assert_array_equal(flat[C.OBS], [[0.0, 0.0, 1.0, 0.5, -0.5]])  # Dict keys sorted by gymnasium


def test_normalize_state_round_trip_and_stats():
    norm = NormalizeObservations()
    x = np.array([[1.0, 10.0], [3.0, 30.0]], np.float32)
    norm.fit(x[:1])
    norm.fit(x[1:])
    np.testing.assert_allclose(norm.stats.mean, [2.0, 20.0])
    np.testing.assert_allclose(norm.stats.var, [1.0, 100.0])
    other = NormalizeObservations()
    other.set_state(norm.get_state())
    out = other({C.OBS: x.copy()})[C.OBS]
    np.testing.assert_allclose(out, [[-1, -1], [1, 1]], atol=1e-6)
    with pytest.raises(RuntimeError, match="no statistics"):
        NormalizeObservations()({C.OBS: x})


def test_train_side_and_eval_side_preprocessing_agree():
    """Dataset rows through the learner pipeline == the same raw env observations through env-to-module."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    raw = [obs]
    actions, rewards = [], []
    for t in range(20):
        obs, r, term, trunc, _ = env.step(t % 2)
        raw.append(obs)
        actions.append(t % 2)
        rewards.append(r)
        if term:
            break
    ep = SingleAgentEpisode("e", obs=np.array(raw), actions=np.array(actions), rewards=rewards, terminated=term)
    space, aspace = env.observation_space, env.action_space
    table = episodes_to_table([ep], space, aspace)
    learner_norm = NormalizeObservations()
    learner_norm.fit(FlattenObservations(space)({C.OBS: np.array(raw[:-1])})[C.OBS])
    learner = ConnectorPipeline([AddTransitions(), FlattenObservations(space), learner_norm])
    train = learner({}, EpisodeColumns.from_arrow(table, space, aspace))
    env_side = ConnectorPipeline([FlattenObservations(space), NormalizeObservations()])
    env_side.set_state(learner.get_state())  # what a checkpoint / weight sync carries
    live = env_side({C.OBS: np.array(raw[:-1])})
    np.testing.assert_array_equal(train[C.OBS], live[C.OBS])


def test_actions_to_env_clips_and_casts():
    import torch

    box = gym.spaces.Box(-1, 1, (2,), np.float32)
    out = ActionsToEnv(box)({C.ACTIONS: torch.tensor([[2.0, -0.5]])})[C.ACTIONS]
    np.testing.assert_array_equal(out, [[1.0, -0.5]])
    out = ActionsToEnv(ACT)({C.ACTIONS: torch.tensor([2])})[C.ACTIONS]
    assert out.dtype == np.int64


def test_pipeline_state_errors_name_connectors():
    pipe = ConnectorPipeline([FlattenObservations(OBS)])
    with pytest.raises(ValueError, match="NormalizeObservations"):
        pipe.set_state({"NormalizeObservations": {"count": 0}})
