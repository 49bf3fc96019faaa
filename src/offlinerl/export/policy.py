"""``export_policy``: write a checkpoint's policy as one TorchScript or ONNX file; for a checkpoint of several
modules (multi-agent), ``export_module_policies`` writes a file per module and ``export_joint_policy`` one file
acting for every module.

The file holds a ``DeployedPolicy`` (raw env observation in, env action out; see ``deployed.py``) or a
``JointDeployedPolicy`` (every module's, an input and an output per module) and its description
(``policy_metadata``, ``joint_policy_metadata``): in the ONNX model's ``metadata_props`` under
``offlinerl_policy``, in the TorchScript archive as the extra file ``offlinerl_policy.json``, and beside the
file as ``FILE.json``. Running it needs only onnxruntime or torch, not offlinerl.

Both formats are traced at a batch of 2 with the batch dimension left free: TorchScript with
``torch.jit.trace``, ONNX with torch's TorchScript-based exporter (``dynamo=False``), which needs
the ``onnx`` package but not ``onnxscript``. Torch 2.13 marks both as deprecated; their warnings
(and the tracer's, about Python branches on the batch size that do not change the result) are
silenced here and the parity tests stand in for them.

Every output is written atomically (``offlinerl.episodes.atomic.atomic_file``: temporary files, renamed into
place only once every file of the export is written); an existing file is replaced only with
``overwrite=True``, and never the checkpoint, a file inside it or inside any dataset or checkpoint.
"""

from __future__ import annotations

import json
import re
import warnings
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from offlinerl.connectors import observation_connectors
from offlinerl.episodes.agent_spaces import agent_spaces_json
from offlinerl.episodes.atomic import UnsafeOutputError, atomic_file, check_output_file, check_output_place
from offlinerl.episodes.spaces import space_to_json
from offlinerl.export.deployed import (DeployedPolicy, JointDeployedPolicy, joint_batch_name, joint_input_name,
                                       joint_output_name, policy_inputs, policy_output)
from offlinerl.training.checkpoint import Checkpoint, load_checkpoint

__all__ = ["FORMATS", "METADATA_KEY", "SUFFIXES", "ExportError", "MissingDependencyError", "build_deployed_policies",
           "build_deployed_policy", "build_joint_policy", "export_joint_policy", "export_module_policies",
           "export_policy", "joint_policy_metadata", "policy_metadata"]

#: What ``export_policy`` writes.
FORMATS = ("onnx", "torchscript")
#: The file name ending of each format (``export_module_policies`` names its files ``<module_id><suffix>``).
SUFFIXES = {"onnx": ".onnx", "torchscript": ".pt"}
POLICY_FORMAT = "offlinerl-policy"
POLICY_FORMAT_VERSION = 1
#: The ONNX ``metadata_props`` key; the TorchScript extra file is ``METADATA_KEY + ".json"``.
METADATA_KEY = "offlinerl_policy"
ONNX_OPSET = 17
INSTALL_HINT = "pip install 'offlinerl[export]'"
#: Module ids ``export_module_policies`` accepts as file names.
_FILE_NAME_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class ExportError(ValueError):
    """A policy that cannot be exported as asked; the message says why and what to do."""


class MissingDependencyError(ExportError):
    """An optional package the format needs is not installed."""


def _module_id(ckpt: Checkpoint, module_id: str | None) -> str:
    ids = ckpt.module_ids
    if module_id is None:
        if len(ids) != 1:
            raise ExportError(
                f"{ckpt.path} holds the modules {ids}; choose what to export: --module-id ID (one module's policy), "
                "--all-modules (a file per module, in the directory -o names) or --joint (one file acting for every "
                "module: an input and an output per module); in Python: module_id=, export_module_policies, "
                "export_joint_policy")
        module_id = ids[0]
    if module_id not in ids:
        raise ExportError(f"{ckpt.path} has no module {module_id!r}; it holds {ids}")
    return module_id


def _deployed(ckpt: Checkpoint, module_ids: list[str]) -> dict[str, DeployedPolicy]:
    """The ``DeployedPolicy`` of each of ``module_ids``, from one build of the checkpoint's modules (an encoder
    the modules share stays one object), each with its own observation statistics."""
    ckpt.env_to_modules()  # checks the saved statistics; CheckpointError names what is wrong
    modules = ckpt.build_module(inference_only=True)
    out = {}
    for mid in module_ids:
        obs_space, act_space = ckpt.spaces_of(mid)
        obs = observation_connectors(obs_space, ckpt.config.normalize_observations, ckpt.module_connector_state(mid))
        policy = DeployedPolicy(modules[mid], obs_space, act_space, obs.normalize, mid)
        out[mid] = policy.eval().requires_grad_(False)  # outputs carry no autograd graph (.numpy() works)
    return out


def build_deployed_policy(checkpoint: str | Path | Checkpoint, module_id: str | None = None) -> DeployedPolicy:
    """The acting path of the checkpoint's module ``module_id`` (None: its only one) as one module
    (``CheckpointError`` for a bad checkpoint, ``ExportError`` for a missing or unnamed module)."""
    ckpt = load_checkpoint(checkpoint)
    module_id = _module_id(ckpt, module_id)
    return _deployed(ckpt, [module_id])[module_id]


