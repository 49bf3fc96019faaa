"""``ActorCriticRLModule``: policy + Q ensemble + target Q ensemble (+ optional V), shared by CQL and IQL.

Layout (E = ``num_critics`` members, one ``EnsembleMLP`` each, so twin critics are one
batched matmul per layer):

- ``pi_encoder``/``pi_head``: the policy (Categorical logits for Discrete actions, a
  tanh-squashed Gaussian scaled to the bounds for Box actions). Discrete CQL builds no
  policy (``model_config["policy"] = False``) and acts greedily on Q.
- ``q``: Box actions: ``EnsembleMLP(E, obs + act -> 1)``; Discrete: ``EnsembleMLP(E, obs -> n)``.
- ``target_q``: a frozen copy of ``q`` moved by ``sync_target_networks(tau)`` (Polyak).
- ``v``: ``MLP(obs -> 1)`` when ``model_config["value_head"]`` (IQL).

``inference_only=True`` builds only what acting needs: the policy (or, without a policy,
the online Q ensemble); a full module's state dict loads into it.
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
from offlinerl.core.networks import MLP, EnsembleMLP, Head
from offlinerl.core.rl_module import RLModule, action_dist_inputs_dim

__all__ = ["ActorCriticRLModule", "ACTOR_CRITIC_MODEL_CONFIG"]

#: Defaults for the keys of ``model_config`` this module reads.
ACTOR_CRITIC_MODEL_CONFIG: dict[str, Any] = {
    "hidden": [256, 256],
    "critic_hidden": None,  # None: same as "hidden"
    "activation": "relu",
    "encoder": "auto",
    "num_critics": 2,
    "policy": True,
    "value_head": False,
}


class ActorCriticRLModule(RLModule):
    """Policy, Q ensemble, its Polyak target and an optional state-value network."""

    def setup(self) -> None:
        cfg = {**ACTOR_CRITIC_MODEL_CONFIG, **self.model_config}
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)
        if not self.discrete and not (isinstance(self.action_space, gym.spaces.Box) and len(self.action_space.shape) == 1):
            raise TypeError(f"ActorCriticRLModule supports Discrete or 1-D Box actions, got {self.action_space}")
        hidden, act = list(cfg["hidden"]), cfg["activation"]
        critic_hidden = list(cfg["critic_hidden"] or hidden)
        obs_dim = flat_dim(self.observation_space)
        self.has_policy = bool(cfg["policy"])
        if not self.has_policy and not self.discrete:
            raise ValueError("model_config.policy=False (greedy on Q) needs Discrete actions")
        if self.has_policy:
            self.pi_encoder, width = build_encoder(self.observation_space, cfg)
            self.pi_head = Head(width, action_dist_inputs_dim(self.action_space))
        self.has_critics = not self.inference_only or not self.has_policy
        if self.has_critics:
            in_dim = obs_dim if self.discrete else obs_dim + int(self.action_space.shape[0])
            out_dim = int(self.action_space.n) if self.discrete else 1
            self.q = EnsembleMLP(int(cfg["num_critics"]), in_dim, out_dim, critic_hidden, act)
        if not self.inference_only:
            self.target_q = copy.deepcopy(self.q).requires_grad_(False)
        self.has_value_head = bool(cfg["value_head"]) and not self.inference_only
        if self.has_value_head:
            self.v = MLP(obs_dim, critic_hidden, 1, act)

    # -- acting -------------------------------------------------------------------------------
    def _dist_inputs(self, obs: Tensor) -> Tensor:
        return self.pi_head(self.pi_encoder(obs))  # [B, dist_dim]

    def forward_inference(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        if not self.has_policy:
            q = ops.twin_min(self.all_q_values(batch[C.OBS]))  # [B, n]
            return {C.ACTIONS: q.argmax(-1), C.ACTION_DIST_INPUTS: q}
        inputs = self._dist_inputs(batch[C.OBS])
        return {C.ACTIONS: self.action_dist(inputs).mode(), C.ACTION_DIST_INPUTS: inputs}

    def forward_exploration(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        """Samples the policy; without one, samples softmax(min_e Q) (Boltzmann exploration)."""
        if self.has_policy:
            inputs = self._dist_inputs(batch[C.OBS])
        else:
            inputs = ops.twin_min(self.all_q_values(batch[C.OBS]))
        dist = self.action_dist(inputs)
        actions = dist.sample()
        return {C.ACTIONS: actions, C.ACTION_LOGP: dist.log_prob(actions), C.ACTION_DIST_INPUTS: inputs}

    def forward_train(self, batch: Mapping[str, Tensor]) -> dict[str, Any]:
        """Nothing precomputed: the CQL/IQL losses call the methods below with the inputs they need."""
        return {}

    # -- what the losses call ---------------------------------------------------------------------
    def sample_actions(self, obs: Tensor, n: int) -> tuple[Tensor, Tensor]:
        """``n`` reparameterised actions per state and their log-probs: ``[n,B,A]``, ``[n,B]``."""
        inputs = self._dist_inputs(obs)  # [B, 2A]: one policy forward for all n samples
        dist = self.action_dist(inputs.unsqueeze(0).expand(n, -1, -1))
        return dist.rsample_and_log_prob()

    def action_log_prob(self, obs: Tensor, actions: Tensor) -> Tensor:
        """``log π(a|s)`` of given (data) actions: ``[B]``."""
        return self.action_dist(self._dist_inputs(obs)).log_prob(actions)

    def _q_in(self, net: EnsembleMLP, obs: Tensor, actions: Tensor) -> Tensor:
        if self.discrete:
            q = net(obs)  # [E, B, n]
            return q.gather(-1, actions.long().view(1, -1, 1).expand(q.shape[0], -1, 1)).squeeze(-1)
        lead = obs.shape[:-1]  # (..., B)
        x = torch.cat([obs, actions], dim=-1).reshape(-1, obs.shape[-1] + actions.shape[-1])
        return net(x).reshape(net.num_members, *lead)  # [E, ..., B]

    def q_values(self, obs: Tensor, actions: Tensor) -> Tensor:
        """``Q_e(s, a)`` of every member: obs ``[...,B,O]``, actions ``[...,B,A]`` (Discrete: ``[B]``) -> ``[E,...,B]``."""
        return self._q_in(self.q, obs, actions)

    def target_q_values(self, obs: Tensor, actions: Tensor) -> Tensor:
        return self._q_in(self.target_q, obs, actions)

    def all_q_values(self, obs: Tensor) -> Tensor:
        """Discrete: ``Q_e(s, ·)`` for every action: ``[E,B,n]``."""
        return self.q(obs)

    def target_all_q_values(self, obs: Tensor) -> Tensor:
        return self.target_q(obs)

    def values(self, obs: Tensor) -> Tensor:
        """``V(s)``: ``[B]``."""
        return self.v(obs).squeeze(-1)

    # -- capability protocols ------------------------------------------------------------------
    def compute_values(self, batch: Mapping[str, Tensor]) -> Tensor:
        return self.values(batch[C.OBS])

    def compute_q_values(self, batch: Mapping[str, Tensor]) -> Tensor:
        if self.discrete:
            return self.all_q_values(batch[C.OBS])
        return self.q_values(batch[C.OBS], batch[C.ACTIONS])

    def sync_target_networks(self, tau: float) -> None:
        ops.soft_update(self.target_q, self.q, tau)

    # -- parameter groups (each belongs to exactly one optimizer) -----------------------------------
    def policy_parameters(self) -> Iterator[nn.Parameter]:
        if self.has_policy:
            yield from self.pi_encoder.parameters()
            yield from self.pi_head.parameters()

    def critic_parameters(self) -> Iterator[nn.Parameter]:
        yield from self.q.parameters()

    def value_parameters(self) -> Iterator[nn.Parameter]:
        if self.has_value_head:
            yield from self.v.parameters()
