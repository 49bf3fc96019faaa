"""TD3+BC losses (Fujimoto & Gu 2021), continuous actions.

Per update on a batch (s, a, r, s', terminated), with π̄, Q̄ the Polyak-averaged targets,
σ = policy_noise, c = noise_clip and h the action half-range (noise in those units):
  ε        = clip(σ · n, −c, c) · h,   n ~ N(0, I) (drawn by the learner, passed in)
  a'       = clip(π̄(s') + ε, low, high)                        (target policy smoothing)
  y        = r + γ (1 − terminated) · min_e Q̄_e(s', a')
  critic   = Σ_e mean (Q_e(s, a) − y)²
  λ        = α / mean |Q_1(s, π(s))|                            (a constant: no gradient)
  actor    = −λ · mean Q_1(s, π(s)) + mean ((π(s) − a) / h)²   (every policy_freq-th update)

The BC term is measured in units of the half-range, so α keeps the paper's meaning (its
actions lie in [−1, 1]) whatever the bounds. The module provides (E members, B batch):
actions(obs) and target_actions(obs) -> [B,A]; q_values(obs, actions) and target_q_values
-> [E,B]; action_low, action_high, action_center, action_scale (the half-range) [A].
"""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.td3bc.config import TD3BCConfig
from offlinerl.core.loss import LossOut

__all__ = ["actor_loss", "critic_loss", "smoothed_target_actions"]

# Batch keys (TRAINING_API: offlinerl.core.columns).
OBS, NEXT_OBS, ACTIONS, REWARDS, TERMINATEDS = "obs", "next_obs", "actions", "rewards", "terminateds"


def smoothed_target_actions(target_actions: Tensor, noise: Tensor, policy_noise: float, noise_clip: float,
                            low: Tensor, high: Tensor, scale: Tensor) -> Tensor:
    """``clip(π̄(s') + clip(σ·n, −c, c)·h, low, high)`` for standard-normal ``noise`` [B,A]."""
    eps = (policy_noise * noise).clamp(-noise_clip, noise_clip) * scale
    return torch.max(torch.min(target_actions + eps, high), low)


def critic_loss(batch: dict[str, Tensor], module, config: TD3BCConfig, noise: Tensor) -> LossOut:
    """{critic}: the twin-critic TD regression on the smoothed, twin-min target (see the module docstring)."""
    obs, act, next_obs = batch[OBS], batch[ACTIONS], batch[NEXT_OBS]
    with torch.no_grad():
        next_act = smoothed_target_actions(module.target_actions(next_obs), noise, config.policy_noise,
                                           config.noise_clip, module.action_low, module.action_high,
                                           module.action_scale)  # [B,A]
        next_v = ops.twin_min(module.target_q_values(next_obs, next_act))  # [B]
        y = ops.td_target(config.reward_scale * batch[REWARDS], batch[TERMINATEDS], next_v, config.gamma)
    q = module.q_values(obs, act)  # [E,B]
    metrics = {"td3bc/q_data_mean": q.detach().mean(), "td3bc/target_mean": y.mean()}
    return LossOut(losses={"critic": ops.ensemble_mse(q, y)}, metrics=metrics)


def actor_loss(batch: dict[str, Tensor], module, config: TD3BCConfig) -> LossOut:
    """{actor}: −λ·mean Q_1(s, π(s)) + mean((π(s) − a)/h)², λ = α / mean|Q_1(s, π(s))| detached."""
    obs, act = batch[OBS], batch[ACTIONS]
    pi = module.actions(obs)  # [B,A]
    q1 = module.q_values(obs, pi)[0]  # [B]: the first critic, as in the paper
    lam = config.alpha / q1.detach().abs().mean().clamp_min(1e-8)
    bc_mse = ((pi - act) / module.action_scale).square().mean()
    q_mean = q1.mean()
    metrics = {"td3bc/lambda": lam, "td3bc/q_mean": q_mean.detach(), "td3bc/bc_mse": bc_mse.detach(),
               "td3bc/actor_at_bounds": ops.at_bounds(pi, module.action_center, module.action_scale),
               "td3bc/data_at_bounds": ops.at_bounds(act, module.action_center, module.action_scale)}
    return LossOut(losses={"actor": -lam * q_mean + bc_mse}, metrics=metrics)
