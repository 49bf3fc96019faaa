"""CQL loss terms against hand-computed values (tiny modules with fixed weights)."""

import math
from dataclasses import replace

import pytest
import torch

from offlinerl.algorithms.cql import losses as L
from offlinerl.algorithms.cql.config import CQLConfig
from tests.algorithms.tiny_modules import LN2, TinyContinuous, TinyDiscrete

E = math.e


def test_conservative_gap_logsumexp_minus_data_q():
    logits = torch.tensor([[[0.0, 2.0], [0.0, 2.0]]])  # [E=1, K=2, B=2]
    q_data = torch.tensor([[0.5, 1.0]])
    assert L.conservative_gap(q_data, logits).tolist() == pytest.approx([LN2 + 0.25])
    assert L.conservative_gap(q_data, logits, temperature=2.0).tolist() == pytest.approx([2 * LN2 + 0.25])


def test_penalty_logits_correct_each_source_by_its_log_density():
    one = torch.ones(1, 1, 1)
    logits = L.penalty_logits(1 * one, -LN2, 2 * one, torch.tensor([[0.5]]), 0 * one, torch.tensor([[-1.0]]))
    assert logits.flatten().tolist() == pytest.approx([1 + LN2, 1.5, 1.0])
    gap = L.conservative_gap(torch.tensor([[1.5]]), logits)
    assert gap.item() == pytest.approx(math.log(3 * E + E ** 1.5) - 1.5)


def test_actor_bc_temperature_and_lagrange_terms():
    alpha = torch.tensor(0.5)
    assert L.actor_loss(torch.tensor([-1.0, 1.0]), torch.tensor([3.0, 5.0]), alpha).item() == pytest.approx(-4.0)
    assert L.bc_actor_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), alpha).item() == pytest.approx(1.5)
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    loss = L.temperature_loss(log_alpha, torch.tensor([-1.0, -3.0]), target_entropy=-2.0)
    assert loss.item() == pytest.approx(-4 * LN2)
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(4.0)  # entropy 2 above target -2: α goes down
    log_cql_alpha = torch.tensor(LN2, requires_grad=True)
    lag = L.lagrange_loss(log_cql_alpha, torch.tensor([12.0, 6.0]), target_gap=10.0, max_alpha=1e6)
    assert lag.item() == pytest.approx(2.0)
    lag.backward()
    assert log_cql_alpha.grad.item() == pytest.approx(2.0)  # gap below target on average: α' goes down


def test_discrete_gap_and_double_dqn_target():
    q_all = torch.tensor([[[0.0, math.log(3.0)], [1.0, 1.0]]])  # [E=1, B=2, A=2]
    gap = L.discrete_conservative_gap(q_all, torch.tensor([0, 1]))
    assert gap.tolist() == pytest.approx([(math.log(4.0) + LN2) / 2])
    online = torch.tensor([[[1.0, 5.0, 3.0]], [[2.0, 4.0, 6.0]]])  # [E=2, B=1, A=3]: min = [1, 4, 3] -> a* = 1
    target = torch.tensor([[[10.0, 20.0, 30.0]], [[11.0, 19.0, 31.0]]])
    assert L.double_dqn_next_value(online, target).tolist() == pytest.approx([19.0])


def _batch(terminated: float = 0.0):
    return {"obs": torch.tensor([[1.0]]), "next_obs": torch.tensor([[2.0]]), "actions": torch.tensor([[0.5]]),
            "rewards": torch.tensor([1.0]), "terminateds": torch.tensor([terminated]),
            "truncateds": torch.tensor([1.0 - terminated])}


CFG = CQLConfig(gamma=0.9, num_sampled_actions=2, cql_weight=1.0)
GAP0 = math.log(4 * E + 2 * E ** 0.5 + 2) - 1  # member 0: Q = s, logits 1+ln2 (x2), 1-0.5 (x2), 1-1 (x2)
GAP1 = math.log(4 * E ** 2 + 2 * E ** 1.5 + 2 * E) - 2  # member 1: Q = 2s


def test_continuous_cql_loss_by_hand():
    module = TinyContinuous(log_alpha=LN2)
    out = L.cql_continuous_loss(_batch(), module, CFG, update_index=0)
    # y = 1 + 0.9 * min(1.5*2, 0.5*2) = 1.9 (truncated: bootstraps); td = (1-1.9)^2 + (2-1.9)^2
    assert out.metrics["cql/td_loss"].item() == pytest.approx(0.82)
    assert out.metrics["cql/gap"].item() == pytest.approx((GAP0 + GAP1) / 2)
    assert out.losses["critic"].item() == pytest.approx(0.82 + GAP0 + GAP1)
    assert out.losses["actor"].item() == pytest.approx(2 * 0.5 - 1.0)  # α·log π − min_e Q(s, ã)
    assert out.losses["alpha"].item() == pytest.approx(-LN2 * (0.5 - 1.0))  # target entropy −|A| = −1
    assert "cql_alpha" not in out.losses


