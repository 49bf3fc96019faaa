"""What a checkpoint declares, checked before anything of that size is allocated.

The model config's layer widths and depth (:data:`MAX_HIDDEN_WIDTH`, :data:`MAX_HIDDEN_LAYERS`) and its critics
(:data:`MAX_CRITICS`); the module it describes, counted on the meta device without storage
(:data:`MAX_MODULE_PARAMETERS`, and no larger than the weights ``learner_group.pt`` holds); the tensors file's
size and what its zip entries declare (:data:`MAX_STATE_BYTES`, no compressed entries); and the observation
statistics (finite, a variance >= 0, one per observation dimension). ``load_checkpoint``
(``offlinerl.training.checkpoint``) runs these; each raises :class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import math
import pickle
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import torch
from torch.overrides import TorchFunctionMode

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.training.checkpoint_meta import CheckpointError

__all__ = ["MAX_CRITICS", "MAX_HIDDEN_LAYERS", "MAX_HIDDEN_WIDTH", "MAX_MODULE_PARAMETERS", "MAX_STATE_BYTES",
           "check_model", "check_module_size", "check_state_file", "check_statistics", "state_error"]

#: Widest layer a checkpoint's model config may declare (``hidden``, ``cnn_channels``, ``cnn_out``), and the most
#: hidden layers: 64x the default width of 256, far past what offline RL trains.
MAX_HIDDEN_WIDTH = 16384
MAX_HIDDEN_LAYERS = 64
#: Most critics (ensemble members) a checkpoint's config may declare.
MAX_CRITICS = 1024
#: Most parameters the module a checkpoint describes may have, all module ids, critics and targets together:
#: 2**28 (1 GiB of float32), some 800x the default CQL module.
MAX_MODULE_PARAMETERS = 2**28
#: Largest ``learner_group.pt`` (and the most its zip entries may declare together): two learners' weights and
#: Adam moments of a module at ``MAX_MODULE_PARAMETERS``, with room to spare.
MAX_STATE_BYTES = 8 * 2**30

_HERE = "offlinerl.training.checkpoint_bounds"


def state_error(file: Path, exc: BaseException) -> CheckpointError:
    """The one-line error for a tensors file torch cannot (or must not) read."""
    text = str(exc).lower()
    if isinstance(exc, pickle.UnpicklingError) and ("weights only" in text or "weights_only" in text or "global" in text):
        return CheckpointError(f"{file}: holds Python objects other than tensors; refused (loading a checkpoint never "
                               "runs code it contains)")
    return CheckpointError(f"{file}: cannot be read as a checkpoint's tensors ({type(exc).__name__}: {str(exc)[:200]}); "
                           "the file is truncated, corrupted or not an offlinerl checkpoint")


def check_state_file(file: Path) -> None:
    """Refuse a tensors file over :data:`MAX_STATE_BYTES`, or whose zip entries declare more than the file holds
    (torch.save stores entries uncompressed; torch.load would inflate a compressed one to its declared size)."""
    size = file.stat().st_size
    if size > MAX_STATE_BYTES:
        raise CheckpointError(f"{file}: {size:,} bytes, more than a checkpoint's tensors may take "
                              f"({MAX_STATE_BYTES:,}, {_HERE}.MAX_STATE_BYTES); refused")
    try:
        with zipfile.ZipFile(file) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise state_error(file, exc) from None
    declared = sum(e.file_size for e in entries)
    compressed = [e.filename for e in entries if e.compress_type != zipfile.ZIP_STORED]
    if compressed or declared > size:
        raise CheckpointError(f"{file}: its zip entries declare {declared:,} bytes in a file of {size:,}"
                              + (f" ({compressed[0]!r} is compressed)" if compressed else "")
                              + "; torch.save writes neither, so this is not an offlinerl checkpoint's; refused")


#: Tensor factories that take a size: under :class:`_ShapesOnly` they build on the meta device.
_SIZED_FACTORIES = frozenset({torch.empty, torch.empty_strided, torch.zeros, torch.ones, torch.full, torch.eye,
                              torch.rand, torch.randn, torch.randint})


class _ShapesOnly(TorchFunctionMode):
    """Sized tensor factories without a device build on the meta device: a module built under this mode has its
    parameters' shapes and dtypes but no storage (tensors made from data, e.g. action bounds, stay real)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _SIZED_FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def check_model(file: Path, config: AlgorithmConfig) -> None:
    """Refuse a model config wider or deeper than :data:`MAX_HIDDEN_WIDTH` / :data:`MAX_HIDDEN_LAYERS`, or
    with more than :data:`MAX_CRITICS` critics, before any module is built (or counted)."""
    model = config.module_config()
    width = ("MAX_HIDDEN_WIDTH", MAX_HIDDEN_WIDTH)
    caps = {"hidden": width, "cnn_channels": width, "cnn_out": width, "num_critics": ("MAX_CRITICS", MAX_CRITICS)}
    for key, (cap_name, cap) in caps.items():
        value = model.get(key)
        listed = isinstance(value, (list, tuple))
        values = list(value) if listed else [] if value is None else [value]
        field = f"config.{key}" if key == "num_critics" else f"config.model.{key}"
        if len(values) > MAX_HIDDEN_LAYERS:
            raise CheckpointError(f"{file}: {field} declares {len(values):,} layers, more than {MAX_HIDDEN_LAYERS}; "
                                  "refused before building the module")
        for i, v in enumerate(values):
            if isinstance(v, int) and v > cap:
                raise CheckpointError(f"{file}: {field}{f'[{i}]' if listed else ''} is {v:,}, over the cap of "
                                      f"{cap:,} ({_HERE}.{cap_name}); refused before building the module")


