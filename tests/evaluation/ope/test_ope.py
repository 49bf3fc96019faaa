"""FQE on chain MDPs with known values, and OPE end to end from checkpoints on collected datasets."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.env.collect import CollectConfig, collect
from offlinerl.evaluation.ope.data import load_ope_episodes
from offlinerl.evaluation.ope.estimators import discounted_returns, pad_episodes
from offlinerl.evaluation.ope.fqe import FQEConfig, FQEData, fit_fqe
from offlinerl.evaluation.ope.run import OPEConfig, ope_checkpoints
from tests.export.test_export_policy import write_untrained_checkpoint

FAST = FQEConfig(num_updates=600, target_update_interval=10, batch_size=64, hidden=(32, 32), lr=3e-3)
CARTPOLE = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))


def _chain(num_states: int, actions: torch.Tensor, rewards: torch.Tensor, next_actions: torch.Tensor) -> FQEData:
    """States 0..n−1 one-hot; every step moves right; the last transition terminates."""
    eye = torch.eye(num_states + 1)
    s = torch.arange(num_states).repeat_interleave(len(actions) // num_states)
    return FQEData(obs=eye[s], actions=actions, rewards=rewards, next_obs=eye[s + 1],
                   terminateds=(s == num_states - 1).float(), next_actions=next_actions,
                   next_weights=torch.ones(len(s), next_actions.shape[1]))


def test_fqe_recovers_a_discrete_chain_value():
    # 3 states, actions 0/1 both recorded in each; r = 1 for action 0, 0 for action 1; π always picks 0.
    # Q(s2, 0) = 1, Q(s1, 0) = 1 + .9, Q(s0, 0) = 1 + .9 + .81 = 2.71;  Q(s0, 1) = 0 + .9·1.9 = 1.71
    actions = torch.tensor([0, 1] * 3)
    data = _chain(3, actions, (actions == 0).float(), torch.zeros(6, 1, dtype=torch.int64))
    q, metrics = fit_fqe(data, gym.spaces.Discrete(2), 0.9, FAST)
    s0 = torch.eye(4)[:1]
    assert q(s0, torch.tensor([0])).item() == pytest.approx(2.71, abs=0.1)
    assert q(s0, torch.tensor([1])).item() == pytest.approx(1.71, abs=0.1)
    assert metrics["fqe/updates"] == 600


def test_fqe_recovers_a_continuous_chain_value():
    # 2 states, reward = a (actions in [−1, 1]), π(s) = .5:  V(s0) = .5 + .9·.5 = .95
    actions = torch.tensor([[-1.0], [-0.5], [0.0], [0.5], [1.0]] * 2)
    data = _chain(2, actions, actions[:, 0], torch.full((10, 1, 1), 0.5))
    q, _ = fit_fqe(data, gym.spaces.Box(-1.0, 1.0, (1,), np.float32), 0.9, FAST)
    assert q(torch.eye(3)[:1], torch.tensor([[0.5]])).item() == pytest.approx(0.95, abs=0.1)


def test_fqe_config_names_bad_fields():
    with pytest.raises(ValueError, match="target_update_interval"):
        FQEConfig(target_update_interval=0)
    with pytest.raises(ValueError, match="methods"):
        OPEConfig(methods=("fqe", "magic"))


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """A random-policy CartPole dataset (exact action_logp = log ½) and a BC checkpoint whose policy is uniform."""
    root = tmp_path_factory.mktemp("ope")
    collect(CollectConfig(env="CartPole-v1", output=str(root / "data"), num_episodes=12, seed=3), progress=False)
    ckpt = write_untrained_checkpoint(root / "uniform", *CARTPOLE, "bc", False)
    state = torch.load(ckpt / "learner_group.pt", weights_only=True)
    module = state["learners"][0]["learner"]["module"]
    for key in [k for k in module if "pi_head" in k]:
        module[key] = torch.zeros_like(module[key])  # logits 0: π(a|s) = ½ = μ(a|s)
    from offlinerl.training.checkpoint import load_checkpoint, write_checkpoint
    meta = {k: v for k, v in load_checkpoint(ckpt).meta.to_json().items()
            if k not in ("format", "format_version", "files")}
    write_checkpoint(ckpt, state, meta, overwrite=True)
    return root / "data", ckpt, write_untrained_checkpoint(root / "random-bc", *CARTPOLE, "bc", True)


def test_ope_on_policy_is_family_equals_the_mean_return(cartpole):
    data_path, uniform, _ = cartpole
    config = OPEConfig(fqe=FAST, num_resamples=100)
    report = ope_checkpoints([uniform], data_path, config)
    data = load_ope_episodes(data_path)
    r, mask = pad_episodes(data.rewards, data.episode_lengths)
    mean_return = discounted_returns(r, mask, 0.99).mean()
    rows = {row["method"]: row for row in report["results"][0]["methods"]}
    assert list(rows) == ["fqe", "is", "wis", "pdis", "dr"]
    for m in ("is", "wis", "pdis"):
        assert rows[m]["estimate"] == pytest.approx(mean_return)
        assert rows[m]["ess"] == pytest.approx(12.0)
        assert rows[m]["ci_low"] <= rows[m]["estimate"] <= rows[m]["ci_high"]
    assert rows["dr"]["estimate"] == pytest.approx(mean_return, rel=0.25)  # Q̂ only a control variate here
    assert rows["fqe"]["episodes"] == 12 and np.isfinite(rows["fqe"]["estimate"])
    assert report["episodes"] == 12 and report["steps"] == int(data.episode_lengths.sum())
    json.dumps(report, allow_nan=False)


def test_ope_refuses_the_is_family_with_a_reason(cartpole, tmp_path):
    data_path, _, random_bc = cartpole
    report = ope_checkpoints([random_bc], data_path, OPEConfig(methods=("is", "dr"), fqe=FAST, num_resamples=10))
    assert [r["method"] for r in report["results"][0]["methods"]] == ["is", "dr"]
    assert all(r["estimate"] is not None for r in report["results"][0]["methods"])
    pend = collect(CollectConfig(env="Pendulum-v1", output=str(tmp_path / "p"), num_episodes=1, seed=0,
                                 max_episode_steps=20), progress=False)
    td3 = write_untrained_checkpoint(tmp_path / "td3", pend.observation_space, pend.action_space, "td3bc", True)
    rows = ope_checkpoints([td3], tmp_path / "p", OPEConfig(methods=("fqe", "wis"), fqe=FAST))["results"][0]["methods"]
    assert rows[0]["method"] == "fqe" and rows[0]["estimate"] is not None
    assert rows[1]["estimate"] is None and "deterministic" in rows[1]["skipped"]


def test_ope_refuses_mismatched_spaces(cartpole, tmp_path):
    data_path, _, _ = cartpole
    other = write_untrained_checkpoint(tmp_path / "c", gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
                                       gym.spaces.Discrete(2), "bc", False)
    with pytest.raises(ValueError, match=r"observation space: shape \(3,\) expected, the dataset has \(4,\)"):
        ope_checkpoints([other], data_path)