def test_continuous_cql_terminated_backup_entropy_and_bc_warmup():
    module = TinyContinuous(log_alpha=LN2)
    out = L.cql_continuous_loss(_batch(terminated=1.0), module, CFG, update_index=0)
    assert out.metrics["cql/td_loss"].item() == pytest.approx(0.0 + 1.0)  # y = r = 1
    scaled = L.cql_continuous_loss(_batch(terminated=1.0), module, replace(CFG, reward_scale=2.0), update_index=0)
    assert scaled.metrics["cql/target_mean"].item() == pytest.approx(2.0)
    soft = L.cql_continuous_loss(_batch(), module, replace(CFG, backup_entropy=True), update_index=0)
    assert soft.metrics["cql/td_loss"].item() == pytest.approx(0.81 + 3.61)  # y = 1 + 0.9 (1 − 2·1)
    bc = L.cql_continuous_loss(_batch(), module, replace(CFG, bc_warmup_updates=5), update_index=4)
    assert bc.losses["actor"].item() == pytest.approx(2 * 0.5 - 0.0)  # log π(a_data|s) = −(0.5 − 0.5)²
    after = L.cql_continuous_loss(_batch(), module, replace(CFG, bc_warmup_updates=5), update_index=5)
    assert after.losses["actor"].item() == pytest.approx(0.0)


def test_calql_floors_the_policy_actions_q_at_the_return_to_go():
    module = TinyContinuous(log_alpha=LN2)
    cal = replace(CFG, calibrated=True)
    out = L.cql_continuous_loss({**_batch(), "returns_to_go": torch.tensor([1.5])}, module, cal, update_index=0)
    # member 0: Q = 1 < G = 1.5, so its four policy-action logits become 1.5 − log π (the uniform ones stay);
    # member 1: Q = 2 > G, unchanged
    gap0 = math.log(4 * E + 2 * E + 2 * E ** 0.5) - 1
    assert out.metrics["cql/gap"].item() == pytest.approx((gap0 + GAP1) / 2)
    assert out.metrics["cql/td_loss"].item() == pytest.approx(0.82)  # the TD target does not use G
    scaled = L.cql_continuous_loss({**_batch(), "returns_to_go": torch.tensor([1.5])}, module,
                                   replace(cal, reward_scale=2.0), update_index=0)  # G·reward_scale = 3 > Q of both
    gap0, gap1 = math.log(4 * E + 2 * E ** 2.5 + 2 * E ** 2) - 1, math.log(6 * E ** 2 + 2 * E ** 2.5) - 2
    assert scaled.metrics["cql/gap"].item() == pytest.approx((gap0 + gap1) / 2)
    (grad,) = torch.autograd.grad(out.losses["critic"], [module.c])
    # only the uniform actions' Q (and Q(s, a_data)) move member 0; floored values carry no gradient
    w_uniform = 4 * E / (4 * E + 2 * E + 2 * E ** 0.5)
    assert grad[0].item() == pytest.approx(2 * (1 - 1.9) + w_uniform - 1)
    assert L.calibrate(torch.tensor([[1.0, 3.0]]), torch.tensor([2.0, 2.0])).tolist() == [[2.0, 3.0]]


def test_calql_config_adds_returns_to_go_to_the_learner_batch():
    from offlinerl.connectors import ComputeReturnsToGo

    plain = CQLConfig().learner_connectors(None, None)
    assert not any(isinstance(c, ComputeReturnsToGo) for c in plain)
    (rtg,) = [c for c in CQLConfig(calibrated=True, gamma=0.9).learner_connectors(None, None)
              if isinstance(c, ComputeReturnsToGo)]
    assert rtg.gamma == 0.9


def test_continuous_cql_uniform_density_uses_the_box_width():
    module = TinyContinuous(log_alpha=LN2)
    module.action_low.fill_(-2.0)
    module.action_high.fill_(2.0)  # log μ = −ln 4; sampled tanh actions stay inside
    out = L.cql_continuous_loss(_batch(), module, CFG, update_index=0)
    gap0 = math.log(2 * E ** (1 + math.log(4)) + 2 * E ** 0.5 + 2) - 1
    gap1 = math.log(2 * E ** (2 + math.log(4)) + 2 * E ** 1.5 + 2 * E) - 2
    assert out.metrics["cql/gap"].item() == pytest.approx((gap0 + gap1) / 2)


def test_continuous_cql_lagrangian():
    module = TinyContinuous(log_alpha=LN2, log_cql_alpha=math.log(0.5))
    cfg = replace(CFG, lagrangian=True, target_action_gap=3.0, cql_weight=2.0)
    out = L.cql_continuous_loss(_batch(), module, cfg, update_index=0)
    assert out.losses["critic"].item() == pytest.approx(0.82 + 2.0 * 0.5 * (GAP0 - 3 + GAP1 - 3))
    assert out.losses["cql_alpha"].item() == pytest.approx(-0.5 * ((GAP0 + GAP1) / 2 - 3))


class Recording(TinyContinuous):
    def q_values(self, obs, actions):
        self.seen = actions.detach().clone()
        return super().q_values(obs, actions)


