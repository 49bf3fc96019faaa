"""``TD3BCRLModule``: a deterministic actor, a Q ensemble, and target copies of both.

- ``pi_encoder``/``pi_head``: ``π(s) = center + scale · tanh(head(encoder(s)))``, the
  action squashed into the Box bounds (center, scale: midpoint and half-range).
- ``q``: ``EnsembleMLP(E, obs + act -> 1)`` (twin critics = one batched module).
- ``target_pi_encoder``/``target_pi_head``/``target_q``: frozen copies moved by
  ``sync_target_networks(tau)`` (Polyak).

``forward_inference`` returns π(s); ``forward_exploration`` adds Gaussian noise
(``model_config["exploration_noise"]`` × half-range) and clips to the bounds, for online
use. ``inference_only=True`` builds the actor alone; a full module's state dict loads into it.
"""

from __future__ import annotations

import copy
from typing import Any, Iterator, Mapping

import gymnasium as gym
import torch
from torch import Tensor, nn

from offlinerl import ops
from offlinerl.core import columns as C
from offlinerl.core.default_module import build_encoder
from offlinerl.core.flatten import flat_dim
from offlinerl.core.networks import EnsembleMLP, Head
from offlinerl.core.rl_module import RLModule

__all__ = ["TD3BCRLModule", "TD3BC_MODEL_CONFIG"]

#: Defaults for the keys of ``model_config`` this module reads.
TD3BC_MODEL_CONFIG: dict[str, Any] = {
    "hidden": [256, 256],
    "critic_hidden": None,  # None: same as "hidden"
    "activation": "relu",
    "encoder": "auto",
    "num_critics": 2,
    "exploration_noise": 0.1,
}


class TD3BCRLModule(RLModule):
    """Deterministic policy and twin Q with their Polyak targets (TD3+BC)."""

    def setup(self) -> None:
        if not (isinstance(self.action_space, gym.spaces.Box) and len(self.action_space.shape) == 1):
            raise TypeError(f"TD3+BC needs continuous actions (a 1-D Box action space), got {self.action_space}")
        cfg = {**TD3BC_MODEL_CONFIG, **self.model_config}
        act_dim = int(self.action_space.shape[0])
        self.exploration_noise = float(cfg["exploration_noise"])
        self.pi_encoder, width = build_encoder(self.observation_space, cfg)
        self.pi_head = Head(width, act_dim)
        if self.inference_only:
            return
        critic_hidden = list(cfg["critic_hidden"] or cfg["hidden"])
        self.q = EnsembleMLP(int(cfg["num_critics"]), flat_dim(self.observation_space) + act_dim, 1, critic_hidden,
                             cfg["activation"])
        self.target_pi_encoder = copy.deepcopy(self.pi_encoder).requires_grad_(False)
        self.target_pi_head = copy.deepcopy(self.pi_head).requires_grad_(False)
        self.target_q = copy.deepcopy(self.q).requires_grad_(False)

    # -- acting -------------------------------------------------------------------------------
    def forward_inference(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        return {C.ACTIONS: self.actions(batch[C.OBS])}

    def forward_exploration(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        """π(s) + N(0, (exploration_noise · half-range)²), clipped to the bounds."""
        a = self.actions(batch[C.OBS])
        noisy = a + self.exploration_noise * self.action_scale * torch.randn_like(a)
        return {C.ACTIONS: torch.max(torch.min(noisy, self.action_high), self.action_low)}

    def forward_train(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        """Nothing precomputed: the TD3+BC losses call the methods below with the inputs they need."""
        return {}

    # -- what the losses call ---------------------------------------------------------------------
    def _squash(self, pre: Tensor) -> Tensor:
        return self.action_center + self.action_scale * torch.tanh(pre)  # [B, A] inside the bounds

    def actions(self, obs: Tensor) -> Tensor:
        """π(s): ``[B, O] -> [B, A]``."""
        return self._squash(self.pi_head(self.pi_encoder(obs)))

    def target_actions(self, obs: Tensor) -> Tensor:
        """π̄(s) of the target actor: ``[B, O] -> [B, A]``."""
        return self._squash(self.target_pi_head(self.target_pi_encoder(obs)))

    @staticmethod
    def _q_in(net: EnsembleMLP, obs: Tensor, actions: Tensor) -> Tensor:
        return net(torch.cat([obs, actions], dim=-1)).squeeze(-1)  # [E, B]

    def q_values(self, obs: Tensor, actions: Tensor) -> Tensor:
        """``Q_e(s, a)`` of every member: ``[B, O], [B, A] -> [E, B]``."""
        return self._q_in(self.q, obs, actions)

    def target_q_values(self, obs: Tensor, actions: Tensor) -> Tensor:
        return self._q_in(self.target_q, obs, actions)

    # -- capability protocols ------------------------------------------------------------------
    def compute_q_values(self, batch: Mapping[str, Tensor]) -> Tensor:
        return self.q_values(batch[C.OBS], batch[C.ACTIONS])

    def sync_target_networks(self, tau: float) -> None:
        ops.soft_update(self.target_pi_encoder, self.pi_encoder, tau)
        ops.soft_update(self.target_pi_head, self.pi_head, tau)
        ops.soft_update(self.target_q, self.q, tau)

    # -- parameter groups (each belongs to exactly one optimizer) -----------------------------------
    def policy_parameters(self) -> Iterator[nn.Parameter]:
        yield from self.pi_encoder.parameters()
        yield from self.pi_head.parameters()

    def critic_parameters(self) -> Iterator[nn.Parameter]:
        yield from self.q.parameters()
