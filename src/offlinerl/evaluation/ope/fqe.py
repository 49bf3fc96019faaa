"""Fitted Q evaluation (Le, Voloshin & Yue 2019, "Batch policy learning under constraints").

Q̂ of a fixed policy π is fit by repeated regression on the dataset's transitions:

    Q̂(s, a) ← r + γ (1 − terminated) Σ_k w_k Q̂_target(s′, a′_k)

where ``(a′_k, w_k)`` describe π at s′: one action with weight 1 for a
deterministic policy, every action with its probability for a discrete
stochastic one. π never changes during the fit, so its next actions are
computed once, before the first update. A truncated step (time limit) still
bootstraps; only ``terminated`` stops it. As in the paper, the fit is a
sequence of regressions: the target network is a hard copy of Q̂, renewed every
``target_update_interval`` steps (one FQE iteration, warm-started). Bootstrapped
values are clipped to the range any policy's value lies in, [min(r, 0), max(r, 0)]
/ (1 − γ): where π picks actions the data never shows, Q̂_target extrapolates, and
without the clip a hard-copied target can feed that error back into itself until
it diverges (an IQL checkpoint reached 235 on CartPole, whose values are ≤ 100).
The clipped operator is still a γ-contraction with the same fixed point. Rewards
are scaled by (1 − γ) / max|r| inside the fit so values stay of order one;
:class:`QNetwork` returns env units.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from offlinerl import ops
from offlinerl.core.networks import MLP

__all__ = ["FQEConfig", "FQEData", "QNetwork", "fit_fqe"]


@dataclass(frozen=True, kw_only=True)
class FQEConfig:
    """How FQE fits its Q network.

    The defaults are set by the number of backups, not by the network: Q̂ reaches the policy's value
    only after about ln(1/ε)/(1 − γ) target renewals (γ^K of the value is still missing after K; 300
    for 5% at γ = 0.99), and each renewal's regression is only partly converged, so FQE needs more
    iterations than that. 10,000 steps with a copy every 10 give 1,000 iterations; the previous
    5,000 steps of Polyak τ = 0.02 gave ~100 and estimated every good CartPole policy at ~52 when
    the truth was 72–99 (``benchmarks/ope_validation.py``). A 64×64 network is enough for
    low-dimensional control and makes a step ~4× cheaper than 256×256 (the measured time of a fit at
    these defaults is in docs/ope.md, "Timing"). Raise ``num_updates`` for γ closer to 1: the fit reports ``fqe/horizon_reached``
    = 1 − γ^iterations.
    """

    num_updates: int = 10_000
    """Gradient steps (one mini-batch each)."""
    target_update_interval: int = 10
    """Steps per FQE iteration: the target network is a hard copy of Q̂, renewed every this many steps."""
    batch_size: int = 256
    """Transitions per gradient step."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the Q network's MLP."""
    lr: float = 1e-3
    """Adam learning rate."""
    seed: int = 0
    """Seed of the network's initialisation and of the mini-batch draws."""

    def __post_init__(self) -> None:
        for name in ("num_updates", "target_update_interval", "batch_size", "lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"FQEConfig.{name} must be > 0, got {getattr(self, name)!r}")

    @property
    def num_iterations(self) -> int:
        """Target copies (Bellman backups) over the fit."""
        return -(-self.num_updates // self.target_update_interval)


@dataclass(frozen=True)
class FQEData:
    """The transitions FQE regresses on, with the evaluated policy's next actions (all tensors, N rows)."""

    obs: torch.Tensor
    """``[N, D]`` float32, preprocessed as the policy sees them."""
    actions: torch.Tensor
    """``[N]`` int64 (Discrete) or ``[N, A]`` float32 (Box): the data actions."""
    rewards: torch.Tensor
    """``[N]`` float32."""
    next_obs: torch.Tensor
    """``[N, D]`` float32."""
    terminateds: torch.Tensor
    """``[N]`` float32, 1 = no bootstrap."""
    next_actions: torch.Tensor
    """``[N, K]`` int64 or ``[N, K, A]`` float32: π's actions at ``next_obs``."""
    next_weights: torch.Tensor
    """``[N, K]`` float32, rows summing to 1: their probabilities under π."""


class QNetwork(nn.Module):
    """Q(s, a) for Discrete actions (one output per action) or bounded Box ones (the action, scaled to
    [−1, 1], concatenated to the state); outputs are in env reward units."""

    def __init__(self, obs_dim: int, action_space: gym.Space, hidden: Sequence[int], value_scale: float = 1.0) -> None:
        super().__init__()
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete:
            self.net = MLP(obs_dim, hidden, int(action_space.n))
        elif isinstance(action_space, gym.spaces.Box) and np.all(np.isfinite([action_space.low, action_space.high])):
            low = torch.as_tensor(action_space.low, dtype=torch.float32).reshape(-1)
            high = torch.as_tensor(action_space.high, dtype=torch.float32).reshape(-1)
            self.register_buffer("action_center", (high + low) / 2)
            self.register_buffer("action_half", ((high - low) / 2).clamp_min(1e-6))
            self.net = MLP(obs_dim + low.numel(), hidden, 1)
        else:
            raise ValueError(f"FQE supports Discrete and bounded Box action spaces, not {action_space}")
        self.register_buffer("value_scale", torch.tensor(float(value_scale)))

    def _raw(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Scaled Q of ``actions`` ``[B, K(, A)]`` at ``obs`` ``[B, D]``: ``[B, K]``."""
        if self.discrete:
            return self.net(obs).gather(1, actions.long())  # [B, K]
        k = actions.shape[1]
        a = (actions - self.action_center) / self.action_half  # [B, K, A]
        x = torch.cat([obs.unsqueeze(1).expand(-1, k, -1), a], dim=-1)  # [B, K, D + A]
        return self.net(x).squeeze(-1)  # [B, K]

    def expected(self, obs: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Σ_k w_k Q(s, a_k) in scaled units: ``[B]``."""
        return (self._raw(obs, actions) * weights).sum(-1)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of one action per state (``[B]`` or ``[B, A]``), in env units: ``[B]``."""
        return self._raw(obs, actions.unsqueeze(1))[:, 0] * self.value_scale

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Σ_k w_k Q(s, a_k) in env units: ``[B]`` (V(s) when the pairs describe π at s)."""
        return self.expected(obs, actions, weights) * self.value_scale


def fit_fqe(data: FQEData, action_space: gym.Space, gamma: float, config: FQEConfig = FQEConfig(),
            device: str = "cpu") -> tuple[QNetwork, dict[str, float]]:
    """Fit Q̂ of the policy described by ``data.next_actions``/``next_weights`` on ``device`` (the data is moved
    there, mini-batch draws stay on the CPU's generator); returns it, back on the CPU, and metrics."""
    if not 0 <= gamma < 1:
        raise ValueError(f"FQE needs 0 <= gamma < 1, got {gamma}")
    n = len(data.rewards)
    if n == 0:
        raise ValueError("FQE needs at least one transition")
    torch.manual_seed(config.seed)
    max_abs = float(data.rewards.abs().max())
    scale = (1 - gamma) / max_abs if max_abs > 0 else 1.0  # values of order one inside the fit
    data = FQEData(**{f.name: getattr(data, f.name).to(device) for f in dataclasses.fields(data)})
    q = QNetwork(data.obs.shape[1], action_space, config.hidden, value_scale=1 / scale).to(device)
    target = copy.deepcopy(q).requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=config.lr)
    gen = torch.Generator().manual_seed(config.seed)
    rewards = data.rewards * scale
    losses = torch.zeros(config.num_updates, device=device)
    with torch.enable_grad():  # callers may hold no_grad while preparing the data
        _regress(q, target, opt, data, rewards, gamma, config, gen, losses)
    tail = losses[-max(1, config.num_updates // 10):]
    return q.cpu().eval(), {"fqe/loss_final": float(tail.mean()) * float(q.value_scale) ** 2, "fqe/updates": config.num_updates,
                      "fqe/iterations": config.num_iterations, "fqe/horizon_reached": 1 - gamma ** config.num_iterations}


def _regress(q: QNetwork, target: QNetwork, opt: torch.optim.Optimizer, data: FQEData, rewards: torch.Tensor,
             gamma: float, config: FQEConfig, gen: torch.Generator, losses: torch.Tensor) -> None:
    """``config.num_updates`` steps of ``(Q̂(s, a) − [r + γ (1 − d) E_π Q̂_target(s′, ·)])²``."""
    n = len(rewards)
    v_min, v_max = float(rewards.min().clamp(max=0)) / (1 - gamma), float(rewards.max().clamp(min=0)) / (1 - gamma)
    for step in range(config.num_updates):
        idx = torch.randint(0, n, (min(config.batch_size, n),), generator=gen).to(rewards.device)
        with torch.no_grad():
            next_q = target.expected(data.next_obs[idx], data.next_actions[idx], data.next_weights[idx])  # [B]
            y = ops.td_target(rewards[idx], data.terminateds[idx], next_q.clamp(v_min, v_max), gamma)  # [B]
        pred = q._raw(data.obs[idx], data.actions[idx].unsqueeze(1))[:, 0]  # [B]
        loss = torch.nn.functional.mse_loss(pred, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % config.target_update_interval == 0:
            target.load_state_dict(q.state_dict())
        losses[step] = loss.detach()
