"""Multi-agent data at scale (issue 25): per-module observation statistics, streaming, several DDP learners, and
checkpoints of per-module connector state.

The dataset: two agents of one team, written with ``write_dataset`` (rows with ``agent_id`` "a0"/"a1"). Each
agent's action is a deterministic function of its observation, and agent a1 observes ``100 x + 50`` where a0
observes ``x``: one normalisation for both would leave one of them badly scaled.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.algorithms.bc import BCConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.data.offline_data import MODULE_COLUMN, OfflineData
from offlinerl.data.sources import MultiModuleInMemorySpec, MultiModuleSource, MultiModuleSpec, StreamingSource, StreamingSpec
from offlinerl.env.policies import act
from offlinerl.episodes import SingleAgentEpisode, load_episodes, write_dataset
from offlinerl.evaluation.policy import load_policy
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import CheckpointError, load_checkpoint

AGENTS = {"a0": (1.0, 0.0), "a1": (100.0, 50.0)}  # obs = scale * x + offset
EPISODES, STEPS = 40, 200  # per agent: 8,000 transitions (streaming: an epoch restart every 62-125 updates, not every 15-31)


def _label(agent: str, x: np.ndarray) -> np.ndarray:
    """The agent's action: the sign of its own feature of the unscaled observation (a0: x[0], a1: x[1])."""
    return (x[:, 0 if agent == "a0" else 1] > 0).astype(np.int64)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    rng = np.random.default_rng(0)
    episodes = []
    for i in range(EPISODES):
        for agent, (scale, offset) in AGENTS.items():
            x = rng.normal(size=(STEPS + 1, 2)).astype(np.float32)
            episodes.append(SingleAgentEpisode(f"ep{i}", obs=x * scale + offset, actions=_label(agent, x[:-1]),
                                               rewards=np.ones(STEPS), terminated=True, agent_id=agent))
    path = tmp_path_factory.mktemp("team") / "data"
    write_dataset(episodes, path, observation_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                  action_space=gym.spaces.Discrete(2), rows_per_file=16)  # 5 files
    return path


def _raw_obs(path, agent: str) -> np.ndarray:
    """The agent's observations before each step, in the dataset's row order (the order in-memory mode reads)."""
    return np.concatenate([e.obs[:-1] for e in load_episodes(path) if e.agent_id == agent]).astype(np.float64)


def _config(mode: str = "in_memory", algorithm: str = "bc", **kw) -> AlgorithmConfig:
    lrs = {"lr": 3e-3} if algorithm == "bc" else {"actor_lr": 3e-3, "critic_lr": 3e-3, "value_lr": 3e-3}
    cls = BCConfig if algorithm == "bc" else IQLConfig
    return cls.from_dict({"updates_per_iteration": 100, "train_batch_size": 64, **lrs,
                          "model": {"hidden": [32]}, "normalize_observations": True,
                          "evaluation": {"interval": 0}, "num_cpus_per_learner": 0.5,
                          "data": {"mode": mode, "shuffle_buffer_size": 256}, **kw})


def _accuracy(algo: Algorithm, agent: str) -> float:
    """Share of fresh observations on which the trained module, through its own env-to-module pipeline (its
    statistics), takes the agent's action."""
    x = np.random.default_rng(1).normal(size=(1000, 2)).astype(np.float32)
    scale, offset = AGENTS[agent]
    data = algo.offline_data
    out = act(algo.eval_module[agent], data.env_to_module_pipeline(agent), module_to_env_pipeline(data.action_space),
              x * scale + offset)
    return float((out[C.ACTIONS] == _label(agent, x)).mean())


def _train(path, config: AlgorithmConfig, iterations: int = 3) -> tuple[dict[str, float], dict[str, float], Algorithm]:
    """Final metrics, each agent's accuracy, and the algorithm (stopped by the caller)."""
    algo = Algorithm("bc" if isinstance(config, BCConfig) else "iql", config, path)
    for _ in range(iterations):
        metrics = algo.train()
    return metrics, {a: _accuracy(algo, a) for a in AGENTS}, algo


