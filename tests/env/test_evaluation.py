"""The one evaluation loop: offline (``evaluate_module``) and online (``EnvRunnerGroup.evaluate``) evaluation
give the same episodes, whatever the number of envs acting side by side."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.connectors import ConnectorPipeline, FlattenObservations
from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup, evaluate_module, run_episodes


class LinearPendulumPolicy(torch.nn.Module):
    """A fixed, state-dependent continuous policy: a return depends on every action of its episode."""

    def __init__(self, observation_space=None, action_space=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([[-1.3, 0.4, -0.25]]), requires_grad=False)

    def forward_inference(self, batch):
        return {"actions": 2.0 * torch.tanh(batch["obs"].float() @ self.weight.T)}

    forward_exploration = forward_inference


#: Returns of the same episodes acted on in batches of different sizes are not bit-equal: the float32 policy may
#: round a row differently with the batch's shape and memory alignment (BLAS kernels), and 50 steps carry that on
#: (a CI run differed by 9e-10 relative, 5 envs against 1). Another seed's or a mixed-up episode differs by
#: whole units of return, so this still catches both.
BATCH_RTOL = 1e-6


def _plain_returns(seeds: list[int]) -> list[float]:
    """One env per episode, stepped alone: what every evaluation must reproduce."""
    policy, out = LinearPendulumPolicy(), []
    for seed in seeds:
        env = gym.make("Pendulum-v1", max_episode_steps=50)
        obs, _ = env.reset(seed=seed)
        ret, done = 0.0, False
        while not done:
            with torch.no_grad():
                action = policy.forward_inference({"obs": torch.as_tensor(obs[None])})["actions"][0].numpy()
            obs, r, term, trunc, _ = env.step(action)
            ret, done = ret + float(r), term or trunc
        out.append(ret)
    return out


@pytest.mark.parametrize("num_envs", [1, 2, 5])
def test_run_episodes_gives_each_seed_its_own_episode_whatever_the_number_of_envs(num_envs):
    seeds = [7, 8, 9, 10, 11]
    policy = LinearPendulumPolicy()
    envs = [gym.make("Pendulum-v1", max_episode_steps=50) for _ in range(num_envs)]
    with torch.no_grad():
        returns, lengths = run_episodes(
            envs, lambda obs: policy.forward_inference({"obs": torch.as_tensor(obs)})["actions"].numpy(), seeds)
    assert lengths == [50] * 5
    np.testing.assert_allclose(returns, _plain_returns(seeds), rtol=BATCH_RTOL)


def test_offline_and_online_evaluation_give_the_same_numbers():
    space = gym.make("Pendulum-v1").observation_space
    offline = evaluate_module(LinearPendulumPolicy(), "Pendulum-v1", ConnectorPipeline([FlattenObservations(space)]),
                              episodes=4, seed=3, env_kwargs={"max_episode_steps": 50}, max_parallel=3)
    group = EnvRunnerGroup(EnvRunnerConfig(env="Pendulum-v1", num_envs=2, seed=0, max_episode_steps=50),
                           LinearPendulumPolicy)
    try:
        group.sample(num_timesteps=10)  # evaluation leaves sampling alone and is not affected by it
        online = group.evaluate(num_episodes=4, seed=3)
    finally:
        group.stop()
    assert online == pytest.approx(offline, rel=BATCH_RTOL)
    assert offline["eval/episodes"] == 4
    assert offline["eval/return_mean"] == pytest.approx(np.mean(_plain_returns([3, 4, 5, 6])), rel=BATCH_RTOL)


def test_evaluate_module_refuses_zero_episodes():
    space = gym.make("Pendulum-v1").observation_space
    with pytest.raises(ValueError, match="episodes must be between 1 and 1,000,000, got 0"):
        evaluate_module(LinearPendulumPolicy(), "Pendulum-v1", ConnectorPipeline([FlattenObservations(space)]),
                        episodes=0)
