"""``ReBRACLearner``: TD3+BC's update schedule with ReBRAC's losses.

"critic" every update; "actor" and the Polyak targets every policy_freq-th (``TD3BCLearner``: the
optimizers, the schedule and the target syncs). Both losses are computed before any weight moves, as
for TD3+BC; the paper's code steps the actor against the critic just updated, one Adam step later.
"""

from __future__ import annotations

import torch

from offlinerl.algorithms.rebrac.losses import actor_loss, critic_loss
from offlinerl.algorithms.td3bc.learner import TD3BCLearner
from offlinerl.core import columns as C
from offlinerl.core import metrics as M
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import RLModule

__all__ = ["ReBRACLearner"]


class ReBRACLearner(TD3BCLearner):
    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        noise = torch.randn_like(batch[C.ACTIONS])  # [B,A] standard normal; scaled and clipped in the loss
        critic = critic_loss(batch, module, self.config, noise)
        if self.updates_actor(self.timestep):
            actor = actor_loss(batch, module, self.config)
            return LossOut(losses={**critic.losses, **actor.losses}, metrics={**critic.metrics, **actor.metrics})
        with torch.no_grad():  # reported, not stepped: every update reports the same metric names
            actor = actor_loss(batch, module, self.config)
        return LossOut(losses=critic.losses,
                       metrics={**critic.metrics, **actor.metrics, M.loss("actor"): actor.losses["actor"]})
