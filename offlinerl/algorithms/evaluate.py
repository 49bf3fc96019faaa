"""Evaluate a checkpoint in its environment: no dataset and no Ray needed.

The checkpoint carries the spaces, the module class, the config and the
connector state, so this rebuilds exactly the preprocessing the job trained with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from offlinerl.algorithms.algorithm import load_class, read_checkpoint_metadata
from offlinerl.core import columns as C
from offlinerl.connectors import ConnectorPipeline, FlattenObservations, NormalizeObservations
from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec
from offlinerl.env.evaluation import evaluate_module
from offlinerl.episodes.spaces import space_from_json

__all__ = ["load_policy", "evaluate_checkpoint"]


def load_policy(path: str | Path) -> tuple[Any, ConnectorPipeline, dict[str, Any]]:
    """(inference-only module with the checkpoint's weights, env-to-module pipeline, metadata)."""
    from offlinerl.algorithms.registry import get_algorithm

    meta = read_checkpoint_metadata(path)
    spec = get_algorithm(meta["algorithm"])
    config = spec.config_cls.from_dict(meta["config"])
    obs_space = space_from_json(meta["observation_space"])
    act_space = space_from_json(meta["action_space"])
    module_cls = load_class(meta["module_class"])
    module_spec = MultiRLModuleSpec({mid: RLModuleSpec(module_cls, obs_space, act_space, config.module_config())
                                     for mid in meta.get("module_ids", [C.DEFAULT_MODULE_ID])})
    module = module_spec.build(inference_only=True)
    state = torch.load(Path(path) / "learner_group.pt", weights_only=False)
    module.load_state_dict(state["learners"][0]["learner"]["module"])
    parts: list[Any] = [FlattenObservations(obs_space)]
    if "NormalizeObservations" in meta["connector_state"]:
        norm = NormalizeObservations()
        norm.set_state(meta["connector_state"]["NormalizeObservations"])
        parts.append(norm)
    return module, ConnectorPipeline(parts), {**meta, "resolved_config": config}


def evaluate_checkpoint(path: str | Path, *, env: str | None = None, episodes: int | None = None,
                        seed: int | None = None, env_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    module, env_to_module, meta = load_policy(path)
    if len(module.keys()) > 1:
        raise ValueError(f"{path}: holds {len(module.keys())} modules ({', '.join(module.keys())}); "
                         "evaluation runs single-agent envs")
    ev = meta["resolved_config"].evaluation
    env_id = env or ev.env or meta.get("env_id")
    if not env_id:
        raise ValueError(f"{path}: the checkpoint names no env; pass --env")
    out = evaluate_module(module, env_id, env_to_module, episodes=episodes or ev.episodes,
                          seed=ev.seed if seed is None else seed, env_kwargs=env_kwargs or ev.env_kwargs)
    return {"checkpoint": str(path), "algorithm": meta["algorithm"], "env": env_id, **out}
