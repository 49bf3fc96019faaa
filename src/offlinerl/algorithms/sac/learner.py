"""``SACLearner``: optimizers "actor" (policy), "critic" (Q ensemble) and "alpha" (log α), every update;
Polyak targets after every update."""

from __future__ import annotations

import math

import torch

from offlinerl.algorithms.sac.losses import sac_loss
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import ActorCriticAPI, RLModule, TargetNetworkAPI, require_api

__all__ = ["SACLearner"]


class SACLearner(Learner):
    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict[str, torch.optim.Optimizer]:
        require_api(module, ActorCriticAPI, "SAC", ("sample_actions", "log_alpha"))
        require_api(module, TargetNetworkAPI, "SAC")
        cfg = self.config
        with torch.no_grad():  # the initial temperature (a restored checkpoint overwrites it)
            module.log_alpha.fill_(math.log(cfg.initial_alpha))
        return {"actor": torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr),
                "critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr),
                "alpha": torch.optim.Adam([module.log_alpha], lr=cfg.alpha_lr)}

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        return sac_loss(batch, module, self.config)

    def after_gradient_based_update(self, timestep: int) -> None:
        for _, module in self.module.items():
            module.sync_target_networks(self.config.tau)
