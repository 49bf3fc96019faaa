"""``DefaultRLModule``: the stock policy (+ optional value head) built from the spaces.

- encoder: an MLP over flattened observations, or a small CNN for image
  observations (``model_config["encoder"]``: "auto" | "mlp" | "cnn");
- policy head: logits (Discrete) or mean and log-std of a tanh-squashed
  Gaussian scaled to the action bounds (Box);
- value head (``model_config["value_head"]``, training only): a separate
  encoder + linear layer, so the policy and value optimizers never share
  parameters.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import gymnasium as gym
import torch
from torch import nn

from offlinerl.core import columns as C
from offlinerl.core.flatten import flat_dim
from offlinerl.core.networks import MLP, CNNEncoder, Head
from offlinerl.core.rl_module import RLModule, action_dist_inputs_dim

__all__ = ["DefaultRLModule", "build_encoder", "DEFAULT_MODEL_CONFIG"]

#: Defaults for the keys of ``model_config`` the stock module reads.
DEFAULT_MODEL_CONFIG: dict[str, Any] = {
    "hidden": [256, 256],
    "activation": "relu",
    "encoder": "auto",
    "cnn_channels": [16, 32],
    "cnn_out": 256,
    "cnn_scale": 1.0,
    "value_head": False,
}


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and min(space.shape[:2]) >= 8


def build_encoder(observation_space: gym.Space, cfg: Mapping[str, Any]) -> tuple[nn.Module, int]:
    """An encoder for flattened observations and its output width."""
    kind = cfg.get("encoder", "auto")
    if kind == "auto":
        kind = "cnn" if _is_image(observation_space) else "mlp"
    hidden: Sequence[int] = cfg.get("hidden", DEFAULT_MODEL_CONFIG["hidden"])
    act = cfg.get("activation", "relu")
    if kind == "cnn":
        cnn = CNNEncoder(observation_space.shape, cfg.get("cnn_channels", (16, 32)), out_dim=cfg.get("cnn_out", 256),
                         act=act, scale=cfg.get("cnn_scale", 1.0))
        mlp = MLP(cnn.out_dim, hidden, None, act)
        return nn.Sequential(cnn, mlp), mlp.out_dim
    if kind != "mlp":
        raise ValueError(f"model_config.encoder must be 'auto', 'mlp' or 'cnn', got {kind!r}")
    mlp = MLP(flat_dim(observation_space), hidden, None, act)
    return mlp, mlp.out_dim


class DefaultRLModule(RLModule):
    """Policy over Discrete or bounded Box actions, with an optional value head.

    Implements ``ValueFunctionAPI`` (``compute_values``) when built with
    ``value_head=True`` and not ``inference_only``.
    """

    def setup(self) -> None:
        cfg = {**DEFAULT_MODEL_CONFIG, **self.model_config}
        self.pi_encoder, width = build_encoder(self.observation_space, cfg)
        self.pi_head = Head(width, action_dist_inputs_dim(self.action_space))
        self.has_value_head = bool(cfg["value_head"]) and not self.inference_only
        if self.has_value_head:
            self.vf_encoder, vwidth = build_encoder(self.observation_space, cfg)
            self.vf_head = Head(vwidth, 1)

    def _dist_inputs(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.pi_head(self.pi_encoder(batch[C.OBS]))  # [B, dist_dim]

    def forward_inference(self, batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        inputs = self._dist_inputs(batch)
        return {C.ACTIONS: self.action_dist(inputs).mode(), C.ACTION_DIST_INPUTS: inputs}

    def forward_exploration(self, batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        inputs = self._dist_inputs(batch)
        dist = self.action_dist(inputs)
        actions = dist.sample()
        return {C.ACTIONS: actions, C.ACTION_LOGP: dist.log_prob(actions), C.ACTION_DIST_INPUTS: inputs}

    def forward_train(self, batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
        inputs = self._dist_inputs(batch)
        out: dict[str, Any] = {C.ACTION_DIST_INPUTS: inputs, C.ACTION_DIST: self.action_dist(inputs)}
        if self.has_value_head:
            out[C.VALUES] = self.compute_values(batch)
        return out

    def compute_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if not self.has_value_head:
            raise TypeError("this DefaultRLModule was built without a value head (model_config value_head=False)")
        return self.vf_head(self.vf_encoder(batch[C.OBS])).squeeze(-1)  # [B]

    def policy_parameters(self) -> Iterator[nn.Parameter]:
        yield from self.pi_encoder.parameters()
        yield from self.pi_head.parameters()

    def value_parameters(self) -> Iterator[nn.Parameter]:
        if self.has_value_head:
            yield from self.vf_encoder.parameters()
            yield from self.vf_head.parameters()
