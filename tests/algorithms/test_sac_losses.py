"""SAC: the soft backup, critic, actor and temperature terms against hand-computed values (a tiny module
with fixed weights), what each term reaches, and one update of the real module and Learner (no Ray)."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from offlinerl.algorithms.sac import SACConfig, SACLearner, SACRLModule
from offlinerl.algorithms.sac import losses as L
from offlinerl.config_io import ConfigError
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from tests.algorithms.tiny_modules import TinyContinuous

CFG = SACConfig(gamma=0.9)


def _tiny():
    # Q_0 = s + a, Q_1 = 2s − a; Q̄_0 = 1.5s + 0.5a, Q̄_1 = 0.5s + a; samples tanh(0.5 s), log π = 0.5 s; α = 0.5
    return TinyContinuous(c=(1.0, 2.0), d=(1.0, -1.0), target_c=(1.5, 0.5), target_d=(0.5, 1.0), p=0.5,
                          log_alpha=math.log(0.5))


def _batch():
    # step 1 terminated: no bootstrap
    return {"obs": torch.tensor([[1.0], [2.0]]), "actions": torch.tensor([[0.5], [-0.5]]),
            "next_obs": torch.tensor([[2.0], [-1.0]]), "rewards": torch.tensor([1.0, 2.0]),
            "terminateds": torch.tensor([0.0, 1.0])}


def test_soft_target_subtracts_the_entropy_term_and_masks_terminal_steps():
    y = L.soft_target(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0]), torch.tensor([3.0, 5.0]),
                      torch.tensor([1.0, -4.0]), torch.tensor(0.5), gamma=0.9)
    torch.testing.assert_close(y, torch.tensor([1 + 0.9 * (3 - 0.5 * 1), 2.0]))


def test_sac_loss_by_hand():
    out = L.sac_loss(_batch(), _tiny(), CFG)
    t = math.tanh
    # a' = tanh(0.5 s') = [tanh 1, tanh -0.5], log π(a'|s') = [1, -0.5]
    # min_e Q̄(s', a') = min(1.5·2 + 0.5 tanh 1, 0.5·2 + tanh 1) = 1 + tanh 1 (row 1 is terminal)
    y0 = 1 + 0.9 * (1 + t(1) - 0.5 * 1.0)
    q0, q1 = (1.5, 1.5), (1.5, 4.5)  # Q_0(s, a) = s + a, Q_1 = 2s − a
    critic = ((q0[0] - y0) ** 2 + (q0[1] - 2) ** 2) / 2 + ((q1[0] - y0) ** 2 + (q1[1] - 2) ** 2) / 2
    assert out.losses["critic"].item() == pytest.approx(critic)
    assert out.metrics["sac/target_mean"].item() == pytest.approx((y0 + 2) / 2)
    # ã = tanh(0.5 s) = [tanh 0.5, tanh 1], log π = [0.5, 1]; min_e Q(s, ã) = s + ã (< 2s − ã for these s)
    q_pi = (1 + t(0.5), 2 + t(1))
    assert out.losses["actor"].item() == pytest.approx(((0.5 * 0.5 - q_pi[0]) + (0.5 * 1.0 - q_pi[1])) / 2)
    # temperature: −mean(log α · (log π + H̄)), H̄ = −|A| = −1: −log(0.5)·(−0.5 + 0)/2
    assert out.losses["alpha"].item() == pytest.approx(0.25 * math.log(0.5))
    assert out.metrics["sac/alpha"].item() == pytest.approx(0.5)
    assert out.metrics["sac/entropy"].item() == pytest.approx(-0.75)
    fixed = L.sac_loss(_batch(), _tiny(), CFG.replace(target_entropy=-2.0))  # log π + H̄ = [−1.5, −1]
    assert fixed.losses["alpha"].item() == pytest.approx(1.25 * math.log(0.5))


def test_temperature_gradient_lowers_alpha_while_the_entropy_is_above_its_target():
    module = _tiny()  # entropy −mean log π = −0.75 > H̄ = −1
    (grad,) = torch.autograd.grad(L.sac_loss(_batch(), module, CFG).losses["alpha"], [module.log_alpha])
    assert grad.item() == pytest.approx(0.25)  # −mean(log π + H̄) > 0: a descent step lowers log α


def test_each_term_reaches_only_what_it_should():
    module = _tiny()
    params = {"p": module.p, "c": module.c, "d": module.d, "log_alpha": module.log_alpha}
    out = L.sac_loss(_batch(), module, CFG)

    def grads(term):  # |∂ term / ∂ parameter|, 0 where it does not reach it
        found = torch.autograd.grad(out.losses[term], list(params.values()), allow_unused=True, retain_graph=True)
        return {k: 0.0 if g is None else float(g.abs().sum()) for k, g in zip(params, found)}

    critic = grads("critic")
    assert critic["p"] == 0 and critic["log_alpha"] == 0 and critic["c"] > 0  # the target is a constant
    actor = grads("actor")
    assert actor["p"] > 0 and actor["log_alpha"] == 0  # α is a constant in the actor's term
    alpha = grads("alpha")
    assert alpha["p"] == 0 and alpha["c"] == 0 and alpha["log_alpha"] > 0


# -- the real module and Learner ----------------------------------------------------------------
OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def test_one_update_steps_every_optimizer_and_moves_the_targets_by_tau():
    cfg = SACConfig.from_dict({"model": {"hidden": [16, 16]}, "seed": 3, "tau": 0.1, "initial_alpha": 0.2})
    spec = MultiRLModuleSpec.single(RLModuleSpec(SACRLModule, OBS, ACT, cfg.module_config()))
    learner = SACLearner(config=cfg, module_spec=spec).build()
    module = learner.module["default_policy"]
    assert module.log_alpha.exp().item() == pytest.approx(0.2)
    rng = np.random.default_rng(0)
    batch = {C.OBS: torch.as_tensor(rng.normal(size=(32, 3)), dtype=torch.float32),
             C.NEXT_OBS: torch.as_tensor(rng.normal(size=(32, 3)), dtype=torch.float32),
             C.ACTIONS: torch.as_tensor(rng.uniform(ACT.low, ACT.high, size=(32, 2)), dtype=torch.float32),
             C.REWARDS: torch.as_tensor(rng.normal(size=32), dtype=torch.float32),
             C.TERMINATEDS: torch.as_tensor(rng.random(32) < 0.2, dtype=torch.float32)}
    before = {k: v.detach().clone() for k, v in module.state_dict().items()}
    metrics = learner.update(batch)
    assert {"losses/actor", "losses/critic", "losses/alpha"} <= set(metrics)
    after = module.state_dict()
    for key in ("pi_head.weight", "q.weights.0", "log_alpha"):  # each optimizer stepped its own parameters
        assert not torch.equal(before[key], after[key]), key
    for key in (k for k in after if k.startswith("target_q.")):  # Polyak: target ← 0.9 target + 0.1 online
        torch.testing.assert_close(after[key], 0.9 * before[key] + 0.1 * after[key[len("target_"):]])
    acting = spec.build(inference_only=True)  # what the runners get: the policy alone
    assert sorted({k.split(".")[2] for k in acting.state_dict()}) == ["pi_encoder", "pi_head"]


def test_discrete_actions_are_refused_with_a_clear_message():
    with pytest.raises(ConfigError, match="SAC needs continuous actions"):
        CFG.learner_connectors(OBS, gym.spaces.Discrete(3))
