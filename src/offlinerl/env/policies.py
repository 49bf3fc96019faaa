"""Acting: the protocol an RLModule satisfies, the one act step every actor runs, a uniform ``RandomPolicy``
with exact log-probabilities, and epsilon-random mixing.

The act step, used by evaluation (``module_episodes``), the EnvRunners and OPE::

    env observations -> [env-to-module] -> forward_inference | forward_exploration -> [module-to-env] -> env actions
                        module_inputs      forward                                   to_env        (act: all three)
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from offlinerl.core import columns as C

__all__ = ["ActingPolicy", "act", "module_inputs", "forward", "to_env", "RandomPolicy", "uniform_log_prob",
           "epsilon_mix"]


@runtime_checkable
class ActingPolicy(Protocol):
    """What an EnvRunner needs from an (inference-only) RLModule.

    Both methods take ``{"obs": Tensor[B, ...]}`` and return at least
    ``{"actions": Tensor[B, ...]}``; ``forward_exploration`` may add
    ``"action_logp"`` [B] and ``"action_dist_inputs"`` [B, k].
    """

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]: ...

    def forward_exploration(self, batch: dict[str, Any]) -> dict[str, Any]: ...


def module_inputs(env_to_module: Callable, obs: Any, device: torch.device | str | None = None) -> dict[str, Any]:
    """A batch of raw env observations -> the policy's input batch: the env-to-module connectors (flatten,
    normalise with the job's statistics), then numpy arrays as tensors on ``device``."""
    batch = env_to_module({C.OBS: obs}, None, {})
    return {k: _tensor(v, device) if isinstance(v, np.ndarray) else v for k, v in batch.items()}


def _tensor(array: np.ndarray, device: torch.device | str | None) -> torch.Tensor:
    """``array`` as a tensor; a read-only array (e.g. one Arrow owns) is copied first, as torch cannot share it."""
    return torch.as_tensor(array if array.flags.writeable else array.copy(), device=device)


def forward(policy: ActingPolicy, inputs: dict[str, Any], explore: bool) -> dict[str, Any]:
    """``forward_exploration`` (sampled actions, ``action_logp``, ...) if ``explore``, else ``forward_inference``."""
    return policy.forward_exploration(inputs) if explore else policy.forward_inference(inputs)


def to_env(module_to_env: Callable, outputs: dict[str, Any]) -> dict[str, Any]:
    """Policy outputs -> the module-to-env connectors (actions in the env's dtype and bounds), tensors as numpy."""
    out = module_to_env(dict(outputs), None, {})
    return {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in out.items()}


@torch.no_grad()
def act(policy: ActingPolicy, env_to_module: Callable, module_to_env: Callable, obs: Any, *, explore: bool = False,
        device: torch.device | str | None = None) -> dict[str, Any]:
    """The act step: raw env observations ``[B, ...]`` -> the env's actions (``"actions"``) and whatever else the
    policy output (``action_logp``, ``action_dist_inputs`` when exploring), as numpy."""
    return to_env(module_to_env, forward(policy, module_inputs(env_to_module, obs, device), explore))


def uniform_log_prob(space: gym.Space) -> float:
    """Log-density (or log-probability) of one action drawn uniformly from ``space``.

    Discrete: ``-log n``; Box: ``-sum(log(high - low))`` (finite bounds only);
    MultiDiscrete: ``-sum(log nvec)``; MultiBinary: ``-n log 2``.
    """
    if isinstance(space, gym.spaces.Discrete):
        return -float(np.log(space.n))
    if isinstance(space, gym.spaces.Box):
        if not space.is_bounded("both"):
            raise ValueError(f"a uniform random action needs a bounded Box, got {space}")
        return -float(np.sum(np.log(space.high.astype(np.float64) - space.low.astype(np.float64))))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return -float(np.sum(np.log(space.nvec.astype(np.float64))))
    if isinstance(space, gym.spaces.MultiBinary):
        return -float(np.prod(space.shape) * np.log(2.0))
    raise ValueError(f"no uniform distribution over {type(space).__name__} spaces")


class RandomPolicy:
    """Uniformly random actions, whatever the observation (both forward methods).

    ``action_logp`` is exact (see :func:`uniform_log_prob`). Picklable: build it
    in an EnvRunner actor from ``(observation_space, action_space, seed)``.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, seed: int | None = None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self._logp = uniform_log_prob(action_space)
        self._rng = np.random.default_rng(seed)

    def _sample(self, batch_size: int) -> np.ndarray:
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return space.start + self._rng.integers(0, space.n, size=batch_size, dtype=np.int64)
        if isinstance(space, gym.spaces.Box):
            u = self._rng.random((batch_size, *space.shape))
            return (space.low + u * (space.high.astype(np.float64) - space.low)).astype(space.dtype)
        if isinstance(space, gym.spaces.MultiDiscrete):
            return space.start + (self._rng.random((batch_size, *space.shape)) * space.nvec).astype(space.dtype)
        return self._rng.integers(0, 2, size=(batch_size, *space.shape), dtype=space.dtype)

    def forward_exploration(self, batch: dict[str, Any]) -> dict[str, Any]:
        n = int(batch["obs"].shape[0])
        return {
            "actions": torch.from_numpy(self._sample(n)),
            "action_logp": torch.full((n,), self._logp, dtype=torch.float32),
        }

    def forward_inference(self, batch: dict[str, Any]) -> dict[str, Any]:
        return self.forward_exploration(batch)

    # Weight syncing is a no-op for a policy without weights.
    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None


def epsilon_mix(
    actions: np.ndarray,
    action_space: gym.Space,
    epsilon: float,
    rng: np.random.Generator,
    policy_probs: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Replace each action with a uniformly random one with probability ``epsilon``.

    ``policy_probs`` [B, n] are the acting policy's action probabilities for a
    Discrete space (one-hot for a greedy policy); then the exact behaviour
    log-probability ``log((1-eps) * pi(a) + eps / n)`` of the executed action is
    returned too. Otherwise (no probabilities, or a continuous space, where the
    mixture of a policy and a uniform draw has no density we can evaluate) the
    second value is ``None``.
    """
    actions = np.array(actions, copy=True)
    n = len(actions)
    mask = rng.random(n) < epsilon
    if mask.any():
        sampler = RandomPolicy(None, action_space, seed=int(rng.integers(2**63)))  # type: ignore[arg-type]
        actions[mask] = sampler._sample(int(mask.sum()))
    if policy_probs is None or not isinstance(action_space, gym.spaces.Discrete):
        return actions, None
    idx = (actions - action_space.start).astype(np.int64)
    p = (1.0 - epsilon) * policy_probs[np.arange(n), idx] + epsilon / action_space.n
    return actions, np.log(p).astype(np.float32)
