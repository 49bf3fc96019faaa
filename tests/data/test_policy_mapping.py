"""``policy_mapping`` on a dataset of three agents (rows with ``agent_id`` a0, a1, b0): the modules it makes, the
rows each trains in memory, streaming and over two learners, each module's observation statistics (those of its
agents' rows, by numpy), an agent no pattern matches, and the mapping through a checkpoint."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.core import columns as C
from offlinerl.core.policy_mapping import UnmappedAgentError
from offlinerl.data.offline_data import MODULE_COLUMN, OfflineData, row_module_ids
from offlinerl.episodes import SingleAgentEpisode, load_episodes, write_dataset
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import load_checkpoint

AGENTS = {"a0": (1.0, 0.0), "a1": (10.0, 5.0), "b0": (100.0, -50.0)}  # obs = scale * x + offset
EPISODES, STEPS = 6, 10  # per agent: 60 transitions
BY_PREFIX = {"a*": "a", "b*": "b"}


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(EPISODES):
        for agent, (scale, offset) in AGENTS.items():
            x = rng.normal(size=(STEPS + 1, 2)).astype(np.float32)
            episodes.append(SingleAgentEpisode(f"ep{i}", obs=x * scale + offset, actions=(x[:-1, 0] > 0).astype(np.int64),
                                               rewards=np.ones(STEPS), terminated=True, agent_id=agent))
    path = tmp_path_factory.mktemp("trio") / "data"
    write_dataset(episodes, path, observation_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                  action_space=gym.spaces.Discrete(2), rows_per_file=5)  # 4 files
    return path


def _config(mapping, mode: str = "in_memory", **kw) -> BCConfig:
    return BCConfig.from_dict({"policy_mapping": mapping, "normalize_observations": True, "train_batch_size": 8,
                               "updates_per_iteration": 5, "model": {"hidden": [8]}, "evaluation": {"interval": 0},
                               "data": {"mode": mode}, **kw})


def _raw_obs(path, agents) -> np.ndarray:
    """The observations before each step of these agents' rows, in the dataset's row order."""
    return np.concatenate([e.obs[:-1] for e in load_episodes(path) if e.agent_id in agents]).astype(np.float64)


def _assert_stats(stats, raw: np.ndarray) -> None:
    assert stats["count"] == len(raw)
    np.testing.assert_allclose(stats["mean"], raw.mean(0), rtol=1e-10)
    np.testing.assert_allclose(stats["var"], raw.var(0), rtol=1e-8)


def test_without_a_mapping_each_agent_is_a_module(trio):
    assert OfflineData(trio, BCConfig()).module_ids == ["a0", "a1", "b0"]


def test_one_shared_module_trains_on_every_row_with_every_rows_statistics(ray_session, trio):
    import ray

    raw = _raw_obs(trio, AGENTS)
    assert len(raw) == 3 * EPISODES * STEPS
    for mapping in ("shared", {"*": "shared"}):
        data = OfflineData(trio, _config(mapping))
        assert data.module_ids == ["shared"] and not data.multi_module
        arrays = data.load_arrays()
        assert len(arrays[C.OBS]) == len(raw) and MODULE_COLUMN not in arrays
        state = data.connector_state()  # one module: keyed by connector, as a single-agent job's
        _assert_stats(state["NormalizeObservations"], raw)
        expected = np.clip((raw - raw.mean(0)) / np.sqrt(raw.var(0) + 1e-8), -10, 10)
        np.testing.assert_allclose(arrays[C.OBS], expected, rtol=1e-4, atol=1e-5)
        streaming = OfflineData(trio, _config(mapping, "streaming"))
        streaming.fit_normalizer_streaming()
        _assert_stats(streaming.connector_state()["NormalizeObservations"], raw)
        assert streaming.transitions().count() == len(raw)
    # the batches are the shared module's, in memory (over two learners) and streaming
    specs = data.source_specs(2, batch_size=8, seed=0)
    assert [s.module_id for s in specs] == ["shared"] * 2
    assert [len(ray.get(s.arrays)[C.OBS]) for s in specs] == [90, 90]
    assert list(specs[1].build(torch.device("cpu")).next_batch()) == ["shared"]
    source = streaming.source_specs(1, batch_size=8, seed=0)[0].build(torch.device("cpu"))
    try:
        batch = source.next_batch()
        assert list(batch) == ["shared"] and batch["shared"][C.OBS].shape == (8, 2)
    finally:
        source.close()
    algo = Algorithm("bc", _config("shared", "streaming"), trio)
    try:
        assert algo.train()["learner/updates"] == 5 and algo.eval_module.keys() == ["shared"]
    finally:
        algo.stop()


def test_patterns_route_each_agents_rows_to_its_module_in_every_mode(ray_session, trio):
    import ray

    data = OfflineData(trio, _config(BY_PREFIX))
    assert data.module_ids == ["a", "b"] and data.multi_module
    arrays = data.load_arrays()
    modules, counts = np.unique(arrays[MODULE_COLUMN], return_counts=True)
    assert modules.tolist() == ["a", "b"] and counts.tolist() == [2 * EPISODES * STEPS, EPISODES * STEPS]
    local = OfflineData(trio, _config(BY_PREFIX), use_ray=False).load_arrays()  # the Ray-free read: the same rows
    np.testing.assert_array_equal(local[MODULE_COLUMN], arrays[MODULE_COLUMN])
    state = data.connector_state()
    assert sorted(state) == ["a", "b"]
    _assert_stats(state["a"]["NormalizeObservations"], _raw_obs(trio, {"a0", "a1"}))
    _assert_stats(state["b"]["NormalizeObservations"], _raw_obs(trio, {"b0"}))
    # two learners: each holds half of each module's transitions
    shards = [ray.get(s.per_module) for s in data.source_specs(2, batch_size=8, seed=0)]
    assert [{m: len(shard[m][C.OBS]) for m in shard} for shard in shards] == [{"a": 60, "b": 30}] * 2
    # streaming: a stream per mapped module, and the statistics fitted per mapped module
    streaming = OfflineData(trio, _config(BY_PREFIX, "streaming"))
    assert streaming.module_ids == ["a", "b"]
    streaming.fit_normalizer_streaming()
    assert [streaming.transitions(module_id=m).count() for m in ("a", "b")] == [120, 60]
    for m in ("a", "b"):
        got, want = streaming.connector_state()[m]["NormalizeObservations"], state[m]["NormalizeObservations"]
        assert got["count"] == want["count"]
        np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-10)
        np.testing.assert_allclose(got["var"], want["var"], rtol=1e-8)
    import pyarrow.parquet as pq
    from offlinerl.episodes import parquet_files

    table = pq.read_table(parquet_files(trio)[0])
    assert row_module_ids(table, BY_PREFIX).tolist() == ["a" if a.startswith("a") else "b"
                                                        for a in table.column("agent_id").to_pylist()]


def test_an_agent_no_pattern_matches_is_refused_by_name(trio):
    with pytest.raises(UnmappedAgentError, match=r"^policy_mapping: the agent 'b0' matches none of the patterns "
                                                 r"\['a\*'\]"):
        OfflineData(trio, _config({"a*": "a"}))
    assert OfflineData(trio, _config({"a0": "lead", "*": "rest"})).module_ids == ["lead", "rest"]


def test_a_checkpoint_restores_the_mapping(ray_session, trio, tmp_path):
    mapping = {"b*": "b", "*": "a"}  # in this order: "*" first would map every agent to a
    algo = Algorithm("bc", _config(mapping), trio)
    try:
        algo.train()
        assert [algo.eval_module.module_for_agent(a) for a in AGENTS] == ["a", "a", "b"]
        path = algo.save_checkpoint(tmp_path / "ckpt")
    finally:
        algo.stop()
    ckpt = load_checkpoint(path)
    assert ckpt.config.policy_mapping == mapping and list(ckpt.config.policy_mapping) == ["b*", "*"]
    assert ckpt.module_ids == ["a", "b"]
    module = ckpt.module_spec().build()
    assert module.module_for_agent("a1") == "a" and module.module_for_agent("b0") == "b"
    assert sorted(ckpt.connector_state) == ["a", "b"]
    restored = Algorithm.from_checkpoint(path)
    try:
        assert restored.offline_data.module_ids == ["a", "b"]
        assert restored.offline_data.connector_state() == ckpt.connector_state
    finally:
        restored.stop()


def test_online_experience_refuses_a_mapping(trio):
    from offlinerl.config_io import ConfigError
    from offlinerl.training.online_config import OnlineConfig
    from offlinerl.training.setup import check_online_env

    config = _config("shared")
    with pytest.raises(ConfigError, match="^policy_mapping: maps the agents of a multi-agent env"):
        check_online_env(config, OnlineConfig(env="CartPole-v1"), OfflineData(trio, config), str(trio))
