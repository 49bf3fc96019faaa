"""``TD3BCLearner``: "critic" every update; "actor" and the Polyak targets every policy_freq-th.

Update ``t`` (0-based, ``self.timestep`` before it runs) steps the actor when
``(t + 1) % policy_freq == 0`` - the 2nd, 4th, ... update, as in the paper's code. On the
other updates the actor loss is not computed at all, so the actor's optimizer does not step
(an Adam step on a zero gradient would still move the weights through its momentum) and no
forward pass is spent on it: those updates report the critic's metrics only, and
``Learner.run_updates`` averages the actor's over the updates that stepped it.
The smoothing noise comes from the learner's own generator (``Learner.generator``, saved in checkpoints), drawn
in ``random_draws`` (so each vectorised seed draws its own: ``offlinerl.core.seed_stack``).
``critic_loss_fn`` / ``actor_loss_fn``: the losses (ReBRAC's learner names its own).
"""

from __future__ import annotations

import torch

from offlinerl.algorithms.td3bc.losses import actor_loss, critic_loss
from offlinerl.core import columns as C
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import RLModule, TargetNetworkAPI, require_api

__all__ = ["TD3BCLearner", "TARGET_NOISE"]

#: Batch key of the target policy's smoothing noise (standard normal, ``[B, A]``).
TARGET_NOISE = "target_noise"


class TD3BCLearner(Learner):
    critic_loss_fn = staticmethod(critic_loss)
    actor_loss_fn = staticmethod(actor_loss)

    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict[str, torch.optim.Optimizer]:
        require_api(module, TargetNetworkAPI, "TD3+BC")
        return {"actor": torch.optim.Adam(module.policy_parameters(), lr=self.config.actor_lr),
                "critic": torch.optim.Adam(module.critic_parameters(), lr=self.config.critic_lr)}

    def updates_actor(self, index: int) -> bool:
        """Whether update ``index`` (0-based) steps the actor and the targets."""
        return (index + 1) % self.config.policy_freq == 0

    def random_draws(self, module_id: str, batch) -> dict[str, torch.Tensor]:
        actions = batch[C.ACTIONS]  # [B,A] standard normal; scaled and clipped in the loss
        return {TARGET_NOISE: torch.randn(actions.shape, generator=self.generator, dtype=actions.dtype, device=actions.device)}

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        noise = batch[TARGET_NOISE] if TARGET_NOISE in batch else torch.randn_like(batch[C.ACTIONS])
        critic = self.critic_loss_fn(batch, module, self.config, noise)
        if not self.updates_actor(self.timestep):
            return critic
        actor = self.actor_loss_fn(batch, module, self.config)
        return LossOut(losses={**critic.losses, **actor.losses}, metrics={**critic.metrics, **actor.metrics})

    def after_gradient_based_update(self, timestep: int) -> None:
        if self.updates_actor(timestep - 1):  # ``timestep`` counts the update just made
            for _, module in self.module.items():
                module.sync_target_networks(self.config.tau)
