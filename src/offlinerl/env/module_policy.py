"""Factories that rebuild an RLModule and connector pipelines inside each EnvRunner.

They are small picklable objects (an ``RLModuleSpec``, connector pipelines),
so Ray ships them to runner actors; weights and connector state arrive later
through ``EnvRunner.set_state``.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import gymnasium as gym
import torch

from offlinerl.core.rl_module import RLModule, RLModuleSpec

__all__ = ["ModulePolicyFactory", "PipelineConnectors", "module_weights"]


class ModulePolicyFactory:
    """Builds the inference-only view of ``spec`` (no critics, no target networks), optionally with weights."""

    def __init__(self, spec: RLModuleSpec, weights: Mapping[str, torch.Tensor] | None = None) -> None:
        self.spec = spec
        self.weights = dict(weights) if weights is not None else None

    def __call__(self, observation_space: gym.Space, action_space: gym.Space) -> RLModule:
        if observation_space.shape != self.spec.observation_space.shape or (
            type(action_space) is not type(self.spec.action_space)
        ):
            raise ValueError(
                f"the env's spaces ({observation_space}, {action_space}) do not match the module's "
                f"({self.spec.observation_space}, {self.spec.action_space})"
            )
        module = self.spec.build(inference_only=True)
        if self.weights is not None:
            module.load_state_dict(self.weights)
        return module


class PipelineConnectors:
    """Gives every runner its own copy of an env-to-module and a module-to-env pipeline."""

    def __init__(self, env_to_module: Any, module_to_env: Any) -> None:
        self.env_to_module = env_to_module
        self.module_to_env = module_to_env

    def __call__(self, observation_space: gym.Space, action_space: gym.Space) -> tuple[Any, Any]:
        return copy.deepcopy(self.env_to_module), copy.deepcopy(self.module_to_env)


def module_weights(state: Mapping[str, torch.Tensor], module_id: str) -> dict[str, torch.Tensor]:
    """One module's weights out of a ``MultiRLModule`` state dict (keys ``rl_modules.<id>.*``)."""
    prefix = f"rl_modules.{module_id}."
    out = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not out:
        raise KeyError(f"no weights of module {module_id!r} in a state with keys like {sorted(state)[:3]}")
    return out
