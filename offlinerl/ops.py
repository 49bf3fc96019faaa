"""Shared maths as pure, tested functions.

PLACEHOLDER on branch cql-iql with the signatures of TRAINING_API.md; the
training-core branch owns this file and its version replaces this one at merge.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "awr_weights",
    "ensemble_mse",
    "expectile_loss",
    "soft_update",
    "td_target",
    "twin_min",
    "uniform_box_log_density",
]


def expectile_loss(diff: Tensor, expectile: float) -> Tensor:
    """|τ − 1[diff < 0]| · diff² elementwise, the asymmetric L2 of IQL (Kostrikov et al. 2021)."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff.square()


def awr_weights(adv: Tensor, beta: float, max_weight: float) -> Tensor:
    """min(exp(β·A), max_weight) (Peng et al. 2019)."""
    return torch.exp(torch.clamp(beta * adv.detach(), max=math.log(max_weight)))


def twin_min(q: Tensor) -> Tensor:
    """Minimum over the leading ensemble dimension."""
    return q.min(dim=0).values


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """θ' ← (1 − τ)·θ' + τ·θ for every parameter and floating buffer."""
    for t, s in zip(target.parameters(), source.parameters()):
        t.lerp_(s, tau)


def uniform_box_log_density(low, high) -> Tensor:
    """log density of the uniform distribution over a box: −Σ log(high − low)."""
    low_t = torch.as_tensor(low, dtype=torch.float64)
    high_t = torch.as_tensor(high, dtype=torch.float64)
    return -(torch.log(high_t - low_t).sum()).to(torch.float32)


def td_target(rewards: Tensor, terminateds: Tensor, next_value: Tensor, gamma: float) -> Tensor:
    """r + γ·(1 − terminated)·V(s'): a truncated step still bootstraps, a terminated one does not."""
    return rewards + gamma * (1.0 - terminateds) * next_value


def ensemble_mse(q: Tensor, target: Tensor) -> Tensor:
    """Σ_e mean_b (q[e, b] − target[b])²: the regression loss of an ensemble of critics."""
    return (q - target.unsqueeze(0)).square().mean(dim=-1).sum()
