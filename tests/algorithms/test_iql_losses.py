"""IQL loss terms against hand-computed values (tiny modules with fixed weights)."""

import math
from dataclasses import replace

import pytest
import torch

from offlinerl.algorithms.iql import losses as L
from offlinerl.algorithms.iql.config import IQLConfig
from tests.algorithms.tiny_modules import TinyContinuous, TinyDiscrete

E = math.e
CFG = IQLConfig(gamma=0.9, expectile=0.7, beta=1.0)


def test_value_and_awr_terms():
    assert L.value_loss(torch.tensor([3.0, 0.0]), torch.tensor([1.0, 1.0]), 0.7).item() == pytest.approx((0.7 * 4 + 0.3) / 2)
    loss = L.awr_actor_loss(torch.tensor([-1.0, -2.0, -0.5]), torch.tensor([0.0, 1.0, 10.0]), beta=2.0, max_weight=100.0)
    assert loss.item() == pytest.approx((1 + 2 * E ** 2 + 50) / 3)


def _batch():
    # step 0 terminated (no bootstrap), step 1 truncated (bootstraps from V(s'))
    return {"obs": torch.tensor([[1.0], [0.0]]), "actions": torch.tensor([[1.0], [2.0]]),
            "next_obs": torch.tensor([[3.0], [1.0]]), "rewards": torch.tensor([1.0, 0.0]),
            "terminateds": torch.tensor([1.0, 0.0]), "truncateds": torch.tensor([0.0, 1.0])}


def _module():
    # Q_0 = s + a, Q_1 = s + 2a; Q̄_0 = s + 2a, Q̄_1 = s; V = 2s; log π(a|s) = −(a − s/2)²
    return TinyContinuous(c=(1.0, 1.0), d=(1.0, 2.0), target_c=(1.0, 1.0), target_d=(2.0, 0.0), v=2.0, p=0.5)


def test_continuous_iql_loss_by_hand():
    out = L.iql_loss(_batch(), _module(), CFG)
    # min Q̄ = [1, 0]; V = [2, 0]; V(s') = [6, 2]; y = [1 + 0, 0 + 0.9·2] = [1, 1.8]
    assert out.losses["critic"].item() == pytest.approx((1 + 0.04) / 2 + (4 + 4.84) / 2)
    assert out.losses["value"].item() == pytest.approx(0.3 * 1 / 2)  # diffs [-1, 0]
    assert out.losses["actor"].item() == pytest.approx((0.25 / E + 4) / 2)  # weights [e^-1, 1], log π [-0.25, -4]
    clipped = L.iql_loss(_batch(), _module(), replace(CFG, beta=1.0, max_weight=0.5))
    assert clipped.losses["actor"].item() == pytest.approx((0.25 / E + 4 * 0.5) / 2)  # weights [e^-1, 0.5]


def test_reward_scale_multiplies_rewards_in_the_td_target():
    out = L.iql_loss(_batch(), _module(), replace(CFG, reward_scale=3.0))
    # y = [3·1 + 0, 0 + 0.9·2] = [3, 1.8]
    assert out.losses["critic"].item() == pytest.approx(((2 - 3) ** 2 + 0.04) / 2 + ((3 - 3) ** 2 + 4.84) / 2)


def test_discrete_iql_loss_by_hand():
    module = TinyDiscrete(w=[[1.0, 2.0], [2.0, 0.0]], target_w=[[3.0, 1.0], [0.0, 4.0]], v=1.0, logits=(0.0, math.log(3.0)))
    batch = {"obs": torch.tensor([[1.0]]), "next_obs": torch.tensor([[2.0]]), "actions": torch.tensor([0]),
             "rewards": torch.tensor([1.0]), "terminateds": torch.tensor([0.0])}
    out = L.iql_loss(batch, module, replace(CFG, gamma=0.5))
    # min Q̄(s, 0) = min(3, 0) = 0; V = 1; V(s') = 2; y = 1 + 0.5·2 = 2; Q(s, 0) = [1, 2]
    assert out.losses["critic"].item() == pytest.approx(1.0)
    assert out.losses["value"].item() == pytest.approx(0.3)
    assert out.losses["actor"].item() == pytest.approx(math.exp(-1) * math.log(4.0))  # π(0|s) = 1/4


@pytest.mark.parametrize("kind", ["continuous", "discrete"])
def test_each_iql_loss_reaches_only_its_own_parameters(kind):
    if kind == "continuous":
        module, batch = _module(), _batch()
        q_params, pi_params = [module.c, module.d], [module.p]
    else:
        module = TinyDiscrete(w=[[1.0, 2.0], [2.0, 0.0]], target_w=[[3.0, 1.0], [0.0, 4.0]], v=0.5, logits=(0.1, 0.2))
        batch = {"obs": torch.tensor([[1.0]]), "next_obs": torch.tensor([[2.0]]), "actions": torch.tensor([1]),
                 "rewards": torch.tensor([1.0]), "terminateds": torch.tensor([0.0])}
        q_params, pi_params = [module.w], [module.logits]
    out = L.iql_loss(batch, module, CFG)
    owners = {"value": [module.v], "critic": q_params, "actor": pi_params}
    everything = [module.v, *q_params, *pi_params]
    for name, own in owners.items():
        grads = torch.autograd.grad(out.losses[name], everything, allow_unused=True, retain_graph=True)
        for param, grad in zip(everything, grads):
            if any(param is o for o in own):
                assert grad is not None and float(grad.abs().sum()) > 0, name
            else:
                assert grad is None, f"{name} loss reaches a parameter it does not own"


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="expectile"):
        IQLConfig(expectile=1.0)
    with pytest.raises(ValueError, match="max_weight"):
        IQLConfig(max_weight=0.0)
