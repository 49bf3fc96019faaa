"""``DeployedPolicy``: a checkpoint's whole acting path as one ``torch.nn.Module``.

    raw env observation, one tensor per leaf of the observation space
      -> flatten       as ``FlattenObservations``: each leaf cast to float32 and flattened row-major,
                       Discrete leaves one-hot (value - start), leaves concatenated in the space's order
      -> normalise     as ``NormalizeObservations``: ``clip((x - mean) * inv_std, -clip, clip)`` with the
                       checkpoint's fitted statistics (only if the job normalised)
      -> ``RLModule.forward_inference(...)["actions"]`` (argmax for Discrete, the squashed mean for Box)
      -> as ``ActionsToEnv``: Discrete -> int64 ``[B]``; Box -> ``[B, *shape]`` in the space's dtype,
                       clipped to the bounds

Every constant (weights, statistics, bounds) is a parameter or buffer, so a traced or exported
copy needs nothing else. Each step repeats the numpy connector's arithmetic in the same order and
precision; ``tests/export/test_export_policy.py`` holds the exported files to the Python path.

Inputs (``policy_inputs``): a plain space is one input named ``obs``; a Dict or Tuple space is one
input per leaf named by its dotted path (``obs.pos``, ``obs.cam.img``, ``obs.0``), in the order of
``offlinerl.episodes.spaces.leaf_spaces`` (a Dict's own key order, sorted by gymnasium). Each input
is ``[batch, *leaf.shape]`` in the leaf's dtype (Discrete: ``[batch]`` int64).

``JointDeployedPolicy``: the ``DeployedPolicy`` of every module of a multi-module checkpoint in one
module; its inputs are named after the module (``agent_0``, ``agent_0.pos``), its outputs
``actions_<module_id>``, each module with its own batch dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from offlinerl.connectors.common import NormalizeObservations
from offlinerl.core import columns as C
from offlinerl.episodes.spaces import leaf_spaces

__all__ = ["DeployedPolicy", "JointDeployedPolicy", "PolicyInput", "joint_batch_name", "joint_input_name",
           "joint_output_name", "policy_inputs", "policy_output", "torch_dtype"]


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a numpy dtype (``uint8`` -> ``torch.uint8``)."""
    return torch.from_numpy(np.zeros(0, dtype=np.dtype(dtype))).dtype


@dataclass(frozen=True)
class PolicyInput:
    """One input of a deployed policy: one leaf of the observation space."""

    name: str
    """``obs`` for a plain space, else ``obs.`` + the leaf's dotted path in the Dict/Tuple space."""
    path: str
    """The leaf's dotted path (``""`` for a plain space): where the value sits in an env observation."""
    space: gym.Space
    """The leaf space (Box, Discrete, MultiDiscrete or MultiBinary)."""

    @property
    def dtype(self) -> np.dtype:
        """The leaf's dtype: what the env emits (Discrete: int64)."""
        return np.dtype(self.space.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """One value's shape (Discrete: ``()``); the input is ``[batch, *shape]``."""
        return tuple(int(d) for d in self.space.shape)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "space": type(self.space).__name__,
                "dtype": str(self.dtype), "shape": ["batch", *self.shape]}


def policy_inputs(observation_space: gym.Space) -> list[PolicyInput]:
    """The inputs of a policy deployed for ``observation_space``, in ``forward`` order."""
    return [PolicyInput(f"{C.OBS}.{path}" if path else C.OBS, path, leaf) for path, leaf in leaf_spaces(observation_space)]


def policy_output(action_space: gym.Space) -> dict[str, Any]:
    """The one output, ``actions``: what ``ActionsToEnv`` hands the env, as JSON."""
    shape = [] if isinstance(action_space, gym.spaces.Discrete) else [int(d) for d in action_space.shape]
    return {"name": C.ACTIONS, "space": type(action_space).__name__, "dtype": str(np.dtype(action_space.dtype)),
            "shape": ["batch", *shape]}


