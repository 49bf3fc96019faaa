"""IQL losses (Kostrikov et al. 2021), one function for discrete and continuous actions.

Per update on a batch (s, a, r, s', terminated), with Q̄ the Polyak-averaged target critics:
  value  = mean L_τ(min_e Q̄_e(s, a) − V(s)),   L_τ(u) = |τ − 1[u < 0]| · u²
  critic = Σ_e mean (Q_e(s, a) − [r + γ(1 − terminated) · V(s')])²
  actor  = −mean [ min(exp(β · (min_e Q̄_e(s, a) − V(s))), max_weight) · log π(a|s) ]

The module implements ``ActorCriticAPI`` and ``StateValueAPI`` (``offlinerl.core.rl_module``;
the learner checks both when it builds).
"""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.iql.config import IQLConfig
from offlinerl.core.columns import ACTIONS, NEXT_OBS, OBS, REWARDS, TERMINATEDS
from offlinerl.core.loss import LossOut

__all__ = ["awr_actor_loss", "iql_loss", "value_loss"]


def value_loss(target_q_min: Tensor, v: Tensor, expectile: float) -> Tensor:
    """Expectile regression of V(s) [B] on min_e Q̄_e(s, a) [B] (the target is constant)."""
    return ops.expectile_loss(target_q_min.detach() - v, expectile).mean()


def awr_actor_loss(logp: Tensor, adv: Tensor, beta: float, max_weight: float) -> Tensor:
    """Advantage-weighted regression −mean(min(exp(β·A), max)·log π(a|s)); A is constant."""
    return -(ops.awr_weights(adv.detach(), beta, max_weight) * logp).mean()


def iql_loss(batch: dict[str, Tensor], module, config: IQLConfig) -> LossOut:
    """IQL losses {actor, critic, value} on one batch (see the module docstring)."""
    obs, act = batch[OBS], batch[ACTIONS]
    with torch.no_grad():
        target_q = ops.twin_min(module.target_q_values(obs, act))  # [B]
        next_v = module.values(batch[NEXT_OBS])  # apart from V(s): backward then covers B rows, not 2B
    v = module.values(obs)
    y = ops.td_target(config.reward_scale * batch[REWARDS], batch[TERMINATEDS], next_v, config.gamma)
    q = module.q_values(obs, act)  # [E,B]
    adv = target_q - v.detach()
    logp = module.action_log_prob(obs, act)
    losses = {
        "actor": awr_actor_loss(logp, adv, config.beta, config.max_weight),
        "critic": ops.ensemble_mse(q, y),
        "value": value_loss(target_q, v, config.expectile),
    }
    metrics = {
        "iql/v_mean": v.detach().mean(), "iql/q_mean": q.detach().mean(),
        "iql/adv_mean": adv.mean(), "iql/weight_mean": ops.awr_weights(adv, config.beta, config.max_weight).mean(),
        "iql/logp_data": logp.detach().mean(),
    }
    return LossOut(losses=losses, metrics=metrics)
