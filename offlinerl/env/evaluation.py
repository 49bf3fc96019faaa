"""Evaluation in real gymnasium envs: env -> [env-to-module] -> ``forward_inference`` -> [module-to-env] -> env.

Episodes run side by side, one env each (seeds ``seed, seed + 1, ...``), in
waves of at most ``max_parallel``; one batched forward per step. Separate envs
(not a gymnasium vector env) so auto-reset never mixes episodes, and an
evaluation is deterministic given the weights and the seed.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
import torch

from offlinerl.connectors import ConnectorPipeline, module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.core.rl_module import MultiRLModule, RLModule
from offlinerl.episodes.arrow import batch_concat, batch_map

__all__ = ["evaluate_module"]


def _stack(observations: list[Any]) -> Any:
    return batch_concat([batch_map(lambda a: np.asarray(a)[None], o) for o in observations])


@torch.no_grad()
def evaluate_module(
    module: RLModule | MultiRLModule,
    env_id: str,
    env_to_module: ConnectorPipeline,
    *,
    episodes: int = 10,
    seed: int = 10_000,
    env_kwargs: Mapping[str, Any] | None = None,
    max_parallel: int = 32,
) -> dict[str, float]:
    """Mean/std return and mean length of ``episodes`` deterministic episodes."""
    if isinstance(module, MultiRLModule):
        module = module[module.module_for_agent(None)]
    module.eval()
    device = next(module.parameters()).device
    returns: list[float] = []
    lengths: list[int] = []
    for start in range(0, episodes, max_parallel):
        n = min(max_parallel, episodes - start)
        envs = [gym.make(env_id, **dict(env_kwargs or {})) for _ in range(n)]
        to_env = module_to_env_pipeline(envs[0].action_space)
        obs = [env.reset(seed=seed + start + i)[0] for i, env in enumerate(envs)]
        ret = np.zeros(n)
        length = np.zeros(n, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        while active.any():
            idx = np.flatnonzero(active)
            batch = env_to_module({C.OBS: _stack([obs[i] for i in idx])})
            out = module.forward_inference({C.OBS: torch.as_tensor(batch[C.OBS], device=device)})
            actions = to_env({C.ACTIONS: out[C.ACTIONS]})[C.ACTIONS]
            for j, i in enumerate(idx):
                obs[i], r, term, trunc, _ = envs[i].step(actions[j])
                ret[i] += r
                length[i] += 1
                if term or trunc:
                    active[i] = False
        for env in envs:
            env.close()
        returns.extend(ret.tolist())
        lengths.extend(length.tolist())
    return {
        "eval/return_mean": float(np.mean(returns)),
        "eval/return_std": float(np.std(returns)),
        "eval/length_mean": float(np.mean(lengths)),
        "eval/episodes": float(len(returns)),
    }