class DeployedPolicy(nn.Module):
    """Raw observations in, env actions out: flatten, normalise, ``forward_inference``, actions to the env."""

    def __init__(self, module: nn.Module, observation_space: gym.Space, action_space: gym.Space,
                 normalize: NormalizeObservations | None, module_id: str = C.DEFAULT_MODULE_ID) -> None:
        super().__init__()
        self.module = module.eval()
        self.module_id = module_id
        self.inputs = policy_inputs(observation_space)
        self.action_space = action_space
        self.normalize = normalize is not None
        if normalize is not None:
            mean, inv_std = normalize.coefficients()
            self.register_buffer("obs_mean", torch.from_numpy(np.array(mean, dtype=np.float32)))
            self.register_buffer("obs_inv_std", torch.from_numpy(np.array(inv_std, dtype=np.float32)))
            self.clip = float(normalize.clip)
        if isinstance(action_space, gym.spaces.Box):
            self.register_buffer("action_low", torch.from_numpy(np.array(action_space.low)))
            self.register_buffer("action_high", torch.from_numpy(np.array(action_space.high)))
        self.action_dtype = torch_dtype(action_space.dtype)

    def example_inputs(self, batch: int = 2) -> tuple[Tensor, ...]:
        """Valid zero-like inputs (Discrete: its ``start``) for tracing."""
        out = []
        for spec in self.inputs:
            fill = int(spec.space.start) if isinstance(spec.space, gym.spaces.Discrete) else 0
            out.append(torch.full((batch, *spec.shape), fill, dtype=torch_dtype(spec.dtype)))
        return tuple(out)

    def flatten(self, obs: tuple[Tensor, ...]) -> Tensor:
        """As ``offlinerl.core.flatten.flatten_batch``: ``[B, D]`` float32."""
        parts = []
        for spec, x in zip(self.inputs, obs):
            if isinstance(spec.space, gym.spaces.Discrete):
                n, start = int(spec.space.n), int(spec.space.start)
                idx = x.reshape(-1, 1).to(torch.int64) - start
                parts.append((idx == torch.arange(n, dtype=torch.int64)).to(torch.float32))
            elif spec.shape == ():
                parts.append(x.reshape(-1, 1).to(torch.float32))
            else:
                parts.append(torch.flatten(x, 1).to(torch.float32))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def forward(self, *obs: Tensor) -> Tensor:
        x = self.flatten(obs)
        if self.normalize:
            x = torch.clamp((x - self.obs_mean) * self.obs_inv_std, -self.clip, self.clip)
        actions = self.module.forward_inference({C.OBS: x})[C.ACTIONS]
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return actions.to(torch.int64).reshape(-1)
        if isinstance(space, gym.spaces.Box):
            actions = actions.reshape(-1, *space.shape).to(self.action_dtype)
            return torch.minimum(torch.maximum(actions, self.action_low), self.action_high)
        return actions.to(self.action_dtype)


def joint_input_name(module_id: str, spec: PolicyInput) -> str:
    """A joint policy's name for module ``module_id``'s input ``spec``: the module id, then the leaf's path
    (``agent_0``, ``agent_0.pos``)."""
    return f"{module_id}.{spec.path}" if spec.path else module_id


def joint_output_name(module_id: str) -> str:
    """A joint policy's output of module ``module_id``: ``actions_<module_id>``."""
    return f"{C.ACTIONS}_{module_id}"


def joint_batch_name(module_id: str) -> str:
    """The free batch dimension of module ``module_id``'s inputs and output: each module has its own."""
    return f"batch_{module_id}"


class JointDeployedPolicy(nn.Module):
    """Every module's ``DeployedPolicy`` in one module: ``forward(*inputs)`` takes each module's inputs in turn
    (module order, then ``policy_inputs`` order) and returns one actions tensor per module, in the same order.
    Each module keeps its own normalisation; modules that share an encoder still share it here. The modules'
    batches are independent (agents that are done can be left out of their module's batch)."""

    def __init__(self, policies: dict[str, DeployedPolicy]) -> None:
        super().__init__()
        self.module_ids = list(policies)
        self.policies = nn.ModuleList(policies.values())  # a ModuleDict's keys may not hold dots

    def input_names(self) -> list[str]:
        """``forward``'s inputs, named as ``joint_input_name``."""
        return [joint_input_name(mid, spec) for mid, p in zip(self.module_ids, self.policies) for spec in p.inputs]

    def output_names(self) -> list[str]:
        """``forward``'s outputs, named as ``joint_output_name``."""
        return [joint_output_name(mid) for mid in self.module_ids]

    def example_inputs(self, batch: int = 2) -> tuple[Tensor, ...]:
        """Valid inputs for tracing, a different batch size per module (``batch``, ``batch + 1``, ...) so nothing
        traced ties one module's batch to another's."""
        return tuple(x for i, p in enumerate(self.policies) for x in p.example_inputs(batch + i))

    def forward(self, *obs: Tensor) -> tuple[Tensor, ...]:
        out, start = [], 0
        for policy in self.policies:
            n = len(policy.inputs)
            out.append(policy(*obs[start:start + n]))
            start += n
        return tuple(out)
