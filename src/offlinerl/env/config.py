"""``EnvRunnerConfig``: how an EnvRunner builds and steps its vector env."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import gymnasium as gym

from offlinerl.trusted import make_env

__all__ = ["EnvRunnerConfig", "VECTORIZE_MODES", "AUTORESET_MODES"]

VECTORIZE_MODES = ("sync", "async")
AUTORESET_MODES = ("next_step", "same_step")


@dataclass(frozen=True, kw_only=True)
class EnvRunnerConfig:
    """Everything an EnvRunner needs besides its policy (picklable, so Ray actors can get it)."""

    env: str | Callable[[], gym.Env]
    """Gymnasium env id, or a zero-argument callable returning a ``gym.Env``."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gym.make`` (ignored when ``env`` is a callable)."""
    max_episode_steps: int | None = None
    """Override of the env's time limit (``gym.make(max_episode_steps=...)``); truncation stays exact."""
    num_envs: int = 1
    """Sub-environments per runner, stepped together with one batched policy forward."""
    vectorize_mode: str = "sync"
    """``"sync"`` (all sub-envs in the runner's process) or ``"async"`` (one subprocess each)."""
    autoreset_mode: str = "next_step"
    """Gymnasium vector autoreset mode; ``"next_step"`` (gymnasium's default) or ``"same_step"``."""
    seed: int | None = None
    """Base seed: sub-env ``i`` of runner ``w`` is reset first with ``seed + 1000 * w + i``."""
    explore: bool = True
    """Default for ``sample``: ``forward_exploration`` (True) or ``forward_inference`` (False)."""
    epsilon: float = 0.0
    """Probability of replacing each action with a uniformly random one (data collection)."""
    record_weights_seq_no: bool = False
    """Store a per-step ``weights_seq_no`` extra column (online training; off for datasets)."""
    torch_threads: int = 1
    """``torch.set_num_threads`` inside each runner actor."""

    def __post_init__(self) -> None:
        if not (isinstance(self.env, str) or callable(self.env)):
            raise ValueError(f"env must be a gymnasium id or a callable, got {self.env!r}")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if self.vectorize_mode not in VECTORIZE_MODES:
            raise ValueError(f"vectorize_mode must be one of {VECTORIZE_MODES}, got {self.vectorize_mode!r}")
        if self.autoreset_mode not in AUTORESET_MODES:
            raise ValueError(f"autoreset_mode must be one of {AUTORESET_MODES}, got {self.autoreset_mode!r}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {self.epsilon}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")
        if self.torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {self.torch_threads}")

    @property
    def env_name(self) -> str:
        """A readable name of the env (its id, or the callable's name)."""
        return self.env if isinstance(self.env, str) else getattr(self.env, "__name__", repr(self.env))

    def make_env(self) -> gym.Env:
        """One (non-vector) env, as each sub-env is built."""
        if isinstance(self.env, str):
            kwargs = dict(self.env_kwargs)
            if self.max_episode_steps is not None:
                kwargs["max_episode_steps"] = self.max_episode_steps
            return make_env(self.env, kwargs, explicit=True)  # checked where the id was read
        env = self.env()
        if self.max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, self.max_episode_steps)
        return env

    def make_vector_env(self) -> gym.vector.VectorEnv:
        """The runner's vector env (always a Sync/AsyncVectorEnv over real ``gym.Env`` copies)."""
        mode = gym.vector.AutoresetMode.NEXT_STEP if self.autoreset_mode == "next_step" else gym.vector.AutoresetMode.SAME_STEP
        fns = [self.make_env] * self.num_envs
        if self.vectorize_mode == "async":
            return gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode)
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
