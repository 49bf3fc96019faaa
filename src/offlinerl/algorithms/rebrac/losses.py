"""ReBRAC losses (Tarasov et al. 2023), continuous actions.

Per update on a batch (s, a, r, s', a'_data, terminated), with π̄, Q̄ the Polyak-averaged targets,
h the action half-range, β1 = actor_bc_coef, β2 = critic_bc_coef and m = has_next_actions (0 on a
row's last step, where the data holds no a'_data):
  a'       = clip(π̄(s') + clip(σ·n, −c, c)·h, low, high)           (TD3's target policy smoothing)
  y        = r + γ (1 − terminated) · (min_e Q̄_e(s', a') − β2 · m · Σ_a ((a' − a'_data)/h)²)
  critic   = Σ_e mean (Q_e(s, a) − y)²
  Q_π      = min_e Q_e(s, π(s)),   λ = 1 / mean|Q_π| (normalize_q; a constant) else 1
  actor    = mean (β1 · Σ_a ((π(s) − a)/h)² − λ · Q_π)              (every policy_freq-th update)

The penalties are measured in half-ranges, so β1 and β2 keep the paper's meaning (its actions lie in
[−1, 1]) whatever the bounds. The module provides what TD3+BC's losses use (offlinerl.algorithms.td3bc).
The actor's metrics include the share of π(s)'s and of the data's action components within 1% of a bound
(``ops.at_bounds``): with a small β1 the actor can run to tanh's flat ends in its first updates, where no
gradient brings it back, and the job loop says so (``offlinerl.jobs.guards.saturated_actor``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.rebrac.config import ReBRACConfig
from offlinerl.algorithms.td3bc.losses import smoothed_target_actions
from offlinerl.core import columns as C
from offlinerl.core.loss import LossOut

__all__ = ["actor_loss", "critic_loss", "bc_penalty"]


def bc_penalty(actions: Tensor, reference: Tensor, scale: Tensor) -> Tensor:
    """``Σ_a ((actions − reference) / h)²`` per row: ``[B, A], [B, A], [A] -> [B]``."""
    return ((actions - reference) / scale).square().sum(-1)


def critic_loss(batch: dict[str, Tensor], module, config: ReBRACConfig, noise: Tensor) -> LossOut:
    """{critic}: the ensemble's TD regression on the twin-min target less the critic's BC penalty at s'."""
    obs, act, next_obs = batch[C.OBS], batch[C.ACTIONS], batch[C.NEXT_OBS]
    with torch.no_grad():
        next_act = smoothed_target_actions(module.target_actions(next_obs), noise, config.policy_noise,
                                           config.noise_clip, module.action_low, module.action_high,
                                           module.action_scale)  # [B,A]
        penalty = bc_penalty(next_act, batch[C.NEXT_ACTIONS], module.action_scale) * batch[C.HAS_NEXT_ACTIONS]  # [B]
        next_v = ops.twin_min(module.target_q_values(next_obs, next_act)) - config.critic_bc_coef * penalty  # [B]
        y = ops.td_target(config.reward_scale * batch[C.REWARDS], batch[C.TERMINATEDS], next_v, config.gamma)
    q = module.q_values(obs, act)  # [E,B]
    metrics = {"rebrac/q_data_mean": q.detach().mean(), "rebrac/target_mean": y.mean(),
               "rebrac/critic_penalty": penalty.mean()}
    return LossOut(losses={"critic": ops.ensemble_mse(q, y)}, metrics=metrics)


def actor_loss(batch: dict[str, Tensor], module, config: ReBRACConfig) -> LossOut:
    """{actor}: mean(β1 · Σ_a ((π(s) − a)/h)² − λ · min_e Q_e(s, π(s))), λ = 1 / mean|min_e Q_e| detached."""
    obs, act = batch[C.OBS], batch[C.ACTIONS]
    pi = module.actions(obs)  # [B,A]
    q_pi = ops.twin_min(module.q_values(obs, pi))  # [B]
    lam = 1.0 / q_pi.detach().abs().mean().clamp_min(1e-8) if config.normalize_q else q_pi.new_ones(())
    bc = bc_penalty(pi, act, module.action_scale)  # [B]
    metrics = {"rebrac/lambda": lam, "rebrac/q_mean": q_pi.detach().mean(), "rebrac/bc_penalty": bc.detach().mean(),
               "rebrac/actor_at_bounds": ops.at_bounds(pi, module.action_center, module.action_scale),
               "rebrac/data_at_bounds": ops.at_bounds(act, module.action_center, module.action_scale)}
    return LossOut(losses={"actor": (config.actor_bc_coef * bc - lam * q_pi).mean()}, metrics=metrics)
