"""BC loss: ``L(theta) = -E_{(s,a)~D}[log pi_theta(a|s)] - c_H * E[H(pi_theta(.|s))]``."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from offlinerl.algorithms.bc.config import BCConfig
from offlinerl.core import columns as C
from offlinerl.core.loss import LossOut

__all__ = ["bc_loss"]


def bc_loss(batch: Mapping[str, torch.Tensor], fwd_out: Mapping[str, Any], config: BCConfig) -> LossOut:
    """Negative log-likelihood of the data actions under the policy in ``fwd_out[ACTION_DIST]``."""
    dist = fwd_out[C.ACTION_DIST]
    logp_mean = dist.log_prob(batch[C.ACTIONS]).mean()
    if not config.entropy_coeff:
        return LossOut(losses={"actor": -logp_mean}, metrics={"actor/logp_mean": logp_mean.detach()})
    entropy = dist.entropy().mean()
    loss = -logp_mean - config.entropy_coeff * entropy
    return LossOut(losses={"actor": loss}, metrics={"actor/logp_mean": logp_mean.detach(), "actor/entropy": entropy.detach()})
