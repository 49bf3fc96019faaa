"""A trained policy in Python: ``load_policy(checkpoint).predict(obs)``, numpy in, numpy out.

The checkpoint alone is enough: its ``algorithm.json`` holds the spaces, the module's class and config and the
connector state (the observation statistics the job fitted), ``learner_group.pt`` the weights. No dataset is
read and Ray is not started (``import ray`` never runs). ``predict`` goes through the one act step
(``offlinerl.env.policies.act``: env-to-module connectors -> ``forward_inference`` -> module-to-env
connectors), so it returns the actions ``offlinerl evaluate`` plays, for one observation or a batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.env.policies import act
from offlinerl.training.checkpoint import Checkpoint, load_checkpoint

__all__ = ["Policy", "load_policy"]


def _is_single(space: gym.Space, obs: Any) -> bool:
    """Whether ``obs`` is one observation of ``space`` (else a batch of them); ``ValueError`` if it is neither."""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(obs, dict) or set(obs) != set(space.spaces):
            raise ValueError(f"a Dict observation is a dict with the keys {sorted(space.spaces)}, got "
                             f"{sorted(obs) if isinstance(obs, dict) else type(obs).__name__}")
        kinds = {_is_single(sub, obs[key]) for key, sub in space.spaces.items()}
    elif isinstance(space, gym.spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise ValueError(f"a Tuple observation is a tuple of {len(space.spaces)} values")
        kinds = {_is_single(sub, value) for sub, value in zip(space.spaces, obs)}
    else:
        shape = np.shape(obs)
        one = tuple(space.shape) if space.shape is not None else ()
        if shape == one:
            return True
        if len(shape) == len(one) + 1 and shape[1:] == one:
            return False
        raise ValueError(f"observation of shape {shape} for the observation space {space}: give one observation "
                         f"of shape {one} or a batch of shape (B, {', '.join(map(str, one))})".replace(", )", ")"))
    if len(kinds) != 1:
        raise ValueError("some parts of the observation are one observation and others a batch")
    return kinds.pop()


def _has_nan(obs: Any) -> bool:
    """Whether any leaf of ``obs`` (an array, a dict or tuple of them) holds a NaN."""
    if isinstance(obs, dict):
        return any(_has_nan(v) for v in obs.values())
    if isinstance(obs, (tuple, list)) and obs and not np.isscalar(obs[0]):
        return any(_has_nan(v) for v in obs)
    value = np.asarray(obs)
    return value.dtype.kind in "fc" and bool(np.isnan(value).any())


def _rows(space: gym.Space, obs: Any) -> int:
    """Observations in the batch ``obs`` (its first leaf's leading size)."""
    if isinstance(space, gym.spaces.Dict):
        key = next(iter(space.spaces))
        return _rows(space.spaces[key], obs[key])
    if isinstance(space, gym.spaces.Tuple):
        return _rows(space.spaces[0], obs[0])
    return int(np.shape(obs)[0])


def _as_batch(space: gym.Space, obs: Any, single: bool) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {key: _as_batch(sub, obs[key], single) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_as_batch(sub, value, single) for sub, value in zip(space.spaces, obs))
    value = np.asarray(obs)
    return value[None] if single else value


class Policy:
    """A policy acting as its job trained it: raw env observations in, env actions out (see the module docstring).

    Build one with :func:`load_policy` (from a checkpoint) or ``Trainer.policy()`` (the weights of a job in
    this process)."""

    def __init__(self, module: Any, env_to_module: Any, observation_space: gym.Space, action_space: gym.Space,
                 source: str = "") -> None:
        self.module = module
        """The inference-only RLModule."""
        self.env_to_module = env_to_module
        self.module_to_env = module_to_env_pipeline(action_space)
        self.observation_space = observation_space
        self.action_space = action_space
        self.source = source
        """Where the weights came from (a checkpoint path, or a job)."""

    def predict(self, obs: Any, *, explore: bool = False) -> np.ndarray:
        """Actions for ``obs``: one observation (e.g. shape ``(3,)`` for Pendulum) -> one action; a batch
        (``(B, 3)``) -> ``B`` actions. Discrete: int64; Box: the space's dtype, within its bounds. ``explore``:
        sample from the policy's distribution (``forward_exploration``) instead of its deterministic action."""
        single = _is_single(self.observation_space, obs)
        if _has_nan(obs):  # a NaN would pass through the network into the action: no env action is NaN
            raise ValueError("the observation holds NaN; a policy's action for it would be NaN")
        if not single and _rows(self.observation_space, obs) == 0:  # an empty batch: no actions, as the exports
            space = self.action_space
            return np.zeros((0, *(space.shape or ())), dtype=space.dtype or np.int64)
        out = act(self.module, self.env_to_module, self.module_to_env, _as_batch(self.observation_space, obs, single),
                  explore=explore)
        actions = out[C.ACTIONS]
        return actions[0] if single else actions

    def __repr__(self) -> str:
        return f"Policy({type(self.module).__name__}, {self.observation_space} -> {self.action_space}, {self.source})"


def load_policy(checkpoint: str | Path | Checkpoint, module_id: str | None = None) -> Policy:
    """The policy of a training checkpoint (``RUN/checkpoints/final``, a ``fit`` result's ``checkpoint``), with no
    dataset and no Ray. ``module_id``: which module of a multi-module checkpoint. Raises ``CheckpointError``
    (one line) for a checkpoint that cannot be used."""
    ckpt = load_checkpoint(checkpoint)
    ids = ckpt.module_ids
    if module_id is None and len(ids) != 1:
        raise ValueError(f"{ckpt.path} holds the modules {ids}; choose one with module_id")
    module_id = module_id or ids[0]
    if module_id not in ids:
        raise ValueError(f"{ckpt.path} has no module {module_id!r}; it holds {ids}")
    module = ckpt.build_module(inference_only=True)[module_id]  # shapes and finiteness checked, one clear message
    return Policy(module.eval(), ckpt.env_to_module(module_id), *ckpt.spaces_of(module_id),
                  str(ckpt.path))
