"""Evaluate a checkpoint in its environment: no dataset and no Ray needed.

The checkpoint carries the spaces, the module class, the config and the
connector state, so this rebuilds exactly the preprocessing the job trained with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from offlinerl.env.env_check import check_env, check_team_env
from offlinerl.env.evaluation import check_evaluation, evaluate_module
from offlinerl.env.multi_agent import team_episodes, team_metrics
from offlinerl.training.checkpoint import load_checkpoint
from offlinerl.trusted import is_pettingzoo

__all__ = ["evaluate_checkpoint", "task_kwargs"]


def task_kwargs(ckpt: Any, env: str | None = None) -> dict[str, Any]:
    """The ``gymnasium.make`` kwargs of the task the checkpoint's job evaluated on (the dataset's recorded one) when
    ``env`` is None or names the checkpoint's own env; ``{}`` for another env (its kwargs would not fit it)."""
    ev = ckpt.config.evaluation
    if env is not None and env != (ev.env or ckpt.meta.env_id):
        return {}
    recorded = ckpt.meta.env_kwargs
    return dict(recorded) if isinstance(recorded, dict) else dict(ev.env_kwargs)


def evaluate_checkpoint(path: str | Path, *, env: str | None = None, episodes: int | None = None,
                        seed: int | None = None, env_kwargs: Mapping[str, Any] | None = None,
                        device: str | None = None) -> dict[str, Any]:
    """The checkpoint's deterministic policy over ``episodes`` episodes of its env (or ``env``); ``device``
    (``cpu``, ``cuda``, ``cuda:N``; default the CPU): where the policy network runs. In a multi-agent env
    (``pettingzoo:MODULE``) every module acts for its agents (each with its own observation statistics) and the
    result is the team return (every agent's rewards summed) with each agent's ``eval/<agent>/return_mean``."""
    ckpt = load_checkpoint(path)
    ev = ckpt.config.evaluation
    env_id = env or ev.env or ckpt.meta.env_id
    if not env_id:
        raise ValueError(f"{path}: the checkpoint names no env; pass --env")
    if env_kwargs is None:
        env_kwargs = task_kwargs(ckpt, env)
    episodes, seed = ev.episodes if episodes is None else episodes, ev.seed if seed is None else seed
    check_evaluation(episodes, seed)
    if is_pettingzoo(env_id) or len(ckpt.module_ids) > 1:
        check_team_env(env_id, ckpt.observation_space, ckpt.action_space, list(ckpt.module_ids), env_kwargs,
                       policy_mapping=ckpt.config.policy_mapping, trusted=env is not None, what=f"the checkpoint {path}",
                       module_spaces=ckpt.module_spaces)
        module = ckpt.build_module(inference_only=True).to(device or "cpu")
        out = team_metrics(team_episodes(module, env_id, ckpt.env_to_modules(), episodes=episodes, seed=seed,
                                         env_kwargs=env_kwargs))
    else:
        check_env(env_id, ckpt.observation_space, ckpt.action_space, env_kwargs, trusted=env is not None,
                  what=f"the checkpoint {path}")
        module, env_to_module = ckpt.build_module(inference_only=True).to(device or "cpu"), ckpt.env_to_module()
        out = evaluate_module(module, env_id, env_to_module, episodes=episodes, seed=seed, env_kwargs=env_kwargs)
    return {"checkpoint": str(path), "algorithm": ckpt.algorithm, "env": env_id, "env_kwargs": dict(env_kwargs),
            "device": device or "cpu", **out}