# -- (a) per-module statistics ---------------------------------------------------------------------------------
def test_each_module_normalises_with_its_own_agents_mean_and_std(ray_session, team):
    data = OfflineData(team, _config())
    assert data.module_ids == ["a0", "a1"] and data.multi_module
    arrays = data.load_arrays()
    state = data.connector_state()
    assert sorted(state) == ["a0", "a1"]
    for agent in AGENTS:
        raw = _raw_obs(team, agent)
        stats = state[agent]["NormalizeObservations"]
        assert stats["count"] == EPISODES * STEPS == len(raw)
        np.testing.assert_allclose(stats["mean"], raw.mean(0), rtol=1e-10)
        np.testing.assert_allclose(stats["var"], raw.var(0), rtol=1e-8)
        expected = np.clip((raw - raw.mean(0)) / np.sqrt(raw.var(0) + 1e-8), -10, 10)
        rows = arrays[MODULE_COLUMN] == agent
        np.testing.assert_allclose(arrays[C.OBS][rows], expected, rtol=1e-4, atol=1e-5)
        assert abs(arrays[C.OBS][rows].mean()) < 1e-5 and abs(arrays[C.OBS][rows].std() - 1) < 1e-3
        # the acting side gets the same statistics, module by module
        acting = data.env_to_module_pipeline(agent)({C.OBS: raw[:5].astype(np.float32)})[C.OBS]
        np.testing.assert_allclose(acting, expected[:5], rtol=1e-4, atol=1e-5)
    assert state["a1"]["NormalizeObservations"]["mean"][0] > 45 > abs(state["a0"]["NormalizeObservations"]["mean"][0])
    with pytest.raises(ValueError, match=r"trains the modules \['a0', 'a1'\]; name one"):
        data.env_to_module_pipeline()

    streaming = OfflineData(team, _config("streaming"))
    streaming.fit_normalizer_streaming(local=False)  # one pass, one Ray task per row group, merged per module
    for agent in AGENTS:
        got, want = streaming.connector_state()[agent]["NormalizeObservations"], state[agent]["NormalizeObservations"]
        assert got["count"] == want["count"]
        np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-10)
        np.testing.assert_allclose(got["var"], want["var"], rtol=1e-8)


# -- sources -------------------------------------------------------------------------------------------------
def test_several_learners_hold_disjoint_shards_of_every_module(ray_session, team):
    import ray

    data = OfflineData(team, _config())
    arrays = data.load_arrays()
    specs = data.source_specs(2, batch_size=8, seed=3)
    assert [type(s) for s in specs] == [MultiModuleInMemorySpec] * 2 and [s.seed for s in specs] == [3, 5]
    shards = [ray.get(s.per_module) for s in specs]
    for agent in AGENTS:
        rows = np.sort(arrays[C.OBS][arrays[MODULE_COLUMN] == agent][:, 0])
        parts = [shard[agent][C.OBS][:, 0] for shard in shards]
        assert [len(p) for p in parts] == [EPISODES * STEPS // 2] * 2
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), rows)  # every transition in exactly one shard
    batch = specs[1].build(torch.device("cpu")).next_batch()
    assert sorted(batch) == ["a0", "a1"] and batch["a1"][C.OBS].shape == (8, 2) and MODULE_COLUMN not in batch["a1"]


def test_streaming_serves_each_module_from_its_own_stream_once_per_epoch(ray_session):
    import ray.data

    streams = {m: ray.data.from_items([{"x": i + 1000 * j} for i in range(n)], override_num_blocks=3)
               for j, (m, n) in enumerate({"a0": 100, "a1": 40}.items())}  # unequal shares
    source = MultiModuleSpec({m: StreamingSpec(ds, 10, 20, 1, seed=j, module_id=m)
                              for j, (m, ds) in enumerate(streams.items())}).build(torch.device("cpu"))
    assert isinstance(source, MultiModuleSource)
    served = [source.next_batch() for _ in range(10)]
    a0 = torch.cat([b["a0"]["x"] for b in served]).tolist()
    a1 = torch.cat([b["a1"]["x"] for b in served]).tolist()
    assert sorted(a0) == list(range(100)) and source.sources["a0"].epoch == 1  # a0's epoch: each transition once
    # a1, with fewer transitions, is served as many: two whole epochs and half of a third, its own rows only
    counts = np.bincount(np.array(a1) - 1000)
    assert len(a1) == 100 and len(counts) == 40 and sorted(counts) == [2] * 20 + [3] * 20
    assert source.sources["a1"].epoch == 3
    for m in ("a0", "a1"):
        assert all(sorted(b) == ["a0", "a1"] and len(b[m]["x"]) == 10 for b in served)
    source.close()


def test_every_epoch_is_the_same_number_of_batches_whatever_the_blocks(ray_session):
    """Learners with equal shards (``streaming_split(equal=True)``, per module) but different blocks must start each
    epoch on the same update: Ray Data's split waits for every learner there, while the learners that got there
    first would otherwise wait for it in DDP's all-reduce."""
    import ray.data

    starts = []
    for blocks in (3, 7, 16):
        ds = ray.data.from_items([{"x": i} for i in range(1000)], override_num_blocks=blocks)
        source = StreamingSource(ds, batch_size=64, shuffle_buffer_size=256, prefetch_batches=1, seed=0)
        epochs = []
        for _ in range(50):
            source.next_batch()
            epochs.append(source.epoch)
        source.close()
        starts.append([i for i in range(1, 50) if epochs[i] != epochs[i - 1]])
    assert starts == [[15, 30, 45]] * 3  # 1000 // 64 = 15 batches an epoch; the 40 rows left are dropped


