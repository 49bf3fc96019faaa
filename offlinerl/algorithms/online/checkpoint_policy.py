"""Acting with a training checkpoint's policy: its inference-only module, weights
and env-to-module connectors (observation statistics), rebuilt in each runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from offlinerl.connectors import ActionsToEnv, ConnectorPipeline, FlattenObservations, NormalizeObservations
from offlinerl.core import columns as C
from offlinerl.core.rl_module import RLModuleSpec
from offlinerl.episodes.spaces import space_from_json
from offlinerl.env.module_policy import ModulePolicyFactory, PipelineConnectors, module_weights

__all__ = ["checkpoint_policy", "env_to_module_pipeline"]


def env_to_module_pipeline(observation_space: Any, config: Any, connector_state: dict[str, Any]) -> ConnectorPipeline:
    """Flatten (+ normalise with the checkpoint's statistics), as the offline job's evaluation does."""
    parts: list[Any] = [FlattenObservations(observation_space)]
    if getattr(config, "normalize_observations", False):
        norm = NormalizeObservations()
        norm.set_state(connector_state["NormalizeObservations"])
        parts.append(norm)
    return ConnectorPipeline(parts)


def checkpoint_policy(path: str | Path) -> tuple[ModulePolicyFactory, PipelineConnectors, dict[str, Any]]:
    """``(policy_factory, connectors_factory, provenance)`` for EnvRunners acting with a checkpoint."""
    from offlinerl.algorithms.algorithm import load_class, read_checkpoint_metadata
    from offlinerl.algorithms.registry import get_algorithm

    meta = read_checkpoint_metadata(path)
    config = get_algorithm(meta["algorithm"]).config_cls.from_dict(meta["config"])
    obs_space = space_from_json(meta["observation_space"])
    act_space = space_from_json(meta["action_space"])
    spec = RLModuleSpec(load_class(meta["module_class"]), obs_space, act_space, config.module_config())
    state = torch.load(Path(path) / "learner_group.pt", weights_only=False)
    weights = module_weights(state["learners"][0]["learner"]["module"], C.DEFAULT_MODULE_ID)
    connectors = PipelineConnectors(
        env_to_module_pipeline(obs_space, config, meta.get("connector_state") or {}), ActionsToEnv(act_space)
    )
    info = {
        "policy": str(path),
        "algorithm": meta["algorithm"],
        "checkpoint_iteration": meta.get("iteration"),
        "checkpoint_updates": meta.get("num_updates"),
        "checkpoint_dataset": meta.get("dataset"),
    }
    return ModulePolicyFactory(spec, weights), connectors, info
