"""MARWIL learner: policy ("actor") and value ("value") optimizers, the running advantage norm."""

from __future__ import annotations

import torch

from offlinerl.algorithms.bc.learner import policy_parameters
from offlinerl.algorithms.marwil.losses import advantages, marwil_loss, update_sq_adv_norm
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut
from offlinerl.core.rl_module import ValueFunctionAPI, require_api

__all__ = ["MARWILLearner"]


class MARWILLearner(Learner):
    separable_losses = True  # each term meets the other terms' networks detached or under no_grad

    def build(self):
        super().build()
        self.sq_adv_norm = {mid: torch.tensor(float(self.config.sq_adv_norm_start), device=self.device) for mid in self.module.keys()}
        return self

    def configure_optimizers_for_module(self, module_id, module):
        require_api(module, ValueFunctionAPI, "MARWIL")
        return {
            "actor": torch.optim.Adam(policy_parameters(module), lr=self.config.lr),
            "value": torch.optim.Adam(list(module.value_parameters()), lr=self.config.lr),
        }

    def compute_loss_for_module(self, module_id, module, batch, fwd_out) -> LossOut:
        # The norm update uses the mean over all learners, so DDP replicas weight identically.
        batch_sq_adv = self.distributed_mean(advantages(batch, fwd_out).detach().pow(2).mean())
        self.sq_adv_norm[module_id] = update_sq_adv_norm(self.sq_adv_norm[module_id], batch_sq_adv, self.config.sq_adv_norm_rate)
        return marwil_loss(batch, fwd_out, self.config, self.sq_adv_norm[module_id])

    def get_extra_state(self):
        return {"sq_adv_norm": {mid: t.detach().cpu() for mid, t in self.sq_adv_norm.items()}}

    def set_extra_state(self, state):
        for mid, t in state.get("sq_adv_norm", {}).items():
            self.sq_adv_norm[mid] = torch.as_tensor(t, device=self.device).clone()
