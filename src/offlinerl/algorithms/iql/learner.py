"""``IQLLearner``: "actor", "critic" and "value" optimizers; Polyak target Q after every update."""

from __future__ import annotations

import torch

from offlinerl.algorithms.iql.losses import iql_loss
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import ActorCriticAPI, RLModule, StateValueAPI, TargetNetworkAPI, require_api

__all__ = ["IQLLearner"]


class IQLLearner(Learner):
    separable_losses = True  # each term meets the other terms' networks detached or under no_grad

    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict[str, torch.optim.Optimizer]:
        require_api(module, ActorCriticAPI, "IQL")
        require_api(module, StateValueAPI, "IQL")
        require_api(module, TargetNetworkAPI, "IQL")
        cfg = self.config
        return {
            "actor": torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr),
            "critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr),
            "value": torch.optim.Adam(module.value_parameters(), lr=cfg.value_lr),
        }

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        return iql_loss(batch, module, self.config)

    def after_gradient_based_update(self, timestep: int) -> None:
        for _, module in self.module.items():
            module.sync_target_networks(self.config.tau)