def build_deployed_policies(checkpoint: str | Path | Checkpoint) -> dict[str, DeployedPolicy]:
    """``build_deployed_policy`` of every module of the checkpoint, by module id."""
    ckpt = load_checkpoint(checkpoint)
    return _deployed(ckpt, ckpt.module_ids)


def build_joint_policy(checkpoint: str | Path | Checkpoint) -> JointDeployedPolicy:
    """Every module's acting path in one module (``JointDeployedPolicy``)."""
    joint = JointDeployedPolicy(build_deployed_policies(checkpoint))
    names = [*joint.input_names(), *joint.output_names()]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ExportError(f"the module ids {joint.module_ids} give a joint policy the same name {clash[0]!r} twice "
                          "(inputs are named <module_id>[.<leaf>], outputs actions_<module_id>); export a file per "
                          "module (--all-modules) instead")
    return joint.eval().requires_grad_(False)


def _source(ckpt: Checkpoint, fmt: str) -> dict[str, Any]:
    from offlinerl import __version__

    return {"format": POLICY_FORMAT, "format_version": POLICY_FORMAT_VERSION, "runtime": fmt,
            "offlinerl_version": __version__, "checkpoint": str(ckpt.path), "algorithm": ckpt.algorithm}


def policy_metadata(ckpt: Checkpoint, policy: DeployedPolicy, fmt: str) -> dict[str, Any]:
    """What a deployed file says about itself: source, spaces, inputs and output (JSON)."""
    obs_space, act_space = ckpt.spaces_of(policy.module_id)
    return {
        **_source(ckpt, fmt), "module_id": policy.module_id, "iteration": ckpt.meta.iteration,
        "num_updates": ckpt.meta.num_updates, "normalize_observations": policy.normalize,
        "observation_space": space_to_json(obs_space), "action_space": space_to_json(act_space),
        "inputs": [spec.to_json() for spec in policy_inputs(obs_space)],
        "outputs": [policy_output(act_space)],
    }


def joint_policy_metadata(ckpt: Checkpoint, joint: JointDeployedPolicy, fmt: str) -> dict[str, Any]:
    """``policy_metadata`` of a joint file: ``module_ids`` instead of ``module_id``; each input and output names
    its ``module_id``, and its first dimension is that module's own batch (``batch_<module_id>``)."""
    inputs, outputs = [], []
    for mid, policy in zip(joint.module_ids, joint.policies):
        batch = joint_batch_name(mid)
        for spec in policy.inputs:
            entry = spec.to_json()
            inputs.append({**entry, "name": joint_input_name(mid, spec), "module_id": mid,
                           "shape": [batch, *entry["shape"][1:]]})
        entry = policy_output(ckpt.spaces_of(mid)[1])
        outputs.append({**entry, "name": joint_output_name(mid), "module_id": mid,
                        "shape": [batch, *entry["shape"][1:]]})
    return {
        **_source(ckpt, fmt), "module_ids": list(joint.module_ids), "iteration": ckpt.meta.iteration,
        "num_updates": ckpt.meta.num_updates, "normalize_observations": bool(ckpt.config.normalize_observations),
        "observation_space": space_to_json(ckpt.observation_space), "action_space": space_to_json(ckpt.action_space),
        **({} if ckpt.module_spaces is None else {"module_spaces": agent_spaces_json(ckpt.module_spaces)}),
        "inputs": inputs, "outputs": outputs,
    }


@contextmanager
def _quiet_tracing() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for text in (r".*torch\.jit\.trace.* is deprecated", r".*legacy TorchScript-based ONNX export",
                     r"The feature will be removed"):
            warnings.filterwarnings("ignore", message=text)
        yield


def _write_torchscript(policy: nn.Module, meta: dict[str, Any], tmp: Path) -> None:
    with _quiet_tracing(), torch.no_grad():
        traced = torch.jit.trace(policy, policy.example_inputs())
    torch.jit.save(traced, str(tmp), _extra_files={f"{METADATA_KEY}.json": json.dumps(meta)})


def _write_onnx(policy: nn.Module, meta: dict[str, Any], tmp: Path) -> None:
    """Inputs and outputs named and batched as ``meta`` says (the first entry of each ``shape``)."""
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError(f"ONNX export needs the onnx package: {INSTALL_HINT}") from None
    specs = [*meta["inputs"], *meta["outputs"]]
    with _quiet_tracing(), torch.no_grad():
        torch.onnx.export(policy, policy.example_inputs(), str(tmp), input_names=[s["name"] for s in meta["inputs"]],
                          output_names=[s["name"] for s in meta["outputs"]],
                          dynamic_axes={s["name"]: {0: s["shape"][0]} for s in specs}, opset_version=ONNX_OPSET,
                          dynamo=False)
    model = onnx.load(str(tmp))
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(meta)
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp))


