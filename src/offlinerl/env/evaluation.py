"""Evaluation in real gymnasium envs: the one evaluation loop.

    env -> [env-to-module] -> ``forward_inference`` -> [module-to-env] -> env

``run_episodes`` is the loop every evaluation runs through, offline
(``evaluate_module``: ``Algorithm.evaluate``, ``offlinerl evaluate``) and
online (``EnvRunner.evaluate`` inside an ``EnvRunnerGroup``). Episode ``j``
starts with ``reset(seed=seeds[j])`` in a free env; episodes run side by side,
one env each, with one batched forward per step over the running ones.
Separate envs (not a gymnasium vector env) so auto-reset never mixes episodes,
and an evaluation is deterministic given the weights and the seeds, whatever
the number of envs or runners. ``episode_metrics`` (``offlinerl.core.metrics``) names the numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch

from offlinerl.connectors import ConnectorPipeline, module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.core import metrics as M
from offlinerl.core.metrics import episode_metrics
from offlinerl.core.rl_module import MultiRLModule, RLModule
from offlinerl.env.policies import act
from offlinerl.episodes.arrow import batch_concat, batch_map
from offlinerl.trusted import make_env

__all__ = ["evaluate_module", "module_episodes", "run_episodes", "episode_metrics", "check_evaluation",
           "MAX_EVAL_EPISODES"]

MAX_EVAL_EPISODES = M.MAX_EVAL_EPISODES  # here too: where evaluation's callers look for it


def check_evaluation(episodes: int, seed: int) -> None:
    """``ValueError`` unless ``1 <= episodes <= MAX_EVAL_EPISODES`` and ``seed >= 0`` (gymnasium's reset seeds are
    non-negative): said before any env is made."""
    if not 1 <= episodes <= MAX_EVAL_EPISODES:
        raise ValueError(f"evaluation episodes must be between 1 and {MAX_EVAL_EPISODES:,}, got {episodes:,}")
    if seed < 0:
        raise ValueError(f"the evaluation seed must be >= 0 (episode j is reset with seed + j), got {seed}")

#: ``batch of observations (one row per running episode) -> actions for the envs``.
ActFn = Callable[[Any], Any]


def _stack(observations: list[Any]) -> Any:
    return batch_concat([batch_map(lambda a: np.asarray(a)[None], o) for o in observations])


def run_episodes(envs: Sequence[gym.Env], act: ActFn, seeds: Sequence[int]) -> tuple[list[float], list[int]]:
    """Returns and lengths of one episode per seed, in seed order.

    Episode ``j`` is reset with ``seeds[j]`` in the first env that is free (the
    first ``len(envs)`` at once, later ones as earlier episodes end); every
    step calls ``act`` once on the running episodes' observations, in env order.
    """
    if not envs:
        raise ValueError("run_episodes needs at least one env")
    seeds = list(seeds)
    returns, lengths = [0.0] * len(seeds), [0] * len(seeds)
    slot: list[int | None] = [None] * len(envs)  # the episode each env runs
    obs: list[Any] = [None] * len(envs)
    next_j = 0

    def start(i: int) -> None:
        nonlocal next_j
        slot[i] = None
        if next_j < len(seeds):
            slot[i], obs[i] = next_j, envs[i].reset(seed=seeds[next_j])[0]
            next_j += 1

    for i in range(len(envs)):
        start(i)
    while any(j is not None for j in slot):
        running = [i for i, j in enumerate(slot) if j is not None]
        actions = act(_stack([obs[i] for i in running]))
        for k, i in enumerate(running):
            obs[i], reward, terminated, truncated, _ = envs[i].step(actions[k])
            j = slot[i]
            returns[j] += float(reward)
            lengths[j] += 1
            if terminated or truncated:
                start(i)
    return returns, lengths


def evaluate_module(module: RLModule | MultiRLModule, env_id: str, env_to_module: ConnectorPipeline,
                    **kwargs: Any) -> dict[str, float]:
    """``episode_metrics`` (prefix ``eval``) of ``module_episodes`` (same arguments)."""
    return episode_metrics(*module_episodes(module, env_id, env_to_module, **kwargs), M.EVAL)


@torch.no_grad()
def module_episodes(
    module: RLModule | MultiRLModule,
    env_id: str,
    env_to_module: ConnectorPipeline,
    *,
    episodes: int = 10,
    seed: int = 10_000,
    env_kwargs: Mapping[str, Any] | None = None,
    max_parallel: int = 32,
) -> tuple[list[float], list[int]]:
    """Returns and lengths, in seed order, of ``episodes`` deterministic (``forward_inference``) episodes, episode
    ``j`` reset with ``seed + j``, at most ``max_parallel`` at a time."""
    check_evaluation(episodes, seed)
    if isinstance(module, MultiRLModule):
        module = module[module.module_for_agent(None)]
    module.eval()
    device = next(module.parameters()).device
    envs = [make_env(env_id, env_kwargs, explicit=True) for _ in range(min(max_parallel, episodes))]  # checked by the caller
    to_env = module_to_env_pipeline(envs[0].action_space)
    try:
        return run_episodes(envs, lambda obs: act(module, env_to_module, to_env, obs, device=device)[C.ACTIONS],
                            [seed + j for j in range(episodes)])
    finally:
        for env in envs:
            env.close()
