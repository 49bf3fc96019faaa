"""SAC losses (Haarnoja et al. 2018), continuous actions, automatic temperature.

Per update on a batch (s, a, r, s', terminated), α = exp(log α), Q̄ the Polyak targets:
  a' ~ π(·|s')                                    (sampled, no gradient)
  y      = r + γ (1 − terminated) · (min_e Q̄_e(s', a') − α · log π(a'|s'))   (the soft backup)
  critic = Σ_e mean (Q_e(s, a) − y)²
  actor  = mean [ α · log π(ã|s) − min_e Q_e(s, ã) ],   ã ~ π(·|s) reparameterised   (ops.soft_actor_loss)
  alpha  = −mean [ log α · (log π(ã|s) + H̄) ],   H̄ = −|A| by default            (ops.temperature_loss)

Each term moves only its own optimizer's parameters (the Learner differentiates each w.r.t. its own
group), so the actor's term does not move the critics. The module provides (E members, n samples, B batch):
sample_actions(obs [B,O], n) -> actions [n,B,A], log-probs [n,B] (reparameterised); q_values(obs, actions)
and target_q_values -> [E,B]; log_alpha (a scalar parameter).
"""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.sac.config import SACConfig
from offlinerl.core.columns import ACTIONS, NEXT_OBS, OBS, REWARDS, TERMINATEDS
from offlinerl.core.loss import LossOut

__all__ = ["soft_target", "critic_loss", "actor_loss", "policy_samples_and_target", "sac_loss"]


def soft_target(rewards: Tensor, terminateds: Tensor, next_q_min: Tensor, next_logp: Tensor, alpha: Tensor,
                gamma: float) -> Tensor:
    """``y = r + γ(1 − d)(min_e Q̄_e(s', a') − α log π(a'|s'))`` [B], no gradient."""
    return ops.td_target(rewards, terminateds, next_q_min - alpha.detach() * next_logp, gamma).detach()


def critic_loss(q_data: Tensor, y: Tensor) -> LossOut:
    """{critic}: ``Σ_e mean (Q_e(s, a) − y)²`` for q_data [E,B] and y [B]."""
    return LossOut(losses={"critic": ops.ensemble_mse(q_data, y)},
                   metrics={"sac/q_data_mean": q_data.detach().mean(), "sac/target_mean": y.mean()})


def actor_loss(logp: Tensor, q_min: Tensor, log_alpha: Tensor, target_entropy: float) -> LossOut:
    """{actor, alpha} from the reparameterised samples' log π [B] and min_e Q [B]."""
    alpha = log_alpha.exp()
    return LossOut(losses={"actor": ops.soft_actor_loss(logp, q_min, alpha),
                           "alpha": ops.temperature_loss(log_alpha, logp, target_entropy)},
                   metrics={"sac/alpha": alpha.detach(), "sac/entropy": -logp.detach().mean(),
                            "sac/q_pi_mean": q_min.detach().mean()})


def policy_samples_and_target(batch: dict[str, Tensor], module, config: SACConfig) -> tuple[Tensor, Tensor, Tensor]:
    """ã ~ π(·|s) [B,A] and its log π [B] (reparameterised), and the soft backup y [B] (no gradient), from one policy
    forward over s and s'."""
    obs, next_obs = batch[OBS], batch[NEXT_OBS]
    b = obs.shape[0]
    acts, logps = module.sample_actions(torch.cat([obs, next_obs]), 1)  # [1,2B,A], [1,2B]
    with torch.no_grad():
        a_next, logp_next = acts[0, b:].detach(), logps[0, b:].detach()
        next_q = ops.twin_min(module.target_q_values(next_obs, a_next))  # [B]
        y = soft_target(config.reward_scale * batch[REWARDS], batch[TERMINATEDS], next_q, logp_next,
                        module.log_alpha.exp(), config.gamma)
    return acts[0, :b], logps[0, :b], y


def sac_loss(batch: dict[str, Tensor], module, config: SACConfig) -> LossOut:
    """SAC's {actor, critic, alpha} on one batch (see the module docstring)."""
    obs, act = batch[OBS], batch[ACTIONS]
    a_new, logp_new, y = policy_samples_and_target(batch, module, config)
    # Data and policy actions scored by the Q ensemble in one forward.
    q = module.q_values(torch.stack([obs, obs]), torch.stack([act, a_new]))  # [E,2,B]
    critic = critic_loss(q[:, 0], y)
    actor = actor_loss(logp_new, ops.twin_min(q[:, 1]), module.log_alpha, config.entropy_target(act.shape[-1]))
    return LossOut(losses={**critic.losses, **actor.losses}, metrics={**critic.metrics, **actor.metrics})