def _sidecar(out: Path) -> Path:
    return out.with_name(out.name + ".json")


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _check_outputs(ckpt: Checkpoint, paths: list[str | Path], overwrite: bool) -> list[Path]:
    """The resolved ``paths``, each (and its ``.json``) checked as a file output, before any work."""
    inputs = [ckpt.path]  # never the checkpoint, nor a file inside it (nor inside any dataset or checkpoint)
    out = [check_output_file(p, overwrite, inputs=inputs) for p in paths]
    for p in out:
        check_output_file(_sidecar(p), overwrite, inputs=inputs)
    return out


def _write(ckpt: Checkpoint, files: list[tuple[Path, nn.Module, dict[str, Any]]], fmt: str, overwrite: bool) -> None:
    """Write every ``(path, policy, metadata)`` and its ``path.json`` through temporary files, renamed into place
    only once all are written (nothing is left of a failed export); ``atomic_file`` checks each path again."""
    inputs = [ckpt.path]
    with ExitStack() as stack:
        for out, policy, meta in files:
            tmp = stack.enter_context(atomic_file(out, overwrite, inputs=inputs))
            tmp_meta = stack.enter_context(atomic_file(_sidecar(out), overwrite, inputs=inputs))
            try:
                (_write_onnx if fmt == "onnx" else _write_torchscript)(policy, meta, tmp)
            except (RuntimeError, TypeError) as exc:  # tracing or the exporter: e.g. a custom module it cannot follow
                raise ExportError(f"{ckpt.path}: the {ckpt.module_class.__name__} policy could not be exported as "
                                  f"{fmt}: {type(exc).__name__}: {str(exc)[:300]}") from exc
            tmp_meta.write_text(json.dumps(meta, indent=2) + "\n")


def export_policy(checkpoint: str | Path | Checkpoint, path: str | Path, fmt: str = "onnx", *,
                  module_id: str | None = None, overwrite: bool = False) -> Path:
    """Write the policy of the checkpoint's module ``module_id`` (None: its only one) to ``path`` as ``fmt``
    ("onnx" or "torchscript") and its metadata to ``path + ".json"``; returns ``path``.

    Raises ``CheckpointError`` (bad checkpoint), ``MissingDependencyError`` (``onnx`` not installed),
    ``OutputExistsError``/``UnsafeOutputError`` (refused output; nothing written), ``OutputWriteError``
    (read-only or full disk; nothing half-written) or ``ExportError`` (e.g. several modules and none named).
    """
    _check_format(fmt)
    ckpt = load_checkpoint(checkpoint)
    module_id = _module_id(ckpt, module_id)
    (out,) = _check_outputs(ckpt, [path], overwrite)
    policy = _deployed(ckpt, [module_id])[module_id]
    _write(ckpt, [(out, policy, policy_metadata(ckpt, policy, fmt))], fmt, overwrite)
    return out


def export_module_policies(checkpoint: str | Path | Checkpoint, directory: str | Path, fmt: str = "onnx", *,
                           overwrite: bool = False) -> dict[str, Path]:
    """Write every module's policy, as ``export_policy`` writes one, to ``directory/<module_id><suffix>`` (suffix
    ``.onnx`` or ``.pt``; with ``.json`` beside each); returns the files by module id. The directory is created if
    missing; nothing else in it is touched. Raises as ``export_policy``, and ``ExportError`` for a module id that
    is not a plain file name (letters, digits, ``_ . -``)."""
    _check_format(fmt)
    ckpt = load_checkpoint(checkpoint)
    bad = [mid for mid in ckpt.module_ids if not _FILE_NAME_ID.fullmatch(mid)]
    if bad:
        raise ExportError(f"{ckpt.path}: the module id {bad[0]!r} is not a plain file name (letters, digits, _ . -); "
                          "export it with --module-id and -o FILE, or all modules as one file with --joint")
    folder = check_output_place(directory, inputs=[ckpt.path])
    if folder.exists() and not folder.is_dir():
        raise UnsafeOutputError(f"{directory} exists and is not a directory; --all-modules writes a file per module "
                                "into the directory -o names")
    files = _check_outputs(ckpt, [folder / f"{mid}{SUFFIXES[fmt]}" for mid in ckpt.module_ids], overwrite)
    paths = dict(zip(ckpt.module_ids, files))
    policies = _deployed(ckpt, ckpt.module_ids)
    _write(ckpt, [(paths[mid], p, policy_metadata(ckpt, p, fmt)) for mid, p in policies.items()], fmt, overwrite)
    return paths


def export_joint_policy(checkpoint: str | Path | Checkpoint, path: str | Path, fmt: str = "onnx", *,
                        overwrite: bool = False) -> Path:
    """Write one file acting for every module of the checkpoint (``JointDeployedPolicy``: inputs
    ``<module_id>[.<leaf>]``, outputs ``actions_<module_id>``, each module with its own normalisation and batch) to
    ``path`` and its metadata (``joint_policy_metadata``) to ``path + ".json"``; returns ``path``. Raises as
    ``export_policy``."""
    _check_format(fmt)
    ckpt = load_checkpoint(checkpoint)
    (out,) = _check_outputs(ckpt, [path], overwrite)
    joint = build_joint_policy(ckpt)
    _write(ckpt, [(out, joint, joint_policy_metadata(ckpt, joint, fmt))], fmt, overwrite)
    return out
