"""``export_policy``: write a checkpoint's policy as one TorchScript or ONNX file.

The file holds a ``DeployedPolicy`` (raw env observation in, env action out; see ``deployed.py``)
and its description (``policy_metadata``): in the ONNX model's ``metadata_props`` under
``offlinerl_policy``, in the TorchScript archive as the extra file ``offlinerl_policy.json``, and
beside the file as ``FILE.json``. Running it needs only onnxruntime or torch, not offlinerl.

Both formats are traced at a batch of 2 with the batch dimension left free: TorchScript with
``torch.jit.trace``, ONNX with torch's TorchScript-based exporter (``dynamo=False``), which needs
the ``onnx`` package but not ``onnxscript``. Torch 2.13 marks both as deprecated; their warnings
(and the tracer's, about Python branches on the batch size that do not change the result) are
silenced here and the parity tests stand in for them.

The output is written atomically (``offlinerl.episodes.atomic.atomic_file``: a temporary file renamed
into place); an existing file is replaced only with ``overwrite=True``, and never the checkpoint, a
file inside it or inside any dataset or checkpoint.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from offlinerl.connectors import observation_connectors
from offlinerl.episodes.atomic import atomic_file, check_output_file
from offlinerl.episodes.spaces import space_to_json
from offlinerl.export.deployed import DeployedPolicy, policy_inputs, policy_output
from offlinerl.training.checkpoint import Checkpoint, load_checkpoint

__all__ = ["FORMATS", "METADATA_KEY", "ExportError", "MissingDependencyError", "build_deployed_policy",
           "export_policy", "policy_metadata"]

#: What ``export_policy`` writes.
FORMATS = ("onnx", "torchscript")
POLICY_FORMAT = "offlinerl-policy"
POLICY_FORMAT_VERSION = 1
#: The ONNX ``metadata_props`` key; the TorchScript extra file is ``METADATA_KEY + ".json"``.
METADATA_KEY = "offlinerl_policy"
ONNX_OPSET = 17
INSTALL_HINT = "pip install 'offlinerl[export]'"


class ExportError(ValueError):
    """A policy that cannot be exported as asked; the message says why and what to do."""


class MissingDependencyError(ExportError):
    """An optional package the format needs is not installed."""


def _module(ckpt: Checkpoint, module_id: str | None) -> Any:
    ids = ckpt.module_ids
    if module_id is None:
        if len(ids) != 1:
            raise ExportError(f"{ckpt.path} holds modules {ids}; choose one with module_id (--module-id)")
        module_id = ids[0]
    if module_id not in ids:
        raise ExportError(f"{ckpt.path} has no module {module_id!r}; it holds {ids}")
    return module_id, ckpt.build_module(inference_only=True)[module_id]


def build_deployed_policy(checkpoint: str | Path | Checkpoint, module_id: str | None = None) -> DeployedPolicy:
    """The checkpoint's acting path as one module (``CheckpointError`` for a bad checkpoint)."""
    ckpt = load_checkpoint(checkpoint)
    ckpt.env_to_module()  # checks the saved statistics; CheckpointError names what is wrong
    module_id, module = _module(ckpt, module_id)
    obs = observation_connectors(ckpt.observation_space, ckpt.config.normalize_observations, ckpt.connector_state)
    policy = DeployedPolicy(module, ckpt.observation_space, ckpt.action_space, obs.normalize, module_id)
    return policy.eval().requires_grad_(False)  # the file's outputs then carry no autograd graph (.numpy() works)


def policy_metadata(ckpt: Checkpoint, policy: DeployedPolicy, fmt: str) -> dict[str, Any]:
    """What a deployed file says about itself: source, spaces, inputs and output (JSON)."""
    from offlinerl import __version__

    return {
        "format": POLICY_FORMAT, "format_version": POLICY_FORMAT_VERSION, "runtime": fmt,
        "offlinerl_version": __version__, "checkpoint": str(ckpt.path), "algorithm": ckpt.algorithm,
        "module_id": policy.module_id, "iteration": ckpt.meta.iteration, "num_updates": ckpt.meta.num_updates,
        "normalize_observations": policy.normalize,
        "observation_space": space_to_json(ckpt.observation_space), "action_space": space_to_json(ckpt.action_space),
        "inputs": [spec.to_json() for spec in policy_inputs(ckpt.observation_space)],
        "outputs": [policy_output(ckpt.action_space)],
    }


@contextmanager
def _quiet_tracing() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for text in (r".*torch\.jit\.trace.* is deprecated", r".*legacy TorchScript-based ONNX export",
                     r"The feature will be removed"):
            warnings.filterwarnings("ignore", message=text)
        yield


def _write_torchscript(policy: DeployedPolicy, meta: dict[str, Any], tmp: Path) -> None:
    with _quiet_tracing(), torch.no_grad():
        traced = torch.jit.trace(policy, policy.example_inputs())
    torch.jit.save(traced, str(tmp), _extra_files={f"{METADATA_KEY}.json": json.dumps(meta)})


def _write_onnx(policy: DeployedPolicy, meta: dict[str, Any], tmp: Path) -> None:
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError(f"ONNX export needs the onnx package: {INSTALL_HINT}") from None
    names = [spec["name"] for spec in meta["inputs"]]
    batch = {name: {0: "batch"} for name in [*names, "actions"]}
    with _quiet_tracing(), torch.no_grad():
        torch.onnx.export(policy, policy.example_inputs(), str(tmp), input_names=names, output_names=["actions"],
                          dynamic_axes=batch, opset_version=ONNX_OPSET, dynamo=False)
    model = onnx.load(str(tmp))
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(meta)
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp))


def _sidecar(out: Path) -> Path:
    return out.with_name(out.name + ".json")


def export_policy(checkpoint: str | Path | Checkpoint, path: str | Path, fmt: str = "onnx", *,
                  module_id: str | None = None, overwrite: bool = False) -> Path:
    """Write the checkpoint's policy to ``path`` as ``fmt`` ("onnx" or "torchscript") and its metadata
    to ``path + ".json"``; returns ``path``.

    Raises ``CheckpointError`` (bad checkpoint), ``MissingDependencyError`` (``onnx`` not installed),
    ``OutputExistsError``/``UnsafeOutputError`` (refused output; nothing written), ``OutputWriteError``
    (read-only or full disk; nothing half-written) or ``ExportError``.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    ckpt = load_checkpoint(checkpoint)
    inputs = [ckpt.path]  # never the checkpoint, nor a file inside it (nor inside any dataset or checkpoint)
    out = check_output_file(path, overwrite, inputs=inputs)
    check_output_file(_sidecar(out), overwrite, inputs=inputs)
    policy = build_deployed_policy(ckpt, module_id)
    meta = policy_metadata(ckpt, policy, fmt)
    with atomic_file(out, overwrite, inputs=inputs) as tmp, \
            atomic_file(_sidecar(out), overwrite, inputs=inputs) as tmp_meta:
        try:
            (_write_onnx if fmt == "onnx" else _write_torchscript)(policy, meta, tmp)
        except (RuntimeError, TypeError) as exc:  # tracing or the exporter: e.g. a custom module it cannot follow
            raise ExportError(f"{ckpt.path}: the {ckpt.module_class.__name__} policy could not be exported as "
                              f"{fmt}: {type(exc).__name__}: {str(exc)[:300]}") from exc
        tmp_meta.write_text(json.dumps(meta, indent=2) + "\n")
    return out
