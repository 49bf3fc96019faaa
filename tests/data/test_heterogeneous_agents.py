"""Agents of different spaces (format version 2) through the data path and training: each module built, normalised
and trained in its own agents' spaces, in memory and streaming with two learners, and its checkpoint acting in them.

The dataset: agent "s" observes 2 numbers and picks one of 2 actions (the sign of its first), agent "l" observes
3 numbers at another scale and picks one of 3 (which of its three is largest): a module fed the other's widths or
statistics could not learn both.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.bc import BCConfig
from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.data.offline_data import OfflineData
from offlinerl.env.policies import act
from offlinerl.episodes import SingleAgentEpisode, load_episodes, read_info, write_dataset
from offlinerl.episodes.agent_spaces import storage_spaces
from offlinerl.evaluation.policy import load_policy
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import load_checkpoint

OBS = {"s": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "l": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)}
ACT = {"s": gym.spaces.Discrete(2), "l": gym.spaces.Discrete(3)}
SCALE = {"s": (1.0, 0.0), "l": (20.0, 5.0)}  # obs = scale * x + offset
EPISODES, STEPS = 30, 400  # streaming with 2 learners: ~5 epoch restarts per module in 450 updates, not 50


def _label(agent: str, x: np.ndarray) -> np.ndarray:
    return (x[:, 0] > 0).astype(np.int64) if agent == "s" else np.argmax(x, axis=1).astype(np.int64)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(EPISODES):
        for agent, space in OBS.items():
            x = rng.normal(size=(STEPS + 1, space.shape[0])).astype(np.float32)
            scale, offset = SCALE[agent]
            episodes.append(SingleAgentEpisode(f"ep{i}", obs=x * scale + offset, actions=_label(agent, x[:-1]),
                                               rewards=np.ones(STEPS, np.float32), truncated=True, agent_id=agent))
    obs, action, agents = storage_spaces(OBS, ACT)
    path = tmp_path_factory.mktemp("het") / "data"
    write_dataset(episodes, path, observation_space=obs, action_space=action, agent_spaces=agents, rows_per_file=16)
    return path


def _config(mode: str = "in_memory", **kw) -> BCConfig:
    return BCConfig.from_dict({"updates_per_iteration": 150, "train_batch_size": 64, "lr": 3e-3,
                               "model": {"hidden": [32]}, "normalize_observations": True, "evaluation": {"interval": 0},
                               "num_cpus_per_learner": 0.5, "data": {"mode": mode, "shuffle_buffer_size": 256}, **kw})


def _raw_obs(path, agent: str) -> np.ndarray:
    return np.concatenate([e.obs[:-1] for e in load_episodes(path) if e.agent_id == agent]).astype(np.float64)


def _accuracy(module, env_to_module, agent: str) -> float:
    x = np.random.default_rng(1).normal(size=(500, OBS[agent].shape[0])).astype(np.float32)
    scale, offset = SCALE[agent]
    out = act(module, env_to_module, module_to_env_pipeline(ACT[agent]), x * scale + offset)
    return float((out[C.ACTIONS] == _label(agent, x)).mean())


def test_each_module_reads_its_agents_values_in_its_own_spaces(ray_session, team):
    data = OfflineData(team, _config())
    assert data.module_ids == ["l", "s"] and data.agent_spaces_differ
    assert data.module_spaces == {"l": (OBS["l"], ACT["l"]), "s": (OBS["s"], ACT["s"])}
    arrays = data.load_module_arrays()
    with pytest.raises(ValueError, match="agents act in different spaces"):
        data.load_arrays()
    for agent, space in OBS.items():
        raw = _raw_obs(team, agent)
        stats = data.connector_state()[agent]["NormalizeObservations"]
        assert stats["count"] == len(raw) == EPISODES * STEPS
        np.testing.assert_allclose(stats["mean"], raw.mean(0), rtol=1e-10)
        np.testing.assert_allclose(stats["var"], raw.var(0), rtol=1e-8)
        expected = np.clip((raw - raw.mean(0)) / np.sqrt(raw.var(0) + 1e-8), -10, 10)
        assert arrays[agent][C.OBS].shape == (EPISODES * STEPS, space.shape[0])
        np.testing.assert_allclose(arrays[agent][C.OBS], expected, rtol=1e-4, atol=1e-5)
        assert arrays[agent][C.ACTIONS].max() == ACT[agent].n - 1
    # the Ray-free read gives the same arrays
    local = OfflineData(team, _config(), use_ray=False).load_module_arrays()
    for agent in OBS:
        for key, value in arrays[agent].items():
            np.testing.assert_array_equal(local[agent][key], value)
    # streaming: the statistics pass, one per module in its own widths, agrees with in-memory's
    streaming = OfflineData(team, _config("streaming"))
    streaming.fit_normalizer_streaming()
    for agent in OBS:
        got, want = (d.connector_state()[agent]["NormalizeObservations"] for d in (streaming, data))
        assert got["count"] == want["count"]
        np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-10)
        np.testing.assert_allclose(got["var"], want["var"], rtol=1e-8)


def test_a_module_for_agents_of_different_spaces_is_refused(ray_session, team):
    with pytest.raises(ValueError, match=r"module 'shared' would act for agents l and s, whose spaces differ"):
        OfflineData(team, _config(policy_mapping="shared"))


@pytest.mark.parametrize("mode,learners", [("in_memory", 0), ("streaming", 2)])
def test_training_learns_both_agents_and_the_checkpoint_acts_in_their_spaces(ray_session, team, tmp_path, mode,
                                                                              learners):
    algo = Algorithm("bc", _config(mode, num_learners=learners), team)
    try:
        for _ in range(3):
            algo.train()
        accuracy = {a: _accuracy(algo.eval_module[a], algo.offline_data.env_to_module_pipeline(a), a) for a in OBS}
        assert min(accuracy.values()) > 0.9, accuracy
        ckpt_dir = algo.save_checkpoint(tmp_path / "ckpt")
    finally:
        algo.stop()
    meta = json.loads((ckpt_dir / "algorithm.json").read_text())
    assert {m: s["observation_space"]["shape"] for m, s in meta["module_spaces"].items()} == {"l": [3], "s": [2]}
    ckpt = load_checkpoint(ckpt_dir)
    assert ckpt.spaces_of("s") == (OBS["s"], ACT["s"])
    for agent in OBS:
        policy = load_policy(ckpt_dir, module_id=agent)
        x = np.random.default_rng(2).normal(size=(200, OBS[agent].shape[0])).astype(np.float32)
        scale, offset = SCALE[agent]
        assert (policy.predict(x * scale + offset) == _label(agent, x)).mean() > 0.9


def _obs_width(obs, actions, rewards, next_obs):
    """A reward function that reports what it was handed: the observation width (next_obs must match)."""
    assert next_obs.shape == obs.shape and len(actions) == len(rewards)
    return np.full(len(rewards), float(obs.shape[1]))


def test_data_operations_keep_the_agent_spaces_and_a_reward_function_sees_each_agents_own(ray_session, team,
                                                                                          tmp_path):
    from offlinerl.data_ops.relabel import RelabelConfig, relabel_dataset

    relabel_dataset(team, tmp_path / "relabelled",
                    RelabelConfig(reward_fn="tests.data.test_heterogeneous_agents:_obs_width"))
    info = read_info(tmp_path / "relabelled")
    assert info.agent_spaces == read_info(team).agent_spaces and info.format_version == 2
    rewards = {(e.agent_id, float(r)) for e in load_episodes(tmp_path / "relabelled") for r in e.rewards}
    assert rewards == {("s", 2.0), ("l", 3.0)}


def test_a_terminal_predicate_sees_each_agents_own_values_and_an_index_past_one_is_refused(ray_session, team,
                                                                                           tmp_path):
    from offlinerl.data_ops.errors import DataOpError
    from offlinerl.data_ops.relabel import RelabelConfig, relabel_dataset

    # next_obs[1] is the agent's own second number (the last of "s", whose storage has a third: padding).
    relabel_dataset(team, tmp_path / "flags", RelabelConfig(terminal_when="next_obs[1] > 0"))
    got = {(e.id, e.agent_id): e.terminated for e in load_episodes(tmp_path / "flags")}
    want = {(e.id, e.agent_id): bool(e.obs[-1][1] > 0) for e in load_episodes(team)}
    assert {e.agent_id: e.obs.shape[1] for e in load_episodes(team)} == {"s": 2, "l": 3}
    assert got == want and 0 < sum(want.values()) < len(want)
    assert all(e.truncated != e.terminated for e in load_episodes(tmp_path / "flags"))
    with pytest.raises(DataOpError, match=r"agent 's'.*next_obs\[2\]: index out of range \(it has 2 dimension"):
        relabel_dataset(team, tmp_path / "refused", RelabelConfig(terminal_when="next_obs[2] > 0"))
    assert not (tmp_path / "refused").exists()
