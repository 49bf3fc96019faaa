"""EnvRunner against real gymnasium envs: what it records is exactly what the env did."""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.episodes import SingleAgentEpisode, batch_equal
from offlinerl.env import EnvRunner, EnvRunnerConfig, RandomPolicy, epsilon_mix, uniform_log_prob


def _slot(ep: SingleAgentEpisode) -> int:
    return int(ep.id.split("-e")[-1].split("-")[0])


def _ticket(ep: SingleAgentEpisode) -> int:
    return int(ep.id.rsplit("-", 1)[-1])


def _join(chunks: list[SingleAgentEpisode]) -> dict[str, SingleAgentEpisode]:
    by_id = defaultdict(list)
    for c in chunks:
        c.check()
        by_id[c.id].append(c)
    return {k: SingleAgentEpisode.concat(v) for k, v in by_id.items()}


def _replay(env_id: str, max_steps: int, seed: int, slot: int, episodes: list[SingleAgentEpisode]) -> None:
    """Replay a slot's episodes (in start order) in a fresh env and compare every value."""
    env = gym.make(env_id, max_episode_steps=max_steps)
    for k, ep in enumerate(episodes):
        obs, _ = env.reset(seed=seed + slot) if k == 0 else env.reset()
        assert np.array_equal(obs, ep.obs[0]), f"{ep.id}: first observation differs"
        for t in range(len(ep)):
            obs, reward, terminated, truncated, _ = env.step(ep.actions[t])
            assert np.array_equal(obs, ep.obs[t + 1]), f"{ep.id}: obs[{t + 1}] differs"
            assert np.float32(reward) == ep.rewards[t]
            last = t == len(ep) - 1
            if not last:
                assert not (terminated or truncated), f"{ep.id}: env ended at t={t} but the episode continues"
        if ep.terminated or ep.truncated:
            # The env may report both at the time limit; a terminal state wins (no bootstrap).
            assert (terminated, truncated and not terminated) == (ep.terminated, ep.truncated), ep.id
        else:  # still running when sampling stopped
            assert not (terminated or truncated)


@pytest.mark.parametrize(
    "vectorize_mode,autoreset_mode", [("sync", "next_step"), ("sync", "same_step"), ("async", "next_step")]
)
def test_recorded_episodes_replay_exactly(vectorize_mode, autoreset_mode):
    seed, max_steps = 3, 12
    config = EnvRunnerConfig(
        env="CartPole-v1", num_envs=3, seed=seed, max_episode_steps=max_steps,
        vectorize_mode=vectorize_mode, autoreset_mode=autoreset_mode,
    )
    runner = EnvRunner(config)
    chunks = []
    for n in (7, 25, 40, 5):  # several calls: running episodes are cut and continued
        chunks += runner.sample(num_timesteps=n)
    metrics = runner.get_metrics()
    runner.stop()
    assert sum(len(c) for c in chunks) == metrics["num_env_steps"]
    episodes = _join(chunks)
    per_slot = defaultdict(list)
    for ep in sorted(episodes.values(), key=_ticket):
        per_slot[_slot(ep)].append(ep)
    assert sorted(per_slot) == [0, 1, 2]
    for slot, eps in per_slot.items():
        _replay("CartPole-v1", max_steps, seed, slot, eps)
    # Both ways of ending occur and are kept apart (CartPole falls before 12 steps or is cut at 12).
    flags = {(e.terminated, e.truncated) for e in episodes.values()}
    assert (True, False) in flags and (False, True) in flags
    assert all(len(e) == max_steps for e in episodes.values() if e.truncated)
    assert all(len(e) <= max_steps for e in episodes.values())


def test_chunks_continue_across_calls():
    runner = EnvRunner(EnvRunnerConfig(env="Pendulum-v1", num_envs=2, seed=0, max_episode_steps=50))
    first = runner.sample(num_timesteps=30)  # 15 steps per env: two running chunks
    second = runner.sample(num_timesteps=30)
    assert [c.chunk_index for c in first] == [0, 0] and all(len(c) == 15 for c in first)
    for a in first:
        (b,) = [c for c in second if c.id == a.id]
        assert b.chunk_index == 1 and b.t_start == 15
        assert batch_equal(b.obs[:1], a.obs[-1:]), "a chunk starts where the previous one ended"
        assert not (a.terminated or a.truncated or b.terminated or b.truncated)


def test_num_episodes_returns_the_first_started_complete_episodes():
    runner = EnvRunner(EnvRunnerConfig(env="CartPole-v1", num_envs=4, seed=1, max_episode_steps=40))
    got = runner.sample(num_episodes=6)
    assert len(got) == 6
    assert [_ticket(e) for e in got] == list(range(6))
    assert all(e.terminated or e.truncated for e in got)
    more = runner.sample(num_episodes=3)
    assert [_ticket(e) for e in more] == [6, 7, 8]
    for e in got + more:
        e.check()
        assert e.chunk_index == 0 and e.t_start == 0