# -- (b) streaming and in-memory ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["bc", "iql"])
def test_streaming_and_in_memory_train_the_same_modules_to_the_same_outcome(ray_session, team, algorithm):
    """IQL's actor loss is BC's weighted by exp(beta * advantage): with a reward of 1 on every step, about BC's."""
    outcomes = {}
    for mode in ("in_memory", "streaming"):
        metrics, accuracy, algo = _train(team, _config(mode, algorithm))
        try:
            assert algo.offline_data.mode == mode and sorted(algo.eval_module.keys()) == ["a0", "a1"]
        finally:
            algo.stop()
        outcomes[mode] = (metrics, accuracy)
    for mode, (metrics, accuracy) in outcomes.items():
        assert metrics["learner/updates"] == 300
        for agent in AGENTS:
            assert metrics[f"{agent}/losses/actor"] < 0.1, (mode, agent, metrics)
            assert accuracy[agent] >= 0.97, (mode, agent, accuracy)
    for agent in AGENTS:
        loss = [outcomes[m][0][f"{agent}/losses/actor"] for m in ("in_memory", "streaming")]
        assert abs(loss[0] - loss[1]) < 0.03, (agent, loss)


# -- (c) several learners -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["in_memory", "streaming"])
def test_two_ddp_learners_reach_what_one_learner_reaches(ray_session, team, mode):
    one, one_accuracy, algo = _train(team, _config(mode))
    algo.stop()
    two, two_accuracy, algo = _train(team, _config(mode, num_learners=2))
    try:
        w0, w1 = algo.learner_group.get_all_weights()
        assert sorted({k.split(".")[1] for k in w0}) == ["a0", "a1"]
        assert all(torch.equal(w0[k], w1[k]) for k in w0)  # DDP: the replicas hold identical weights
    finally:
        algo.stop()
    for agent in AGENTS:
        assert one_accuracy[agent] >= 0.97 and two_accuracy[agent] >= 0.97, (one_accuracy, two_accuracy)
        loss = (one[f"{agent}/losses/actor"], two[f"{agent}/losses/actor"])
        assert max(loss) < 0.1 and abs(loss[0] - loss[1]) < 0.03, (agent, loss)


# -- (d) checkpoints ----------------------------------------------------------------------------------------
def test_a_checkpoint_saves_and_restores_every_modules_connector_state(ray_session, team, tmp_path):
    config = _config(updates_per_iteration=20)
    algo = Algorithm("bc", config, team)
    try:
        algo.train()
        saved = algo.offline_data.connector_state()
        path = algo.save_checkpoint(tmp_path / "ckpt")
        weights = algo.learner_group.get_weights()
        x = np.random.default_rng(2).normal(size=(6, 2)).astype(np.float32)
        expected = {a: act(algo.eval_module[a], algo.offline_data.env_to_module_pipeline(a),
                           module_to_env_pipeline(algo.offline_data.action_space), x * s + o)[C.ACTIONS]
                    for a, (s, o) in AGENTS.items()}
    finally:
        algo.stop()
    assert algo.env_to_module is None  # several modules: each its own (offline_data.env_to_module_pipeline)
    meta = json.loads((path / "algorithm.json").read_text())
    assert meta["connector_state"] == saved and sorted(saved) == ["a0", "a1"]

    ckpt = load_checkpoint(path)
    assert ckpt.connector_state == saved
    assert ckpt.module_connector_state("a1") == saved["a1"]
    for agent, (scale, offset) in AGENTS.items():
        obs = (x * scale + offset).astype(np.float32)
        ours = algo.offline_data.env_to_module_pipeline(agent)({C.OBS: obs.copy()})[C.OBS]
        np.testing.assert_array_equal(ckpt.env_to_module(agent)({C.OBS: obs.copy()})[C.OBS], ours)
        np.testing.assert_array_equal(load_policy(path, agent).predict(obs), expected[agent])
    with pytest.raises(ValueError, match="choose one with module_id"):
        ckpt.env_to_module()

    restored = Algorithm.from_checkpoint(path)
    try:
        assert restored.offline_data.connector_state() == saved
        assert all(torch.equal(v, restored.learner_group.get_weights()[k]) for k, v in weights.items())
        restored.train()  # the restored statistics are the ones it trains with: not fitted again
        assert restored.offline_data.connector_state() == saved
    finally:
        restored.stop()


def test_checkpoint_checks_each_modules_statistics_and_takes_a_shared_state(ray_session, team, tmp_path):
    algo = Algorithm("bc", _config(updates_per_iteration=5), team)
    try:
        algo.train()
        path = algo.save_checkpoint(tmp_path / "ckpt")
        state = algo.offline_data.connector_state()
        # one state for every module (multi-module checkpoints written before statistics were per module)
        algo.offline_data.set_connector_state(state["a1"])
        assert algo.offline_data.connector_state() == {"a0": state["a1"], "a1": state["a1"]}
    finally:
        algo.stop()
    file = path / "algorithm.json"
    meta = json.loads(file.read_text())
    meta["connector_state"]["a1"]["NormalizeObservations"]["var"][0] = -1.0
    file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"connector_state\.a1\.NormalizeObservations\.var\[0\] is -1\.0"):
        load_checkpoint(path)
    meta["connector_state"] = {"a0": state["a0"], "a2": state["a1"]}
    file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"connector_state\.a2: no module of that name"):
        load_checkpoint(path)
