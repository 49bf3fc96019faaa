"""Shared maths as small pure functions, each tested against hand-computed numbers.

Every algorithm uses these instead of re-deriving them: returns, advantages,
advantage weights, target-network updates, expectile regression, twin-critic
minimum and the density of uniform actions over a box.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

__all__ = [
    "discounted_cumsum",
    "segment_discounted_cumsum",
    "gae",
    "awr_weights",
    "soft_update",
    "hard_update",
    "expectile_loss",
    "twin_min",
    "uniform_box_log_density",
    "update_running_mean",
    "td_target",
    "ensemble_mse",
]


def discounted_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """``y[t] = sum_k gamma^k x[t+k]`` over one episode (1-D), in float64 then cast back."""
    x = np.asarray(x)
    return segment_discounted_cumsum(x, np.array([len(x)]), gamma)


def segment_discounted_cumsum(x: np.ndarray, lengths: np.ndarray, gamma: float) -> np.ndarray:
    """Discounted cumulative sums of consecutive segments of ``x`` (segment i has ``lengths[i]`` steps).

    Vectorised over segments: the episodes are laid side by side in a padded
    ``[num_segments, max_len]`` array and swept once backwards in time.
    """
    x = np.asarray(x)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.sum() != len(x):
        raise ValueError(f"segment lengths sum to {lengths.sum()}, but x has {len(x)} entries")
    if len(x) == 0:
        return x.copy()
    n, width = len(lengths), int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    col = np.arange(len(x)) - np.repeat(starts, lengths)
    row = np.repeat(np.arange(n), lengths)
    padded = np.zeros((n, width), dtype=np.float64)
    padded[row, col] = x
    out = np.empty_like(padded)
    acc = np.zeros(n, dtype=np.float64)
    for t in range(width - 1, -1, -1):
        acc = padded[:, t] + gamma * acc
        out[:, t] = acc
    return out[row, col].astype(x.dtype if x.dtype.kind == "f" else np.float64)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminateds: np.ndarray,
    lengths: np.ndarray,
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalised advantage estimation per segment (Schulman et al. 2016).

    ``delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)``;
    ``A_t = sum_k (gamma lam)^k delta_{t+k}`` within each segment.
    """
    deltas = rewards + gamma * (1.0 - terminateds) * next_values - values
    return segment_discounted_cumsum(np.asarray(deltas, dtype=np.float64), lengths, gamma * lam).astype(np.float32)


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
