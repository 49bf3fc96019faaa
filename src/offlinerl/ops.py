"""Shared maths as small pure functions, each tested against hand-computed numbers.

Every algorithm uses these instead of re-deriving them: advantage weights,
target-network updates, expectile regression, twin-critic minimum and the density
of uniform actions over a box, the share of actions at a box's bounds. Returns and advantages over episodes are numpy, in
``offlinerl.discount`` (connectors use them, and must not need torch).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

__all__ = [
    "awr_weights",
    "soft_update",
    "hard_update",
    "expectile_loss",
    "twin_min",
    "uniform_box_log_density",
    "update_running_mean",
    "td_target",
    "ensemble_mse",
    "soft_actor_loss",
    "temperature_loss",
    "at_bounds",
]


def awr_weights(advantages: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    """Advantage-weighted regression weights ``min(exp(beta * A), max_weight)`` (no gradient).

    Clamped in log space first so large advantages never overflow to ``inf``.
    """
    a = advantages.detach()
    return torch.exp(torch.clamp(beta * a, max=float(np.log(max_weight))))


@torch.no_grad()
def soft_update(target: torch.nn.Module | Iterable[torch.Tensor], source: torch.nn.Module | Iterable[torch.Tensor], tau: float) -> None:
    """Polyak averaging in place: ``target <- (1 - tau) target + tau source``."""
    t_params = list(target.parameters()) if isinstance(target, torch.nn.Module) else list(target)
    s_params = list(source.parameters()) if isinstance(source, torch.nn.Module) else list(source)
    if len(t_params) != len(s_params):
        raise ValueError(f"soft_update: target has {len(t_params)} tensors, source {len(s_params)}")
    torch._foreach_lerp_(t_params, s_params, tau)


@torch.no_grad()
def hard_update(target: torch.nn.Module, source: torch.nn.Module) -> None:
    """Copy every parameter and buffer of ``source`` into ``target``."""
    target.load_state_dict(source.state_dict())


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """Asymmetric squared loss ``|expectile - 1(diff < 0)| * diff^2`` (elementwise; IQL, Kostrikov et al. 2021)."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff.pow(2)


def twin_min(q: torch.Tensor) -> torch.Tensor:
    """Minimum over the leading ensemble dimension: ``[E, B, ...] -> [B, ...]``."""
    return q.min(dim=0).values


def uniform_box_log_density(low: torch.Tensor | np.ndarray, high: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Log-density of a uniform distribution over the box: ``-sum(log(high - low))``."""
    low_t = torch.as_tensor(low, dtype=torch.float64)
    high_t = torch.as_tensor(high, dtype=torch.float64)
    return -(torch.log(high_t - low_t).sum()).to(torch.float32)


def update_running_mean(old: torch.Tensor, value: torch.Tensor, rate: float) -> torch.Tensor:
    """Exponential moving average ``old + rate * (value - old)`` (a new tensor; inputs untouched)."""
    return old + rate * (value.detach() - old)


def td_target(rewards: torch.Tensor, terminateds: torch.Tensor, next_value: torch.Tensor, gamma: float) -> torch.Tensor:
    """``r + gamma (1 - terminated) V(s')``: a truncated step still bootstraps, a terminated one does not."""
    return rewards + gamma * (1.0 - terminateds) * next_value


def ensemble_mse(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``sum_e mean_b (q[e, b] - target[b])^2``: the regression loss of an ensemble of critics ``[E, B]``."""
    return (q - target.unsqueeze(0)).square().mean(dim=-1).sum()


def soft_actor_loss(logp: torch.Tensor, q_min: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """SAC's policy loss ``mean(α·log π(ã|s) − min_e Q(s, ã))`` for ``ã ~ π(·|s)`` reparameterised; α a constant."""
    return (alpha.detach() * logp - q_min).mean()


def temperature_loss(log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """SAC's temperature loss ``−mean(log α · (log π + H̄))``: raises α while the entropy −log π is below H̄."""
    return -(log_alpha * (logp.detach() + target_entropy)).mean()


def at_bounds(actions: torch.Tensor, center: torch.Tensor, scale: torch.Tensor, margin: float = 0.01) -> torch.Tensor:
    """Share of the action components within ``margin`` half-ranges of a bound: ``|a − center| ≥ (1 − margin)·scale``,
    averaged over ``[B, A]`` (a scalar in [0, 1], no gradient). A tanh-squashed actor there has ~0 gradient."""
    return ((actions.detach() - center).abs() >= (1.0 - margin) * scale).float().mean()
