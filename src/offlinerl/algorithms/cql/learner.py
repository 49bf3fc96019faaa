"""``CQLLearner``: one optimizer per loss term, Polyak targets after every update.

Continuous: "actor" (policy), "critic" (Q ensemble), "alpha" (log α), and "cql_alpha"
(log α') when ``lagrangian``. Discrete: "critic" only.
"""

from __future__ import annotations

import math

import torch

from offlinerl.algorithms.cql.losses import cql_continuous_loss, cql_discrete_loss
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import ActorCriticAPI, RLModule, TargetNetworkAPI, require_api

__all__ = ["CQLLearner"]


class CQLLearner(Learner):
    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict[str, torch.optim.Optimizer]:
        discrete = getattr(module, "discrete", False)
        require_api(module, ActorCriticAPI, "CQL", ("discrete",) if discrete else ("discrete", "log_alpha", "log_cql_alpha"))
        require_api(module, TargetNetworkAPI, "CQL")
        cfg = self.config
        opts = {"critic": torch.optim.Adam(module.critic_parameters(), lr=cfg.critic_lr)}
        if module.discrete:
            return opts
        with torch.no_grad():  # initial temperatures (a restored checkpoint overwrites them)
            module.log_alpha.fill_(math.log(cfg.initial_alpha))
            module.log_cql_alpha.fill_(math.log(cfg.initial_cql_alpha))
        opts["actor"] = torch.optim.Adam(module.policy_parameters(), lr=cfg.actor_lr)
        opts["alpha"] = torch.optim.Adam([module.log_alpha], lr=cfg.alpha_lr)
        if cfg.lagrangian:
            opts["cql_alpha"] = torch.optim.Adam([module.log_cql_alpha], lr=cfg.cql_alpha_lr)
        return opts

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        if module.discrete:
            return cql_discrete_loss(batch, module, self.config)
        return cql_continuous_loss(batch, module, self.config, update_index=self.timestep)

    def after_gradient_based_update(self, timestep: int) -> None:
        for _, module in self.module.items():
            module.sync_target_networks(self.config.tau)
