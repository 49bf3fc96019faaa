"""``EDACLearner``: SAC's optimizers ("actor", "critic", "alpha") and Polyak targets, EDAC's losses."""

from __future__ import annotations

from offlinerl.algorithms.edac.losses import edac_loss
from offlinerl.algorithms.sac.learner import SACLearner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import ActorCriticAPI, RLModule, require_api

__all__ = ["EDACLearner"]


class EDACLearner(SACLearner):
    vectorizable = False  # the diversity term's action gradients: autograd inside the loss, which vmap cannot run

    def configure_optimizers_for_module(self, module_id: str, module: RLModule) -> dict:
        require_api(module, ActorCriticAPI, "EDAC", ("sample_actions", "log_alpha", "q_and_action_gradients"))
        return super().configure_optimizers_for_module(module_id, module)

    def compute_loss_for_module(self, module_id: str, module: RLModule, batch, fwd_out) -> LossOut:
        return edac_loss(batch, module, self.config)
