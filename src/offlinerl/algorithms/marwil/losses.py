"""MARWIL losses (Wang et al. 2018, "Exponentially Weighted Imitation Learning for Batched Historical Data").

``A = R_t - V(s_t)``;
``c^2 <- c^2 + rate * (E[A^2] - c^2)`` (moving average of squared advantages);
``L_pi = -E[min(exp(beta * A / c), max_weight) * log pi(a|s)]``;
``L_V = vf_coeff * 0.5 * E[(R_t - V(s_t))^2]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from offlinerl import ops
from offlinerl.algorithms.marwil.config import MARWILConfig
from offlinerl.core import columns as C
from offlinerl.core.loss import LossOut

__all__ = ["advantages", "update_sq_adv_norm", "marwil_loss"]


def advantages(batch: Mapping[str, torch.Tensor], fwd_out: Mapping[str, Any]) -> torch.Tensor:
    """``R_t - V(s_t)``: ``[B]`` (carries the value gradient)."""
    return batch[C.RETURNS_TO_GO] - fwd_out[C.VALUES]


def update_sq_adv_norm(sq_adv_norm: torch.Tensor, batch_sq_adv: torch.Tensor, rate: float) -> torch.Tensor:
    """The new moving average ``c^2`` (a new tensor; no gradient)."""
    return ops.update_running_mean(sq_adv_norm, batch_sq_adv.detach(), rate)


def marwil_loss(batch: Mapping[str, torch.Tensor], fwd_out: Mapping[str, Any], config: MARWILConfig,
                sq_adv_norm: torch.Tensor) -> LossOut:
    """Policy and value losses given the (already updated) squared-advantage norm ``c^2``."""
    adv = advantages(batch, fwd_out)  # [B]
    logp = fwd_out[C.ACTION_DIST].log_prob(batch[C.ACTIONS])  # [B]
    scaled = adv.detach() / (torch.sqrt(sq_adv_norm) + 1e-8)
    weights = ops.awr_weights(scaled, config.beta, config.max_weight)  # [B]
    actor = -(weights * logp).mean()
    value = config.vf_coeff * 0.5 * adv.pow(2).mean()
    return LossOut(
        losses={"actor": actor, "value": value},
        metrics={
            "actor/logp_mean": logp.mean().detach(),
            "marwil/weights_mean": weights.mean(),
            "marwil/weights_max": weights.max(),
            "marwil/sq_adv_norm": sq_adv_norm.detach(),
            "value/explained_var": 1.0 - adv.detach().var() / (batch[C.RETURNS_TO_GO].var() + 1e-8),
        },
    )
