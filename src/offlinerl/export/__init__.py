"""Deploying a trained policy: ``export_policy`` writes a checkpoint's acting path (raw env
observation in, env action out) as one TorchScript or ONNX file; see ``docs/deploy.md``."""

from offlinerl.export.deployed import DeployedPolicy, PolicyInput, policy_inputs, policy_output
from offlinerl.export.policy import (FORMATS, METADATA_KEY, ExportError, MissingDependencyError, build_deployed_policy,
                                     export_policy, policy_metadata)

__all__ = ["FORMATS", "METADATA_KEY", "DeployedPolicy", "ExportError", "MissingDependencyError", "PolicyInput",
           "build_deployed_policy", "export_policy", "policy_inputs", "policy_metadata", "policy_output"]
