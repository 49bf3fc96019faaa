"""``RLModule``: the torch model of one policy, with three forward passes, and
``MultiRLModule``: several of them keyed by module id.

- ``forward_inference``: deterministic actions (evaluation, deployment).
- ``forward_exploration``: sampled actions, their log-probs and distribution inputs.
- ``forward_train``: everything a loss needs (distribution, values, Q values ...).

``inference_only=True`` builds only what acting needs (no critics, no target
networks); a full module's state dict loads into it (extra keys are dropped).
Capabilities are declared by implementing small Protocols (``ValueFunctionAPI``,
``QFunctionAPI``, ``TargetNetworkAPI``, ``ActorCriticAPI``, ``StateValueAPI``) that
learners require by name when they build (``require_api``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable

import gymnasium as gym
import torch
from torch import nn

from offlinerl.core import columns as C
from offlinerl.core.distributions import Categorical, Distribution, TanhGaussian
from offlinerl.core.shared_encoder import check_shared_state, tie_submodules

__all__ = [
    "RLModule",
    "MultiRLModule",
    "ValueFunctionAPI",
    "QFunctionAPI",
    "TargetNetworkAPI",
    "ActorCriticAPI",
    "StateValueAPI",
    "require_api",
    "RLModuleSpec",
    "MultiRLModuleSpec",
    "action_dist_inputs_dim",
]

Batch = Mapping[str, torch.Tensor]


@runtime_checkable
class ValueFunctionAPI(Protocol):
    def compute_values(self, batch: Batch) -> torch.Tensor:
        """State values ``V(s)`` for ``batch[OBS]``: ``[B]``."""


@runtime_checkable
class QFunctionAPI(Protocol):
    def compute_q_values(self, batch: Batch) -> torch.Tensor:
        """Q values of ``batch[ACTIONS]`` (Box) or of every action (Discrete), per critic member."""


@runtime_checkable
class TargetNetworkAPI(Protocol):
    def sync_target_networks(self, tau: float) -> None:
        """Polyak-update every target network towards its online network."""


@runtime_checkable
class ActorCriticAPI(Protocol):
    """What actor-critic losses (CQL, IQL) call on a module. E = critic members, B = batch, A = action dim."""

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``Q_e(s, a)`` of every member: ``[E, ..., B]``."""

    def target_q_values(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The same from the target networks."""

    def all_q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Discrete actions: ``Q_e(s, ·)`` for every action, ``[E, B, n]``."""

    def target_all_q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """The same from the target networks."""

    def sample_actions(self, obs: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` reparameterised policy actions per state and their log-probs: ``[n, B, A]``, ``[n, B]``."""

    def action_log_prob(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``log π(a|s)`` of given actions: ``[B]``."""

    def policy_parameters(self) -> Iterator[nn.Parameter]:
        """The actor's parameters (one optimizer)."""

    def critic_parameters(self) -> Iterator[nn.Parameter]:
        """The Q ensemble's parameters (one optimizer)."""


@runtime_checkable
class StateValueAPI(Protocol):
    """A separate state-value network ``V(s)`` (IQL)."""

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(s)``: ``[B]``."""

    def value_parameters(self) -> Iterator[nn.Parameter]:
        """The value network's parameters (one optimizer)."""


def _members(api: type) -> list[str]:
    return sorted(n for n in vars(api) if not n.startswith("_"))


def require_api(module: nn.Module, api: type, who: str, attributes: tuple[str, ...] = ()) -> None:
    """Raise a clear ``TypeError``, naming what is missing, when ``module`` lacks a capability a learner needs.

    Called once when the learner builds, so a custom module fails there and not mid-training.
    ``attributes`` names plain attributes the learner also needs (e.g. CQL's ``log_alpha``).
    """
    missing = [n for n in (*_members(api), *attributes) if not hasattr(module, n)]
    if missing:
        raise TypeError(f"{who} needs a module implementing {api.__name__}; {type(module).__name__} lacks "
                        f"{', '.join(missing)}")


def action_dist_inputs_dim(action_space: gym.Space) -> int:
    """Width of the distribution inputs a policy head must output for ``action_space``."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return 2 * int(action_space.shape[0])
    raise TypeError(f"unsupported action space {action_space}: use Discrete or a 1-D Box")


class RLModule(nn.Module):
    """Base class: subclasses build layers in ``setup()`` and implement the three forwards.

    Acting helpers (``action_dist``) cover Discrete (Categorical, logits) and 1-D
    bounded Box spaces (TanhGaussian squashed to the bounds).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        model_config: Mapping[str, Any] | None = None,
        inference_only: bool = False,
    ) -> None:
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = dict(model_config or {})
        self.inference_only = inference_only
        if isinstance(action_space, gym.spaces.Box):
            if not (torch.isfinite(torch.as_tensor(action_space.low)).all() and torch.isfinite(torch.as_tensor(action_space.high)).all()):
                raise TypeError(f"Box action space {action_space} needs finite bounds for a squashed policy")
            self.register_buffer("action_low", torch.as_tensor(action_space.low, dtype=torch.float32), persistent=False)
            self.register_buffer("action_high", torch.as_tensor(action_space.high, dtype=torch.float32), persistent=False)
            self.register_buffer("action_center", (self.action_high + self.action_low) / 2, persistent=False)
            self.register_buffer("action_scale", (self.action_high - self.action_low) / 2, persistent=False)
            self.register_buffer("action_log_scale", torch.log(self.action_scale), persistent=False)
        self.setup()

    def setup(self) -> None:
        """Build layers (skip training-only parts when ``self.inference_only``)."""

    # -- the three forward passes ------------------------------------------------------------
    def forward_inference(self, batch: Batch) -> dict[str, Any]:
        raise NotImplementedError

    def forward_exploration(self, batch: Batch) -> dict[str, Any]:
        raise NotImplementedError

    def forward_train(self, batch: Batch) -> dict[str, Any]:
        raise NotImplementedError

    def forward(self, batch: Batch) -> dict[str, Any]:
        return self.forward_train(batch)

    # -- helpers -------------------------------------------------------------------------------
    def action_dist(self, dist_inputs: torch.Tensor) -> Distribution:
        """The action distribution for a ``[B, action_dist_inputs_dim]`` tensor."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            return Categorical(dist_inputs)
        return TanhGaussian(dist_inputs, self.action_low, self.action_high, center=self.action_center,
                            scale=self.action_scale, log_scale=self.action_log_scale)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Load a state dict; an inference-only module drops the keys it has no parameter for."""
        if self.inference_only:
            own = self.state_dict().keys()
            state_dict = {k: v for k, v in state_dict.items() if k in own}
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


class MultiRLModule(nn.Module):
    """A dict of ``RLModule`` keyed by module id, with an agent -> module mapping.

    A single-agent job holds one module under ``DEFAULT_MODULE_ID``. ``shared``: attribute names of submodules
    that every module holds as one object (e.g. ``("pi_encoder",)``: one policy encoder, each module its own
    heads; ``offlinerl.core.shared_encoder``); the state dict holds them under every module, always equal.
    """

    def __init__(
        self,
        modules: Mapping[str, RLModule],
        agent_to_module: Mapping[str, str] | Callable[[str | None], str] | None = None,
        shared: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if not modules:
            raise ValueError("a MultiRLModule needs at least one module")
        self.rl_modules = nn.ModuleDict(dict(modules))
        self._agent_to_module = agent_to_module
        self.shared = tuple(shared)
        tie_submodules(self.rl_modules, self.shared)

    def __getitem__(self, module_id: str) -> RLModule:
        try:
            return self.rl_modules[module_id]  # type: ignore[return-value]
        except KeyError:
            raise KeyError(f"no module {module_id!r}; modules: {sorted(self.rl_modules)}") from None

    def __contains__(self, module_id: object) -> bool:
        return module_id in self.rl_modules

    def keys(self) -> list[str]:
        return list(self.rl_modules.keys())

    def items(self) -> Iterator[tuple[str, RLModule]]:
        return iter(self.rl_modules.items())  # type: ignore[arg-type]

    def module_for_agent(self, agent_id: str | None) -> str:
        """The module id that acts for ``agent_id`` (single module: always that one)."""
        m = self._agent_to_module
        if m is None:
            if len(self.rl_modules) == 1:
                return next(iter(self.rl_modules))
            if agent_id in self.rl_modules:
                return str(agent_id)
            raise KeyError(f"agent {agent_id!r} has no module; pass agent_to_module")
        return m(agent_id) if callable(m) else m[agent_id]

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Load per module, so inference-only modules drop the keys they have no parameter for; a shared
        submodule's weights must be equal under every module that holds them (``RuntimeError`` otherwise)."""
        per: dict[str, dict[str, Any]] = {mid: {} for mid in self.rl_modules}
        for key, value in state_dict.items():
            _, mid, rest = key.split(".", 2) if key.startswith("rl_modules.") else ("", "", key)
            if mid not in per:
                if strict:
                    raise RuntimeError(f"state dict key {key!r} belongs to no module of {sorted(per)}")
                continue
            per[mid][rest] = value
        check_shared_state(per, self.shared)
        for mid, module in self.rl_modules.items():
            module.load_state_dict(per[mid], strict=strict, assign=assign)

    def forward_inference(self, batch: Mapping[str, Batch]) -> dict[str, dict[str, Any]]:
        return {mid: self[mid].forward_inference(b) for mid, b in batch.items()}

    def forward_exploration(self, batch: Mapping[str, Batch]) -> dict[str, dict[str, Any]]:
        return {mid: self[mid].forward_exploration(b) for mid, b in batch.items()}

    def forward_train(self, batch: Mapping[str, Batch]) -> dict[str, dict[str, Any]]:
        return {mid: self[mid].forward_train(b) for mid, b in batch.items()}

    def forward(self, batch: Mapping[str, Batch]) -> dict[str, dict[str, Any]]:
        return self.forward_train(batch)



class RLModuleSpec:
    """What is needed to build an ``RLModule`` anywhere (a learner actor, an env runner): picklable."""

    def __init__(
        self,
        module_class: type[RLModule],
        observation_space: gym.Space,
        action_space: gym.Space,
        model_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.module_class = module_class
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = dict(model_config or {})

    def build(self, inference_only: bool = False) -> RLModule:
        return self.module_class(self.observation_space, self.action_space, self.model_config, inference_only)


class MultiRLModuleSpec:
    """Specs of every module of a ``MultiRLModule``, the agent -> module mapping (a dict, or a picklable callable
    such as ``policy_mapping.AgentToModule``) and the submodules every module shares (``shared``, as
    ``MultiRLModule`` takes it)."""

    def __init__(self, specs: Mapping[str, RLModuleSpec],
                 agent_to_module: Mapping[str, str] | Callable[[str | None], str] | None = None,
                 shared: Sequence[str] = ()) -> None:
        self.specs = dict(specs)
        self.agent_to_module = (agent_to_module if callable(agent_to_module) else
                                dict(agent_to_module) if agent_to_module else None)
        self.shared = tuple(shared)

    @classmethod
    def single(cls, spec: RLModuleSpec) -> "MultiRLModuleSpec":
        return cls({C.DEFAULT_MODULE_ID: spec})

    def build(self, inference_only: bool = False) -> MultiRLModule:
        return MultiRLModule({mid: s.build(inference_only) for mid, s in self.specs.items()}, self.agent_to_module,
                             self.shared)
