"""Deploying a trained policy: ``export_policy`` writes a checkpoint's acting path (raw env
observation in, env action out) as one TorchScript or ONNX file; a multi-module checkpoint's modules
go to a file each (``export_module_policies``) or into one joint file (``export_joint_policy``); see
``docs/deploy.md``."""

from offlinerl.export.deployed import (DeployedPolicy, JointDeployedPolicy, PolicyInput, policy_inputs,
                                       policy_output)
from offlinerl.export.policy import (FORMATS, METADATA_KEY, SUFFIXES, ExportError, MissingDependencyError,
                                     build_deployed_policies, build_deployed_policy, build_joint_policy,
                                     export_joint_policy, export_module_policies, export_policy,
                                     joint_policy_metadata, policy_metadata)

__all__ = ["FORMATS", "METADATA_KEY", "SUFFIXES", "DeployedPolicy", "ExportError", "JointDeployedPolicy",
           "MissingDependencyError", "PolicyInput", "build_deployed_policies", "build_deployed_policy",
           "build_joint_policy", "export_joint_policy", "export_module_policies", "export_policy",
           "joint_policy_metadata", "policy_inputs", "policy_metadata", "policy_output"]