def test_continuous_cql_scores_uniform_box_actions_in_one_forward():
    torch.manual_seed(0)
    module = Recording(d=(1.0, 1.0))
    module.action_low.fill_(-0.1)
    module.action_high.fill_(0.3)
    module.q_values(torch.zeros(1, 1), torch.zeros(1, 1))
    batch = {k: v.expand(256, *v.shape[1:]).contiguous() for k, v in _batch().items()}
    n = 8
    L.cql_continuous_loss(batch, module, replace(CFG, num_sampled_actions=n, bc_warmup_updates=1), update_index=0)
    seen = module.seen  # the warm-up actor never calls q_values: the last call is the batched one
    assert seen.shape == (3 * n + 1, 256, 1)  # data + N uniform + N from π(s) + N from π(s')
    rand = seen[1:1 + n]
    assert float(rand.min()) >= -0.1 and float(rand.max()) <= 0.3
    assert float(rand.mean()) == pytest.approx(0.1, abs=0.01)
    assert torch.equal(seen[0], batch["actions"])
    assert torch.allclose(seen[1 + n:1 + 2 * n], torch.tanh(torch.tensor(0.5)).expand_as(rand))  # π(s=1)
    # (π(s') actions are tanh(0.5·2), scored with s)
    assert torch.allclose(seen[1 + 2 * n:], torch.tanh(torch.tensor(1.0)).expand_as(rand))


def test_continuous_cql_critic_and_alpha_losses_do_not_reach_the_policy():
    module = TinyContinuous(log_alpha=LN2)
    out = L.cql_continuous_loss(_batch(), module, replace(CFG, lagrangian=True), update_index=0)
    critic_grads = torch.autograd.grad(out.losses["critic"], [module.p, module.log_alpha],
                                       allow_unused=True, retain_graph=True)
    assert all(g is None or float(g.abs().sum()) == 0.0 for g in critic_grads)
    alpha_grads = torch.autograd.grad(out.losses["alpha"], [module.p, module.c], allow_unused=True, retain_graph=True)
    assert all(g is None for g in alpha_grads)
    lag_grads = torch.autograd.grad(out.losses["cql_alpha"], [module.c, module.p], allow_unused=True)
    assert all(g is None for g in lag_grads)
    assert not module.target_c.requires_grad and not module.target_d.requires_grad


def test_discrete_cql_loss_by_hand():
    module = TinyDiscrete(w=[[1.0, 2.0], [2.0, 0.0]], target_w=[[3.0, 1.0], [0.0, 4.0]])
    batch = {"obs": torch.tensor([[1.0]]), "next_obs": torch.tensor([[1.0]]), "actions": torch.tensor([0]),
             "rewards": torch.tensor([1.0]), "terminateds": torch.tensor([0.0])}
    out = L.cql_discrete_loss(batch, module, replace(CFG, gamma=0.5, cql_weight=3.0))
    # a* = argmax min_e Q(s', ·) = argmax [1, 0] = 0; y = 1 + 0.5 · min(3, 0) = 1 (a max over the target would give 1.5)
    gap0, gap1 = math.log(E + E ** 2) - 1, math.log(E ** 2 + 1) - 2
    assert out.metrics["cql/target_mean"].item() == pytest.approx(1.0)
    assert out.losses["critic"].item() == pytest.approx((1 - 1) ** 2 + (2 - 1) ** 2 + 3.0 * (gap0 + gap1))
    terminal = L.cql_discrete_loss({**batch, "terminateds": torch.tensor([1.0])}, module, CFG)
    assert terminal.metrics["cql/target_mean"].item() == pytest.approx(1.0)
    (grad,) = torch.autograd.grad(out.losses["critic"], [module.logits], allow_unused=True)
    assert grad is None


def test_discrete_calql_floors_every_action_at_the_return_to_go():
    module = TinyDiscrete(w=[[1.0, 2.0], [2.0, 0.0]], target_w=[[3.0, 1.0], [0.0, 4.0]])
    gap = L.discrete_conservative_gap(module.all_q_values(torch.tensor([[1.0]])), torch.tensor([0]),
                                      reference=torch.tensor([1.5]))
    # member 0: [max(1, 1.5), 2] vs Q(s, 0) = 1; member 1: [2, max(0, 1.5)] vs 2
    assert gap.tolist() == pytest.approx([math.log(E ** 1.5 + E ** 2) - 1, math.log(E ** 2 + E ** 1.5) - 2])
    batch = {"obs": torch.tensor([[1.0]]), "next_obs": torch.tensor([[1.0]]), "actions": torch.tensor([0]),
             "rewards": torch.tensor([1.0]), "terminateds": torch.tensor([0.0]), "returns_to_go": torch.tensor([1.5])}
    out = L.cql_discrete_loss(batch, module, replace(CFG, gamma=0.5, calibrated=True))
    assert out.metrics["cql/gap"].item() == pytest.approx(gap.mean().item())


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="num_sampled_actions"):
        CQLConfig(num_sampled_actions=0)
    with pytest.raises(ValueError, match="tau"):
        CQLConfig(tau=0.0)
    with pytest.raises(TypeError):
        CQLConfig(0.9)  # keyword-only