def test_random_policy_logp_is_exact_and_actions_in_bounds():
    runner = EnvRunner(EnvRunnerConfig(env="Pendulum-v1", num_envs=2, seed=0, max_episode_steps=20))
    (a, b) = runner.sample(num_episodes=2)
    for ep in (a, b):
        assert ep.actions.dtype == np.float32 and ep.actions.shape == (20, 1)
        assert np.all(np.abs(ep.actions) <= 2.0)
        np.testing.assert_array_equal(ep.extras["action_logp"], np.full(20, -np.log(4.0), dtype=np.float32))
        assert ep.truncated and not ep.terminated
    assert uniform_log_prob(gym.spaces.Discrete(5)) == pytest.approx(-np.log(5))
    box = gym.spaces.Box(low=np.array([-1.0, 0.0], np.float32), high=np.array([1.0, 0.5], np.float32))
    assert uniform_log_prob(box) == pytest.approx(-np.log(2.0) - np.log(0.5))


def test_epsilon_mixing_logp_for_discrete_actions():
    space = gym.spaces.Discrete(3)
    rng = np.random.default_rng(0)
    greedy = np.zeros(1000, dtype=np.int64)
    probs = np.zeros((1000, 3))
    probs[:, 0] = 1.0
    actions, logp = epsilon_mix(greedy, space, 0.3, rng, probs)
    expect = np.where(actions == 0, np.log(0.7 + 0.1), np.log(0.1)).astype(np.float32)
    np.testing.assert_allclose(logp, expect, rtol=1e-6)
    assert 0.15 < np.mean(actions != 0) < 0.25  # 0.3 * 2/3 of actions change
    cont, none = epsilon_mix(np.zeros((4, 1), np.float32), gym.spaces.Box(-1, 1, (1,)), 0.5, rng, None)
    assert none is None and cont.shape == (4, 1)


def test_inference_vs_exploration_and_weights_seq_no():
    class Greedy(torch.nn.Module):
        """Always action 1 at inference; samples from fixed logits when exploring."""

        def __init__(self, obs_space, act_space):
            super().__init__()
            self.logits = torch.nn.Parameter(torch.tensor([0.0, 1.0]))

        def forward_inference(self, batch):
            return {"actions": torch.ones(batch["obs"].shape[0], dtype=torch.int64)}

        def forward_exploration(self, batch):
            n = batch["obs"].shape[0]
            dist = torch.distributions.Categorical(logits=self.logits.expand(n, 2))
            a = dist.sample()
            return {"actions": a, "action_logp": dist.log_prob(a), "action_dist_inputs": self.logits.expand(n, 2)}

    config = EnvRunnerConfig(env="CartPole-v1", num_envs=2, seed=0, record_weights_seq_no=True)
    runner = EnvRunner(config, policy_factory=Greedy)
    runner.set_state({"policy": {"logits": torch.tensor([0.0, 2.0])}, "weights_seq_no": 4})
    (ep,) = runner.sample(num_episodes=1, explore=False)
    assert np.all(ep.actions == 1) and "action_logp" not in ep.extras
    np.testing.assert_array_equal(ep.extras["weights_seq_no"], np.full(len(ep), 4))
    (ep,) = runner.sample(num_episodes=1, explore=True)
    expect = np.where(ep.actions == 1, -np.log1p(np.exp(-2.0)), -np.log1p(np.exp(2.0)))
    np.testing.assert_allclose(ep.extras["action_logp"], expect, rtol=1e-5)
    assert ep.extras["action_dist_inputs"].shape == (len(ep), 2)
    assert runner.get_state()["weights_seq_no"] == 4


def test_random_policy_is_reproducible_with_a_seed():
    def run():
        r = EnvRunner(EnvRunnerConfig(env="CartPole-v1", num_envs=2, seed=5))
        return r.sample(num_episodes=3)

    for a, b in zip(run(), run()):
        assert batch_equal(a.obs, b.obs) and batch_equal(a.actions, b.actions)
    assert isinstance(RandomPolicy(None, gym.spaces.Discrete(2)).forward_inference({"obs": torch.zeros(3, 1)})["actions"], torch.Tensor)


def test_switching_modes_resets_without_replaying_episode_starts():
    runner = EnvRunner(EnvRunnerConfig(env="CartPole-v1", num_envs=2, seed=0))
    first = runner.sample(num_episodes=2, explore=True)
    second = runner.sample(num_episodes=2, explore=False)
    assert "action_logp" in first[0].extras and "action_logp" not in second[0].extras
    starts = {tuple(e.obs[0]) for e in first}
    assert not starts & {tuple(e.obs[0]) for e in second}
