"""EnvRunnerGroup on a real local Ray: splitting work, syncing state, surviving a killed runner."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.env import EnvRunnerConfig, EnvRunnerGroup


class SlowCartPole(gym.Wrapper):
    """CartPole that takes 2 ms per step, so a sample call is still running when the test kills it."""

    def step(self, action):
        time.sleep(0.002)
        return self.env.step(action)


def make_slow_cartpole() -> gym.Env:
    return SlowCartPole(gym.make("CartPole-v1"))


class ConstantPolicy(torch.nn.Module):
    """Acts with the action stored in its single weight (to see syncing)."""

    def __init__(self, observation_space, action_space):
        super().__init__()
        self.action = torch.nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward_inference(self, batch):
        return {"actions": self.action.long().expand(batch["obs"].shape[0])}

    forward_exploration = forward_inference


def test_local_group_samples_and_evaluates_reproducibly():
    group = EnvRunnerGroup(EnvRunnerConfig(env="CartPole-v1", num_envs=2, seed=0), num_env_runners=0)
    episodes = group.sample(num_timesteps=64)
    assert sum(len(e) for e in episodes) >= 64
    metrics = group.get_metrics()
    assert metrics["env_runners/num_env_steps"] == sum(len(e) for e in episodes)
    assert metrics["env_runners/num_restarts"] == 0
    group.stop()
    # Evaluation: episode j starts from seed + j, whatever the vector width, and matches
    # a plain loop over single envs.
    expected = []
    for j in range(5):
        env = gym.make("CartPole-v1")
        env.reset(seed=11 + j)
        ret, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(1)
            ret, done = ret + r, term or trunc
        expected.append(ret)
    for num_envs in (1, 3):
        group = EnvRunnerGroup(EnvRunnerConfig(env="CartPole-v1", num_envs=num_envs, seed=0), ConstantPolicy)
        group.sync_state({"policy": {"action": torch.tensor(1.0)}})
        group.sample(num_timesteps=10)
        a = group.evaluate(num_episodes=5, seed=11)
        assert a["eval/episodes"] == 5
        assert a["eval/return_mean"] == pytest.approx(np.mean(expected), abs=1e-9)
        assert a["eval/return_min"] == min(expected) and a["eval/return_max"] == max(expected)
        assert group.evaluate(num_episodes=5, seed=11) == a
        group.stop()


def test_remote_runners_split_the_work_and_receive_weights(ray_session):
    config = EnvRunnerConfig(env="CartPole-v1", num_envs=2, seed=0, record_weights_seq_no=True)
    group = EnvRunnerGroup(config, ConstantPolicy, num_env_runners=2, num_cpus_per_env_runner=0.5)
    try:
        group.sync_state({"policy": {"action": torch.tensor(1.0)}, "weights_seq_no": 3})
        episodes = group.sample(num_episodes=5)
        assert len(episodes) == 5 and all(e.terminated or e.truncated for e in episodes)
        assert {e.id.split("-")[1] for e in episodes} == {"w1", "w2"}
        for e in episodes:
            assert np.all(e.actions == 1)
            np.testing.assert_array_equal(e.extras["weights_seq_no"], 3)
        chunks = group.sample(num_timesteps=40)
        assert sum(len(c) for c in chunks) >= 40
        # Remote evaluation splits the seeds over the runners and gives the same numbers as one runner.
        local = EnvRunnerGroup(EnvRunnerConfig(env="CartPole-v1", num_envs=3), ConstantPolicy)
        local.sync_state({"policy": {"action": torch.tensor(1.0)}})
        assert group.evaluate(num_episodes=5, seed=3) == local.evaluate(num_episodes=5, seed=3)
    finally:
        group.stop()


def test_a_killed_runner_is_replaced_and_the_iteration_completes(ray_session):
    import ray

    config = EnvRunnerConfig(env=make_slow_cartpole, num_envs=1, seed=0, record_weights_seq_no=True)
    group = EnvRunnerGroup(config, ConstantPolicy, num_env_runners=2, num_cpus_per_env_runner=0.5)
    try:
        group.sync_state({"policy": {"action": torch.tensor(1.0)}, "weights_seq_no": 7})
        group.sample(num_timesteps=2)  # both actors up
        victim = group._actors[0]
        result: dict = {}
        worker = threading.Thread(target=lambda: result.setdefault("episodes", group.sample(num_timesteps=1200)))
        worker.start()
        time.sleep(0.5)
        ray.kill(victim, no_restart=True)
        worker.join(timeout=60)
        assert not worker.is_alive()
        episodes = result["episodes"]
        # Both shares (600 steps each) were delivered, the killed one by its replacement.
        for w in ("w1", "w2"):
            assert sum(len(e) for e in episodes if f"-{w}-" in e.id) >= 600
        assert group.get_metrics()["env_runners/num_restarts"] == 1
        assert group._actors[0] is not victim
        # The replacement got the latest weights before sampling.
        assert all(np.all(e.actions == 1) and np.all(e.extras["weights_seq_no"] == 7) for e in episodes)

    finally:
        group.stop()


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_env_runners"):
        EnvRunnerGroup(EnvRunnerConfig(env="CartPole-v1"), num_env_runners=-1)
    with pytest.raises(ValueError, match="num_envs"):
        EnvRunnerConfig(env="CartPole-v1", num_envs=0)
