"""``ReBRACRLModule``: TD3+BC's module (``TD3BCRLModule``) with LayerNorm-able, deeper networks.

- ``pi_encoder``/``pi_head``: ``π(s) = center + scale · tanh(head(trunk(s)))``; the trunk is
  ``[Linear, activation, LayerNorm?] × len(hidden)`` over the flattened observation.
- ``q``: ``MemberCritics(E, obs + act -> 1)``, E such trunks each with a linear output.
- ``target_pi_encoder``/``target_pi_head``/``target_q``: frozen copies moved by
  ``sync_target_networks(tau)`` (Polyak).

LayerNorm follows each hidden layer's activation, as in the paper's code; ``model_config`` keys
``actor_layer_norm`` and ``critic_layer_norm`` switch it. The initialisation is the paper's code's
(ReBRAC and CORL, from EDAC): hidden weights as ``nn.Linear``'s (U(±1/√fan_in)), hidden biases 0.1,
and output layers U(±1e-3) for the actor and U(±3e-3) for the critics, so that the first actions sit
near the middle of the bounds (tanh unsaturated) and the first Q values near 0 (``paper_init``). Acting, Q evaluation, target syncing and the
parameter groups are ``TD3BCRLModule``'s; only the networks differ.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

import gymnasium as gym
import torch
from torch import Tensor, nn

from offlinerl.algorithms.td3bc.module import TD3BC_MODEL_CONFIG, TD3BCRLModule
from offlinerl.core.flatten import flat_dim
from offlinerl.core.networks import Head, activation

__all__ = ["ReBRACRLModule", "REBRAC_MODEL_CONFIG", "MemberCritics", "trunk", "init_like_paper"]

#: Defaults for the keys of ``model_config`` this module reads.
REBRAC_MODEL_CONFIG: dict[str, Any] = {
    **TD3BC_MODEL_CONFIG,
    "hidden": [256, 256, 256],
    "actor_layer_norm": False,
    "critic_layer_norm": True,
    "paper_init": True,
}

#: Hidden-layer bias and output-layer bounds of the paper's initialisation (``init_like_paper``).
HIDDEN_BIAS, ACTOR_OUT_BOUND, CRITIC_OUT_BOUND = 0.1, 1e-3, 3e-3


def trunk(in_dim: int, hidden: Sequence[int], act: str, layer_norm: bool) -> nn.Sequential:
    """``[Linear, activation, LayerNorm (if layer_norm)]`` per hidden width: ``[B, in] -> [B, hidden[-1]]``."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), activation(act)()]
        if layer_norm:
            layers.append(nn.LayerNorm(width))
        in_dim = width
    return nn.Sequential(*layers)


@torch.no_grad()
def init_like_paper(hidden: nn.Module, output: nn.Linear, out_bound: float) -> None:
    """The paper's initialisation: every ``nn.Linear`` in ``hidden`` keeps its weights and gets bias
    ``HIDDEN_BIAS``; ``output``'s weights and bias are drawn from U(±out_bound)."""
    for layer in hidden.modules():
        if isinstance(layer, nn.Linear):
            layer.bias.fill_(HIDDEN_BIAS)
    output.weight.uniform_(-out_bound, out_bound)
    output.bias.uniform_(-out_bound, out_bound)


class MemberCritics(nn.Module):
    """``num_members`` independent ``trunk + Linear(-> out)`` networks: ``[B, in] -> [E, B, out]``."""

    def __init__(self, num_members: int, in_dim: int, out_dim: int, hidden: Sequence[int], act: str,
                 layer_norm: bool) -> None:
        super().__init__()
        self.num_members = num_members
        self.members = nn.ModuleList(
            nn.Sequential(trunk(in_dim, hidden, act, layer_norm), Head(hidden[-1] if hidden else in_dim, out_dim))
            for _ in range(num_members))

    def init_like_paper(self) -> None:
        """Each member's trunk and output layer as ``init_like_paper`` (output bound ``CRITIC_OUT_BOUND``)."""
        for member in self.members:
            init_like_paper(member[0], member[1], CRITIC_OUT_BOUND)

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([member(x) for member in self.members])  # [E, B, out]


class ReBRACRLModule(TD3BCRLModule):
    """Deterministic policy and a Q ensemble with their Polyak targets (ReBRAC)."""

    def setup(self) -> None:
        if not (isinstance(self.action_space, gym.spaces.Box) and len(self.action_space.shape) == 1):
            raise TypeError(f"ReBRAC needs continuous actions (a 1-D Box action space), got {self.action_space}")
        cfg = {**REBRAC_MODEL_CONFIG, **self.model_config}
        if cfg["encoder"] == "cnn":
            raise ValueError("ReBRAC builds MLPs over flattened observations; model_config.encoder 'cnn' is not supported")
        obs_dim, act_dim = flat_dim(self.observation_space), int(self.action_space.shape[0])
        hidden, act = list(cfg["hidden"]), cfg["activation"]
        self.exploration_noise = float(cfg["exploration_noise"])
        self.pi_encoder = trunk(obs_dim, hidden, act, bool(cfg["actor_layer_norm"]))
        self.pi_head = Head(hidden[-1] if hidden else obs_dim, act_dim)
        paper_init = bool(cfg["paper_init"])
        if paper_init:
            init_like_paper(self.pi_encoder, self.pi_head, ACTOR_OUT_BOUND)
        if self.inference_only:
            return
        self.q = MemberCritics(int(cfg["num_critics"]), obs_dim + act_dim, 1, list(cfg["critic_hidden"] or hidden), act,
                               bool(cfg["critic_layer_norm"]))
        if paper_init:
            self.q.init_like_paper()
        self.target_pi_encoder = copy.deepcopy(self.pi_encoder).requires_grad_(False)
        self.target_pi_head = copy.deepcopy(self.pi_head).requires_grad_(False)
        self.target_q = copy.deepcopy(self.q).requires_grad_(False)
