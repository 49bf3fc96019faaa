"""``share_encoder: true`` end to end: a two-agent dataset, one policy encoder, checkpoints, export, learning."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.bc import BCConfig
from offlinerl.algorithms.cql import CQLConfig
from offlinerl.algorithms.iql import IQLConfig
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.episodes import SingleAgentEpisode, write_dataset
from offlinerl.export import export_policy
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import load_checkpoint

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
BOX = gym.spaces.Box(-1, 1, (1,), np.float32)
#: Each agent's action, a deterministic function of its own observation (a different one per agent).
RULES = {"a0": lambda obs: (obs[:, 0] > 0).astype(np.int64), "a1": lambda obs: (obs[:, 1] < 0).astype(np.int64)}


def _two_agent_dataset(path, episodes=16, steps=25, seed=0, action_space=ACT):
    """Agents a0 and a1 in every episode; Box actions: the rule's 0/1 as -0.8/0.8."""
    rng = np.random.default_rng(seed)
    eps = []
    for i in range(episodes):
        for agent, rule in RULES.items():
            obs = rng.uniform(-1, 1, (steps + 1, 4)).astype(np.float32)
            actions = rule(obs[:-1])
            if isinstance(action_space, gym.spaces.Box):
                actions = (actions * 1.6 - 0.8).astype(np.float32)[:, None]
            eps.append(SingleAgentEpisode(f"ep{i}", obs=obs, actions=actions, rewards=rng.normal(size=steps),
                                          truncated=True, agent_id=agent))
    write_dataset(eps, path, observation_space=OBS, action_space=action_space)
    return path


def _config(cls=BCConfig, **over):
    return cls.from_dict({"share_encoder": True, "updates_per_iteration": 5, "train_batch_size": 32,
                          "model": {"hidden": [16, 16]}, "evaluation": {"interval": 0}, **over})


def _assert_shared(multi):
    assert multi["a0"].pi_encoder is multi["a1"].pi_encoder
    assert multi["a0"].pi_head is not multi["a1"].pi_head


def _equal_states(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("cls,action_space", [(BCConfig, ACT), (IQLConfig, ACT), (CQLConfig, BOX)])
def test_checkpoint_round_trip_keeps_one_encoder_and_resumes_exactly(cls, action_space, tmp_path):
    data = _two_agent_dataset(tmp_path / "data", action_space=action_space)
    algo = Algorithm(cls.__name__[:-6].lower(), _config(cls), data, use_ray=False)
    learner = algo.learner_group.local_learner
    _assert_shared(learner.module)
    _assert_shared(algo.eval_module)
    algo.train()
    path = algo.save_checkpoint(tmp_path / "ckpt")
    saved = {k: v.clone() for k, v in algo.learner_group.get_weights().items()}  # on the CPU: the live tensors
    assert torch.equal(saved["rl_modules.a0.pi_encoder.0.weight"], saved["rl_modules.a1.pi_encoder.0.weight"])
    before = copy.deepcopy(algo.learner_group.local_learner.get_state()["optimizers"])
    algo.train()  # what the resumed job must reproduce (before restoring: the torch RNG is this process's)
    continued = algo.learner_group.get_weights()
    algo.stop()

    ckpt = load_checkpoint(path)  # what acting, evaluation and export build
    for inference_only in (True, False):
        built = ckpt.build_module(inference_only=inference_only)
        _assert_shared(built)
        torch.testing.assert_close(built["a1"].pi_encoder[0].weight, saved["rl_modules.a0.pi_encoder.0.weight"],
                                   rtol=0, atol=0)

    restored = Algorithm.from_checkpoint(path, use_ray=False)  # sets the torch RNG: nothing else builds after it
    _assert_shared(restored.learner_group.local_learner.module)
    _assert_shared(restored.eval_module)
    _equal_states(restored.learner_group.get_weights(), saved)
    # the encoder's Adam moments live in a0's "actor" optimizer only, and came back
    opt_state = restored.learner_group.local_learner.get_state()["optimizers"]
    assert len(opt_state["a0/actor"]["state"]) == 6 and len(opt_state["a1/actor"]["state"]) == 2  # 2 encoder layers + head
    for key in ("a0/actor", "a1/actor"):
        for i, s in before[key]["state"].items():
            torch.testing.assert_close(opt_state[key]["state"][i]["exp_avg"], s["exp_avg"], rtol=0, atol=0)
    # resuming continues exactly as the job that wrote the checkpoint
    restored.train()
    _equal_states(restored.learner_group.get_weights(), continued)
    _assert_shared(restored.learner_group.local_learner.module)
    restored.stop()


def test_one_agent_policy_of_a_shared_checkpoint_exports(tmp_path):
    data = _two_agent_dataset(tmp_path / "data", episodes=4)
    algo = Algorithm("bc", _config(), data, use_ray=False)
    algo.train()
    path = algo.save_checkpoint(tmp_path / "ckpt")
    algo.stop()
    out = export_policy(path, tmp_path / "a1.pt", "torchscript", module_id="a1")
    obs = np.random.default_rng(1).uniform(-1, 1, (64, 4)).astype(np.float32)
    module = load_checkpoint(path).build_module(inference_only=True)["a1"]
    with torch.no_grad():
        want = module.forward_inference({C.OBS: torch.as_tensor(obs)})[C.ACTIONS].numpy()
        got = np.asarray(torch.jit.load(str(out))(torch.as_tensor(obs)))
    np.testing.assert_array_equal(got.reshape(-1), want)


def test_share_encoder_on_a_single_module_dataset_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (11, 4)).astype(np.float32)
    write_dataset([SingleAgentEpisode("ep0", obs=obs, actions=RULES["a0"](obs[:-1]), rewards=np.zeros(10))],
                  tmp_path / "single", observation_space=OBS, action_space=ACT)
    with pytest.raises(ConfigError, match="share_encoder: needs a multi-agent dataset"):
        Algorithm("bc", _config(), tmp_path / "single", use_ray=False)


def test_discrete_cql_has_no_policy_encoder_to_share(tmp_path):
    data = _two_agent_dataset(tmp_path / "data", episodes=2)
    with pytest.raises(ValueError, match=r"cannot share 'pi_encoder': module 'a0' \(CQLRLModule\) has no submodule"):
        Algorithm("cql", _config(CQLConfig), data, use_ray=False)


def test_two_agents_with_a_shared_encoder_learn_their_own_rules(tmp_path):
    data = _two_agent_dataset(tmp_path / "data", episodes=20)
    algo = Algorithm("bc", _config(updates_per_iteration=200, train_batch_size=64, lr=3e-3,
                                   model={"hidden": [32, 32]}), data, use_ray=False)
    for _ in range(4):
        algo.train()
    obs = np.random.default_rng(7).uniform(-1, 1, (2000, 4)).astype(np.float32)
    with torch.no_grad():
        out = algo.eval_module.forward_inference({a: {C.OBS: torch.as_tensor(obs)} for a in RULES})
    for agent, rule in RULES.items():
        accuracy = float((out[agent][C.ACTIONS].numpy() == rule(obs)).mean())
        assert accuracy >= 0.95, (agent, accuracy)
    algo.stop()