def check_module_size(file: Path, state: Path, module_spec: Callable[[], Any]) -> None:
    """Count the parameters of the module ``module_spec()`` describes without allocating them, and refuse more than
    :data:`MAX_MODULE_PARAMETERS`, or more bytes than the tensors file ``state`` holds (it keeps every weight).
    ``file``: the ``algorithm.json`` the errors name."""
    try:
        with _ShapesOnly():
            params = list(module_spec().build(inference_only=False).parameters())
    except Exception:  # noqa: BLE001 - a custom module that cannot be built so is built for real, as before
        return
    count = sum(p.numel() for p in params)
    nbytes = sum(p.numel() * p.element_size() for p in params)
    if count > MAX_MODULE_PARAMETERS:
        raise CheckpointError(f"{file}: config.model and the spaces describe a module of {count:,} parameters, "
                              f"over the cap of {MAX_MODULE_PARAMETERS:,} ({_HERE}.MAX_MODULE_PARAMETERS); refused "
                              "before building it")
    if state.is_file() and 0 < state.stat().st_size < nbytes:  # an empty or missing file is named as such later
        raise CheckpointError(f"{file}: config.model and the spaces describe a module of {count:,} parameters "
                              f"({nbytes:,} bytes), more than {state} holds ({state.stat().st_size:,} bytes); the "
                              "config does not belong to these weights")


def check_statistics(file: Path, connector_state: Mapping[str, Any], observation_space: gym.Space,
                     module_ids: Sequence[str] = (), module_observation_spaces: Mapping[str, gym.Space] | None = None) -> None:
    """Refuse observation statistics that would normalise to NaN or belong to another space: ``count`` a
    non-negative integer, ``mean`` and ``var`` one finite number per flattened observation dimension, ``var``
    >= 0. With several ``module_ids``, each module's (``connectors.split_module_states``; in its own observation
    space where ``module_observation_spaces`` gives one)."""
    from offlinerl.connectors import ConnectorStateError, split_module_states

    if len(module_ids) <= 1:
        _check_statistics(file, "", connector_state, observation_space)
        return
    try:
        states = split_module_states(connector_state, module_ids)
    except ConnectorStateError as exc:
        raise CheckpointError(f"{file}: connector_state.{exc}") from None
    for mid, state in states.items():
        space = (module_observation_spaces or {}).get(mid, observation_space)
        _check_statistics(file, f"{mid}." if mid in connector_state else "", state, space)


def _check_statistics(file: Path, prefix: str, connector_state: Mapping[str, Any], observation_space: gym.Space) -> None:
    """``check_statistics`` of one module's state (``connector_state.<prefix>...`` in messages)."""
    from offlinerl.connectors import NormalizeObservations
    from offlinerl.core.flatten import flat_dim

    name = NormalizeObservations.__name__
    stats = connector_state.get(name)
    if stats is None:
        return
    where = f"{file}: connector_state.{prefix}{name}"
    if not isinstance(stats, dict):
        raise CheckpointError(f"{where} must be an object with count, mean and var")
    count = stats.get("count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise CheckpointError(f"{where}.count must be a non-negative integer, got {count!r:.80}")
    if "mean" not in stats and "var" not in stats:
        return
    dim = flat_dim(observation_space)
    for key in ("mean", "var"):
        values = stats.get(key)
        if not (isinstance(values, list) and len(values) == dim and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)):
            shown = f"{len(values)} values" if isinstance(values, list) and len(values) != dim else f"{values!r:.80}"
            raise CheckpointError(f"{where}.{key} must be {dim} finite numbers (one per dimension of the "
                                  f"flattened observation space), got {shown}")
    negative = next((i for i, v in enumerate(stats["var"]) if v < 0), None)
    if negative is not None:
        raise CheckpointError(f"{where}.var[{negative}] is {stats['var'][negative]!r}; a variance is never "
                              "negative, so these statistics would normalise observations to NaN")
