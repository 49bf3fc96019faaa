"""BC learner: one Adam ("actor") over the policy, the BC loss."""

from __future__ import annotations

import torch

from offlinerl.algorithms.bc.losses import bc_loss
from offlinerl.core.learner import Learner
from offlinerl.core.loss import LossOut

__all__ = ["BCLearner"]


def policy_parameters(module):
    """The policy's parameters: ``module.policy_parameters()`` if defined, else every parameter."""
    fn = getattr(module, "policy_parameters", None)
    return list(fn()) if fn is not None else list(module.parameters())


class BCLearner(Learner):
    def configure_optimizers_for_module(self, module_id, module):
        return {"actor": torch.optim.Adam(policy_parameters(module), lr=self.config.lr)}

    def compute_loss_for_module(self, module_id, module, batch, fwd_out) -> LossOut:
        return bc_loss(batch, fwd_out, self.config)
