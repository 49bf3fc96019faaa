"""CQL losses (Kumar et al. 2020), continuous (SAC-based) and discrete (double DQN-based).

Continuous, per update on a batch (s, a, r, s', terminated):
  y        = r + γ(1 − terminated) · min_e Q̄_e(s', a'),   a' ~ π(·|s')
  critic   = Σ_e [ mean (Q_e(s,a) − y)² + α' · gap_e ]
  gap_e    = mean_s [ T · logsumexp_k((Q_e(s, a_k) − log μ_k(a_k)) / T) − Q_e(s, a) ]
             over 3N actions: N uniform over the action box (log μ = −Σ log(high − low)),
             N from π(·|s) and N from π(·|s') (log μ = log π, detached);
             `calibrated` (Cal-QL): the Q of the 2N policy actions is max(Q, G(s)), G the
             data's discounted return-to-go from s (×reward_scale)
  actor    = mean [ α · log π(ã|s) − min_e Q_e(s, ã) ],   ã ~ π(·|s) reparameterised
             (first `bc_warmup_updates` updates: mean [ α · log π(ã|s) − log π(a|s) ])
  alpha    = −mean [ log α · (log π(ã|s) + H̄) ]                 (H̄ = −|A| by default)
  cql_alpha = −α' · mean_e (gap_e − target_gap)     (only with `lagrangian`; α' = exp(log α'))

Discrete:
  y        = r + γ(1 − terminated) · min_e Q̄_e(s', argmax_b min_e Q_e(s', b))   (double DQN)
  critic   = Σ_e [ mean (Q_e(s,a) − y)² + α' · mean_s (logsumexp_b Q_e(s, b) − Q_e(s, a)) ]
             (`calibrated`: logsumexp_b max(Q_e(s, b), G(s)))

The module provides (shapes: E ensemble members, N samples, B batch):
  sample_actions(obs [B,O], n) -> actions [n,B,A], log_probs [n,B]   (reparameterised)
  action_log_prob(obs [B,O], actions [B,A]) -> [B]
  q_values(obs [...,B,O], actions [...,B,A]) -> [E,...,B]; target_q_values likewise (no grad)
  all_q_values(obs [B,O]) -> [E,B,n_actions]; target_all_q_values likewise (discrete)
  action_low, action_high [A]; log_alpha, log_cql_alpha (scalar parameters)
"""

from __future__ import annotations

import torch
from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.cql.config import CQLConfig
from offlinerl.core.columns import ACTIONS, NEXT_OBS, OBS, RETURNS_TO_GO, REWARDS, TERMINATEDS
from offlinerl.core.loss import LossOut
from offlinerl.ops import soft_actor_loss as actor_loss
from offlinerl.ops import temperature_loss

__all__ = [
    "actor_loss",
    "bc_actor_loss",
    "calibrate",
    "conservative_gap",
    "cql_continuous_loss",
    "cql_discrete_loss",
    "discrete_conservative_gap",
    "double_dqn_next_value",
    "lagrange_loss",
    "penalty_logits",
    "temperature_loss",
]


def penalty_logits(q_rand: Tensor, log_density_rand: float, q_pi: Tensor, logp_pi: Tensor,
                   q_next_pi: Tensor, logp_next_pi: Tensor) -> Tensor:
    """Importance-corrected Q of the sampled actions: [E,3N,B] = cat(Q − log μ) over the three sources.

    q_* are [E,N,B]; logp_* are [N,B]; log_density_rand is the scalar log density of the uniform box.
    """
    return torch.cat([q_rand - log_density_rand, q_pi - logp_pi, q_next_pi - logp_next_pi], dim=1)


def calibrate(q: Tensor, reference: Tensor) -> Tensor:
    """Cal-QL's lower bound: max(Q, reference) for Q [..., B] and the per-state reference value [B]."""
    return torch.maximum(q, reference)


