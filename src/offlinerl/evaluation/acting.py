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

__all__ = ["checkpoint_policy", "checkpoint_team_policy", "TeamPolicyFactory"]


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


class TeamPolicyFactory:
    """Picklable: rebuilds a multi-agent checkpoint's joint policy wherever it is called (a
    ``MultiAgentEnvRunner``, in this process or in a Ray actor): its inference-only modules, each with its own
    observation statistics; ``explore``: sampled actions (``action_logp`` recorded), else ``forward_inference``."""

    def __init__(self, path: str | Path, explore: bool = True) -> None:
        self.path, self.explore = str(Path(path).resolve()), explore

    def __call__(self, observation_spaces: Mapping[str, Any], action_spaces: Mapping[str, Any]) -> Any:
        from offlinerl.env.multi_agent import ModuleJointPolicy

        ckpt = load_checkpoint(self.path)
        module = ckpt.build_module(inference_only=True).eval()
        return ModuleJointPolicy(module, ckpt.env_to_modules(), action_spaces, explore=self.explore)


def checkpoint_team_policy(path: str | Path, env: str, env_kwargs: Mapping[str, Any] | None = None, *,
                           explore: bool = True) -> tuple[TeamPolicyFactory, dict[str, Any]]:
    """``(TeamPolicyFactory, provenance)`` for recording with a checkpoint's modules in the PettingZoo env ``env``
    (an id the user gave): the env's agents are checked against the checkpoint's spaces and modules, and the
    modules built once (shapes and finiteness), before any episode."""
    from offlinerl.env.env_check import check_team_env

    ckpt = load_checkpoint(path)
    check_team_env(env, ckpt.observation_space, ckpt.action_space, list(ckpt.module_ids), env_kwargs,
                   policy_mapping=ckpt.config.policy_mapping, what=f"the checkpoint {path}",
                   module_spaces=ckpt.module_spaces)
    ckpt.build_module(inference_only=True)
    info = {"policy": str(path), "algorithm": ckpt.algorithm, "checkpoint_iteration": ckpt.meta.iteration,
            "checkpoint_updates": ckpt.meta.num_updates, "checkpoint_dataset": ckpt.meta.dataset}
    return TeamPolicyFactory(path, explore), info
