"""EDAC losses (An et al. 2021): SAC's, with the ensemble-diversity term in the critics' loss.

Per update on a batch (s, a, r, s', terminated), E members, g_e = ∇_a Q_e(s, a) at the data's actions:
  critic = Σ_e mean (Q_e(s, a) − y)²  +  η · diversity,       y: SAC's soft backup over min_e Q̄_e
  diversity = mean_s [ Σ_{e≠f} ⟨ĝ_e, ĝ_f⟩ ] / (E − 1),        ĝ = g / ‖g‖   (``diversity_loss``)
  actor, alpha: SAC's (``offlinerl.algorithms.sac.losses``), the actor on min_e Q_e(s, ã)

The diversity term pushes the members' gradients with respect to the action apart, so that they disagree (and
their minimum is low) on actions away from the data; its gradient reaches the critics through the action
gradients (a double backward). The module provides ``q_and_action_gradients(obs, actions) -> (Q [E,B], g [E,B,A])``.
"""

from __future__ import annotations

from torch import Tensor

from offlinerl import ops
from offlinerl.algorithms.edac.config import EDACConfig
from offlinerl.algorithms.sac.losses import actor_loss, critic_loss, policy_samples_and_target
from offlinerl.core.columns import ACTIONS, OBS
from offlinerl.core.loss import LossOut

__all__ = ["diversity_loss", "edac_loss"]


def diversity_loss(grads: Tensor, eps: float = 1e-10) -> Tensor:
    """``mean_b Σ_{e≠f} ⟨ĝ_e, ĝ_f⟩ / (E − 1)`` of the members' action gradients ``grads`` [E,B,A], each normalised
    to unit length; the pairs' sum is ‖Σ_e ĝ_e‖² − Σ_e ‖ĝ_e‖² (E·B·A operations, not E²·B·A)."""
    unit = grads / (grads.norm(dim=-1, keepdim=True) + eps)
    pairs = unit.sum(0).pow(2).sum(-1) - unit.pow(2).sum((0, 2))  # [B]
    return pairs.mean() / (grads.shape[0] - 1)


def edac_loss(batch: dict[str, Tensor], module, config: EDACConfig) -> LossOut:
    """EDAC's {actor, critic, alpha} on one batch (see the module docstring)."""
    obs, act = batch[OBS], batch[ACTIONS]
    a_new, logp_new, y = policy_samples_and_target(batch, module, config)
    q_data, grads = module.q_and_action_gradients(obs, act)  # [E,B], [E,B,A]
    critic = critic_loss(q_data, y)
    diversity = diversity_loss(grads)
    losses = {"critic": critic.losses["critic"] + config.eta * diversity} if config.eta else dict(critic.losses)
    actor = actor_loss(logp_new, ops.twin_min(module.q_values(obs, a_new)), module.log_alpha,
                       config.entropy_target(act.shape[-1]))
    return LossOut(losses={**losses, **actor.losses},
                   metrics={**critic.metrics, **actor.metrics, "edac/diversity": diversity.detach(),
                            "edac/q_std": q_data.detach().std(0).mean()})