def conservative_gap(q_data: Tensor, logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Per member [E]: mean_b [T·logsumexp_k(logits[e,k,b]/T) − q_data[e,b]]."""
    ood = temperature * torch.logsumexp(logits / temperature, dim=1)  # [E,B]
    return (ood - q_data).mean(dim=-1)


def bc_actor_loss(logp: Tensor, logp_data: Tensor, alpha: Tensor) -> Tensor:
    """Warm-up policy loss mean(α·log π(ã|s) − log π(a_data|s)); α is treated as a constant."""
    return (alpha.detach() * logp - logp_data).mean()


def lagrange_loss(log_cql_alpha: Tensor, gap: Tensor, target_gap: float, max_alpha: float) -> Tensor:
    """−α'·mean_e(gap_e − target_gap) with α' = clamp(exp(log α'), 0, max): ascent on α' while the gap exceeds the target."""
    cql_alpha = log_cql_alpha.exp().clamp(0.0, max_alpha)
    return -(cql_alpha * (gap.detach() - target_gap)).mean()


def discrete_conservative_gap(q_all: Tensor, actions: Tensor, reference: Tensor | None = None) -> Tensor:
    """Per member [E]: mean_b [logsumexp_a Q_e(s_b, a) − Q_e(s_b, a_b)] for q_all [E,B,A], actions [B];
    with a per-state ``reference`` [B] (Cal-QL) the logsumexp is over max(Q_e(s_b, a), reference_b)."""
    q_data = q_all.gather(-1, actions.long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)).squeeze(-1)
    pushed = q_all if reference is None else calibrate(q_all, reference.unsqueeze(-1))
    return (torch.logsumexp(pushed, dim=-1) - q_data).mean(dim=-1)


def double_dqn_next_value(next_q_online: Tensor, next_q_target: Tensor) -> Tensor:
    """[B]: min_e Q̄_e(s', a*) with a* = argmax_a min_e Q_e(s', a); inputs [E,B,A]."""
    best = ops.twin_min(next_q_online).argmax(dim=-1)  # [B]
    chosen = next_q_target.gather(-1, best.view(1, -1, 1).expand(next_q_target.shape[0], -1, 1))
    return ops.twin_min(chosen.squeeze(-1))


def cql_continuous_loss(batch: dict[str, Tensor], module, config: CQLConfig, *, update_index: int) -> LossOut:
    """CQL-SAC losses {actor, critic, alpha[, cql_alpha]} on one batch (see module docstring)."""
    obs, act, next_obs = batch[OBS], batch[ACTIONS], batch[NEXT_OBS]
    b, n = obs.shape[0], config.num_sampled_actions
    low, high = module.action_low, module.action_high

    # One policy forward over s and s' draws N + 1 actions per state.
    acts, logps = module.sample_actions(torch.cat([obs, next_obs]), n + 1)  # [N+1,2B,A], [N+1,2B]
    a_new, logp_new = acts[0, :b], logps[0, :b]  # reparameterised: actor and temperature losses
    sampled, logp_sampled = acts.detach(), logps.detach()
    a_next, logp_next = sampled[0, b:], logp_sampled[0, b:]  # TD target
    a_pi, logp_pi = sampled[1:, :b], logp_sampled[1:, :b]  # [N,B,A]
    a_next_pi, logp_next_pi = sampled[1:, b:], logp_sampled[1:, b:]
    a_rand = low + (high - low) * torch.rand_like(a_pi)  # [N,B,A] uniform over the box

    # All data and sampled actions scored by the Q ensemble in one forward.
    all_actions = torch.cat([act.unsqueeze(0), a_rand, a_pi, a_next_pi])  # [3N+1,B,A]
    q = module.q_values(obs.unsqueeze(0).expand(3 * n + 1, -1, -1), all_actions)  # [E,3N+1,B]
    q_data, q_pi, q_next_pi = q[:, 0], q[:, 1 + n:1 + 2 * n], q[:, 1 + 2 * n:]
    if config.calibrated:
        reference = config.reward_scale * batch[RETURNS_TO_GO]  # [B]
        q_pi, q_next_pi = calibrate(q_pi, reference), calibrate(q_next_pi, reference)
    logits = penalty_logits(q[:, 1:1 + n], ops.uniform_box_log_density(low, high), q_pi, logp_pi, q_next_pi, logp_next_pi)
    gap = conservative_gap(q_data, logits, config.cql_temperature)  # [E]

    alpha = module.log_alpha.exp()
    with torch.no_grad():
        next_v = ops.twin_min(module.target_q_values(next_obs, a_next))
        if config.backup_entropy:
            next_v = next_v - alpha * logp_next
        y = ops.td_target(config.reward_scale * batch[REWARDS], batch[TERMINATEDS], next_v, config.gamma)

    if config.lagrangian:
        cql_alpha = module.log_cql_alpha.exp().clamp(0.0, config.max_cql_alpha).detach()
        penalty = config.cql_weight * cql_alpha * (gap - config.target_action_gap).sum()
    else:
        cql_alpha = torch.ones((), device=obs.device)
        penalty = config.cql_weight * gap.sum()
    td = ops.ensemble_mse(q_data, y)
    critic = td + penalty

    if update_index < config.bc_warmup_updates:
        actor = bc_actor_loss(logp_new, module.action_log_prob(obs, act), alpha)
    else:
        actor = actor_loss(logp_new, ops.twin_min(module.q_values(obs, a_new)), alpha)
    target_entropy = -float(act.shape[-1]) if config.target_entropy is None else config.target_entropy
    losses = {"actor": actor, "critic": critic,
              "alpha": temperature_loss(module.log_alpha, logp_new, target_entropy)}
    if config.lagrangian:
        losses["cql_alpha"] = lagrange_loss(module.log_cql_alpha, gap, config.target_action_gap,
                                            config.max_cql_alpha)
    metrics = {
        "cql/td_loss": td.detach(), "cql/gap": gap.detach().mean(), "cql/cql_alpha": cql_alpha,
        "cql/alpha": alpha.detach(), "cql/entropy": -logp_new.detach().mean(),
        "cql/q_data_mean": q_data.detach().mean(), "cql/target_mean": y.mean(),
    }
    return LossOut(losses=losses, metrics=metrics)


def cql_discrete_loss(batch: dict[str, Tensor], module, config: CQLConfig) -> LossOut:
    """Discrete CQL: {critic} = double-DQN TD loss + α'·(logsumexp_a Q − Q(s, a_data))."""
    obs, act, next_obs = batch[OBS], batch[ACTIONS], batch[NEXT_OBS]
    q_all = module.all_q_values(obs)  # [E,B,A]
    with torch.no_grad():  # apart from Q(s): in one forward with it, the backward covered 2B rows (~10% slower)
        next_v = double_dqn_next_value(module.all_q_values(next_obs), module.target_all_q_values(next_obs))
        y = ops.td_target(config.reward_scale * batch[REWARDS], batch[TERMINATEDS], next_v, config.gamma)
    q_data = q_all.gather(-1, act.long().view(1, -1, 1).expand(q_all.shape[0], -1, 1)).squeeze(-1)
    td = ops.ensemble_mse(q_data, y)
    reference = config.reward_scale * batch[RETURNS_TO_GO] if config.calibrated else None
    gap = discrete_conservative_gap(q_all, act, reference)
    critic = td + config.cql_weight * gap.sum()
    metrics = {"cql/td_loss": td.detach(), "cql/gap": gap.detach().mean(),
               "cql/q_data_mean": q_data.detach().mean(), "cql/target_mean": y.mean()}
    return LossOut(losses={"critic": critic}, metrics=metrics)
