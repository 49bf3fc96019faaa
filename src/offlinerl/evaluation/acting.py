"""Acting with a training checkpoint's policy: its inference-only module, weights
and env-to-module connectors (observation statistics), rebuilt in each runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from offlinerl.connectors import module_to_env_pipeline
from offlinerl.core import columns as C
from offlinerl.env.env_check import check_env
from offlinerl.env.module_policy import ModulePolicyFactory, PipelineConnectors, module_weights
from offlinerl.training.checkpoint import load_checkpoint

__all__ = ["checkpoint_policy", "checkpoint_team_policy"]


def checkpoint_policy(path: str | Path, env: str | None = None, env_kwargs: Mapping[str, Any] | None = None,
                      ) -> tuple[ModulePolicyFactory, PipelineConnectors, dict[str, Any]]:
    """``(policy_factory, connectors_factory, provenance)`` for EnvRunners acting with a checkpoint.

    With ``env`` (an id the user gave), the env is made once first and its spaces
    compared with the checkpoint's, so a mismatch is one clear message.
    """
    ckpt = load_checkpoint(path)
    if env is not None:
        check_env(env, ckpt.observation_space, ckpt.action_space, env_kwargs, what=f"the checkpoint {path}")
    ckpt.build_module(inference_only=True)  # shapes and finiteness checked here, once, with a clear message
    spec = ckpt.module_spec().specs[C.DEFAULT_MODULE_ID]
    weights = module_weights(ckpt.policy_state(), C.DEFAULT_MODULE_ID)
    connectors = PipelineConnectors(ckpt.env_to_module(), module_to_env_pipeline(ckpt.action_space))
    info = {
        "policy": str(path),
        "algorithm": ckpt.algorithm,
        "checkpoint_iteration": ckpt.meta.iteration,
        "checkpoint_updates": ckpt.meta.num_updates,
        "checkpoint_dataset": ckpt.meta.dataset,
    }
    return ModulePolicyFactory(spec, weights), connectors, info


def checkpoint_team_policy(path: str | Path, env: str, env_kwargs: Mapping[str, Any] | None = None, *,
                           explore: bool = True) -> tuple[Any, dict[str, Any]]:
    """``(joint policy, provenance)`` acting with a checkpoint's modules in the PettingZoo env ``env`` (an id the
    user gave): every module for its agents, each with its own observation statistics; ``explore``: sampled
    actions (``action_logp`` recorded), else ``forward_inference``. The env's agents are checked against the
    checkpoint's spaces and modules first."""
    from offlinerl.env.env_check import check_team_env
    from offlinerl.env.multi_agent import ModuleJointPolicy, env_spaces
    from offlinerl.trusted import make_parallel_env

    ckpt = load_checkpoint(path)
    check_team_env(env, ckpt.observation_space, ckpt.action_space, list(ckpt.module_ids), env_kwargs,
                   what=f"the checkpoint {path}")
    module = ckpt.build_module(inference_only=True)
    probe = make_parallel_env(env, env_kwargs, explicit=True)
    try:
        _, action_spaces = env_spaces(probe)
    finally:
        probe.close()
    info = {"policy": str(path), "algorithm": ckpt.algorithm, "checkpoint_iteration": ckpt.meta.iteration,
            "checkpoint_updates": ckpt.meta.num_updates, "checkpoint_dataset": ckpt.meta.dataset}
    return ModuleJointPolicy(module.eval(), ckpt.env_to_modules(), action_spaces, explore=explore), info
