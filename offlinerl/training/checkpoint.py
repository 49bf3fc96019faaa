"""Checkpoints: one directory layout, one format version, one loader.

    CHECKPOINT/
        algorithm.json     JSON: format + version, algorithm, config, spaces, the module and
                           learner class names, connector state, counters, and the size and
                           sha256 of every other file
        learner_group.pt   tensors only: the LearnerGroup state (module weights, optimizers,
                           RNG states, sampler state, replay counters) and, from a gated
                           fine-tune (``online.promotion: gated``), the deployed policy's
                           inference-only weights (``deployed``), read with
                           ``torch.load(weights_only=True)``
        replay/            online jobs only: an episode dataset (dataset.json + parquet) of the
                           online experience whose transitions the learners' replays may still
                           hold, rows in the order they were added; ``algorithm.json``'s
                           ``replay.groups`` says how many rows each add took and in which
                           iteration (see :class:`ReplayEpisodes`)

Loading a checkpoint never executes anything it holds: the tensors file is read
by torch's restricted unpickler (tensors, numbers, strings, lists, dicts only),
everything else is JSON, and class names are looked up in a table of trusted
classes - the registered algorithms' own classes plus what a user adds with
:func:`allow_class` - never imported by name. Every problem (missing, empty,
truncated or modified files, a foreign file, weights of the wrong shape or with
NaN, a class nobody trusted) raises :class:`CheckpointError` naming the path
and what to do. The ``replay/`` dataset is read with the dataset reader, after
the size and hash of each of its files are checked.

Nothing a checkpoint declares is allocated before it is checked: the model
config's layer widths (:data:`MAX_HIDDEN_WIDTH`), the module it describes, counted
on the meta device without storage (:data:`MAX_MODULE_PARAMETERS`, and no larger
than the weights ``learner_group.pt`` holds), the tensors file's size and what its
zip entries declare (:data:`MAX_STATE_BYTES`, no compressed entries), and the
observation statistics (finite, a variance >= 0, one per observation dimension).

Every reader (``evaluate``, ``collect --policy``, ``finetune --from``,
``train --resume``, ``Algorithm.from_checkpoint``) goes through
:func:`load_checkpoint`; the only writer is :func:`write_checkpoint`. The
checkpoint's *policy* (``Checkpoint.policy_state``, what acting, evaluation,
OPE and export load) is the deployed one where a gated fine-tune wrote it, else
the learners' module.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium as gym
import torch
from torch.overrides import TorchFunctionMode

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import to_finite_json
from offlinerl.episodes import DatasetInfoError, SingleAgentEpisode, load_episodes, write_dataset
from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, atomic_directory
from offlinerl.episodes.spaces import SpaceError, space_from_json
from offlinerl.training.checkpoint_meta import (CHECKPOINT_FORMAT, CHECKPOINT_VERSION, METADATA_FILE, REPLAY_DIR,
                                                CheckpointError, CheckpointMeta)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "DEPLOYED_KEY",
    "METADATA_FILE",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMeta",
    "ReplayEpisodes",
    "allow_class",
    "class_path",
    "load_checkpoint",
    "write_checkpoint",
]

STATE_FILE = "learner_group.pt"
#: ``learner_group.pt``'s entry for a gated fine-tune's deployed policy (inference-only weights).
DEPLOYED_KEY = "deployed"
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

_ALLOWED: dict[str, type] = {}


def class_path(cls: type) -> str:
    """``"package.module:QualName"``: how ``algorithm.json`` names a class."""
    return f"{cls.__module__}:{cls.__qualname__}"


def allow_class(cls: type) -> type:
    """Trust ``cls`` (a custom RLModule or Learner) for loading checkpoints that name it; usable as a decorator.

    Checkpoints name their module and learner classes; offlinerl only uses a
    class it already has in memory and was told to trust - the registered
    algorithms' classes and the ones passed here (or to ``Algorithm(...,
    module_class=...)`` in this process). It never imports a name from a file.
    """
    _ALLOWED[class_path(cls)] = cls
    return cls


def _trusted_classes() -> dict[str, type]:
    from offlinerl.algorithms.registry import algorithm_names, get_algorithm

    out: dict[str, type] = {}
    for name in algorithm_names():
        spec = get_algorithm(name)
        out[class_path(spec.learner_cls)] = spec.learner_cls
        out[class_path(spec.module_cls)] = spec.module_cls
    out.update(_ALLOWED)
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ReplayEpisodes:
    """The online experience an online job's replays were filled from, as a checkpoint keeps it.

    ``groups[g]`` are the episodes (chunks, or whole episodes) one add brought, in order; the learner pipeline
    and the split over learners turn them into the same transitions again (``offlinerl.training.experience``).
    Written as an episode dataset whose rows are the groups' episodes in order; chunk indices are renumbered
    from 0 per episode (the oldest chunks of an episode may have left the replays), nothing else changes.
    """

    groups: Sequence[Sequence[SingleAgentEpisode]]
    """Episodes of each add, oldest add first."""
    iterations: Sequence[int]
    """The iteration of each add."""
    observation_space: gym.Space
    action_space: gym.Space


def _renumbered(episodes: Sequence[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Chunk indices from 0 per episode: the rows are then a valid episode dataset."""
    from dataclasses import replace

    first: dict[tuple, int] = {}
    for ep in episodes:
        key = (ep.id, ep.agent_id)
        first[key] = min(first.get(key, ep.chunk_index), ep.chunk_index)
    return [ep if not first[(ep.id, ep.agent_id)] else replace(ep, chunk_index=ep.chunk_index - first[(ep.id, ep.agent_id)])
            for ep in episodes]


def _write_replay(replay: ReplayEpisodes, directory: Path) -> dict[str, Any]:
    episodes = _renumbered([ep for group in replay.groups for ep in group])
    longest = max((len(ep) for ep in episodes), default=0)
    write_dataset(episodes, directory, observation_space=replay.observation_space,
                  action_space=replay.action_space, max_steps_per_row=max(DEFAULT_MAX_STEPS_PER_ROW, longest),
                  provenance={"collector": "offlinerl online replay (checkpoint)"})
    return {"dir": REPLAY_DIR, "groups": [{"iteration": int(i), "rows": len(g)}
                                          for i, g in zip(replay.iterations, replay.groups)]}


def _file_record(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "sha256": _sha256(path)}


def write_checkpoint(path: str | Path, state: Mapping[str, Any], metadata: Mapping[str, Any],
                     overwrite: bool = False, replay: ReplayEpisodes | None = None) -> Path:
    """Write ``state`` (tensors), ``metadata`` (JSON) and an online job's ``replay`` episodes as a checkpoint
    directory, atomically."""
    with atomic_directory(path, overwrite=overwrite, kind="checkpoint") as tmp:
        torch.save(dict(state), tmp / STATE_FILE)
        files = {STATE_FILE: _file_record(tmp / STATE_FILE)}
        extra: dict[str, Any] = {}
        if replay is not None:
            extra["replay"] = _write_replay(replay, tmp / REPLAY_DIR)
            for f in sorted((tmp / REPLAY_DIR).iterdir()):
                files[f"{REPLAY_DIR}/{f.name}"] = _file_record(f)
        meta = {**to_finite_json(dict(metadata)), **extra, "format": CHECKPOINT_FORMAT,
                "format_version": CHECKPOINT_VERSION, "files": files}
        (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n")
    return Path(path)


def _resolve_class(name: str, role: str, file: Path) -> type:
    cls = _trusted_classes().get(name)
    if cls is None:
        raise CheckpointError(
            f"{file}: names the {role} class {name!r}, which is not a registered offlinerl class; nothing was "
            "imported. If you trust this checkpoint and have that class, import it and call "
            "offlinerl.training.checkpoint.allow_class(TheClass) before loading."
        )
    return cls


def _state_error(file: Path, exc: BaseException) -> CheckpointError:
    text = str(exc).lower()
    if isinstance(exc, pickle.UnpicklingError) and ("weights only" in text or "weights_only" in text or "global" in text):
        return CheckpointError(f"{file}: holds Python objects other than tensors; refused (loading a checkpoint never "
                               "runs code it contains)")
    return CheckpointError(f"{file}: cannot be read as a checkpoint's tensors ({type(exc).__name__}: {str(exc)[:200]}); "
                           "the file is truncated, corrupted or not an offlinerl checkpoint")


def _check_state_file(file: Path) -> None:
    """Refuse a tensors file over :data:`MAX_STATE_BYTES`, or whose zip entries declare more than the file holds
    (torch.save stores entries uncompressed; torch.load would inflate a compressed one to its declared size)."""
    size = file.stat().st_size
    if size > MAX_STATE_BYTES:
        raise CheckpointError(f"{file}: {size:,} bytes, more than a checkpoint's tensors may take "
                              f"({MAX_STATE_BYTES:,}, offlinerl.training.checkpoint.MAX_STATE_BYTES); refused")
    try:
        with zipfile.ZipFile(file) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise _state_error(file, exc) from None
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


def _check_model(file: Path, config: AlgorithmConfig) -> None:
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
                                      f"{cap:,} (offlinerl.training.checkpoint.{cap_name}); refused before "
                                      "building the module")


def _check_module_size(ckpt: Checkpoint) -> None:
    """Count the parameters of the module ``ckpt`` describes without allocating them, and refuse more than
    :data:`MAX_MODULE_PARAMETERS`, or more bytes than ``learner_group.pt`` holds (the file keeps every weight)."""
    try:
        with _ShapesOnly():
            params = list(ckpt.module_spec().build(inference_only=False).parameters())
    except Exception:  # noqa: BLE001 - a custom module that cannot be built so is built for real, as before
        return
    count = sum(p.numel() for p in params)
    nbytes = sum(p.numel() * p.element_size() for p in params)
    file, state = ckpt.path / METADATA_FILE, ckpt.path / STATE_FILE
    if count > MAX_MODULE_PARAMETERS:
        raise CheckpointError(f"{file}: config.model and the spaces describe a module of {count:,} parameters, "
                              f"over the cap of {MAX_MODULE_PARAMETERS:,} (offlinerl.training.checkpoint."
                              "MAX_MODULE_PARAMETERS); refused before building it")
    if state.is_file() and 0 < state.stat().st_size < nbytes:  # an empty or missing file is named as such later
        raise CheckpointError(f"{file}: config.model and the spaces describe a module of {count:,} parameters "
                              f"({nbytes:,} bytes), more than {state} holds ({state.stat().st_size:,} bytes); the "
                              "config does not belong to these weights")


def _check_statistics(file: Path, connector_state: Mapping[str, Any], observation_space: gym.Space) -> None:
    """Refuse observation statistics that would normalise to NaN or belong to another space: ``count`` a
    non-negative integer, ``mean`` and ``var`` one finite number per flattened observation dimension, ``var``
    >= 0."""
    from offlinerl.connectors import NormalizeObservations
    from offlinerl.core.flatten import flat_dim

    name = NormalizeObservations.__name__
    stats = connector_state.get(name)
    if stats is None:
        return
    where = f"{file}: connector_state.{name}"
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


@dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint directory: metadata, resolved classes and config; tensors on demand."""

    path: Path
    meta: CheckpointMeta
    """``algorithm.json``, checked."""
    config: AlgorithmConfig
    """The algorithm config, loaded as the registered algorithm's config class."""
    observation_space: gym.Space
    action_space: gym.Space
    module_class: type
    learner_class: type

    @property
    def algorithm(self) -> str:
        return self.meta.algorithm

    @property
    def module_ids(self) -> list[str]:
        return list(self.meta.module_ids)

    @property
    def connector_state(self) -> dict[str, Any]:
        return dict(self.meta.connector_state)

    def _check_file(self, name: str, required: bool = False) -> Path:
        """``path / name`` after checking it exists, is not empty, and has the size and hash ``files`` records."""
        file = self.path / name
        if not file.is_file():
            raise CheckpointError(f"{file}: missing (the checkpoint was not written completely)")
        size = file.stat().st_size
        if size == 0:
            raise CheckpointError(f"{file}: empty file (the checkpoint was not written completely)")
        recorded = self.meta.files.get(name)
        if recorded is None and required:
            raise CheckpointError(f"{file}: algorithm.json records no size and hash for it; refused")
        if recorded is not None:
            if size != recorded.get("bytes"):
                raise CheckpointError(f"{file}: {size} bytes, but algorithm.json records {recorded.get('bytes')}; "
                                      "the file is truncated or was replaced")
            if _sha256(file) != recorded.get("sha256"):
                raise CheckpointError(f"{file}: its sha256 differs from the one algorithm.json records; the file "
                                      "was modified or corrupted")
        return file

    @cached_property
    def state(self) -> dict[str, Any]:
        """The LearnerGroup state (tensors only), after checking the file's size and hash."""
        file = self._check_file(STATE_FILE)
        _check_state_file(file)
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile,
                AttributeError, TypeError, KeyError, IndexError) as exc:
            raise _state_error(file, exc) from None
        learners = state.get("learners") if isinstance(state, dict) else None
        if not (isinstance(learners, list) and learners and all(
                isinstance(s, dict) and isinstance(s.get("learner"), dict) and isinstance(s["learner"].get("module"), dict)
                for s in learners)):
            raise CheckpointError(f"{file}: not a LearnerGroup state (expected learners[*].learner.module)")
        deployed = state.get(DEPLOYED_KEY)
        if deployed is not None and not (isinstance(deployed, dict) and deployed):
            raise CheckpointError(f"{file}: its {DEPLOYED_KEY!r} entry is not a module state")
        return state

    @property
    def has_replay(self) -> bool:
        """Written by an online job: the learners' replays can be rebuilt (``replay_episodes``)."""
        return self.meta.replay is not None

    def replay_episodes(self) -> ReplayEpisodes:
        """The online experience of the learners' replays, grouped by add, after checking every file of ``replay/``."""
        if not self.has_replay:
            raise CheckpointError(f"{self.path}: holds no online replay (it was not written by an online job)")
        groups_meta = self.meta.replay["groups"]
        directory = self.path / REPLAY_DIR
        names = sorted(n for n in self.meta.files if n.startswith(f"{REPLAY_DIR}/"))
        if not names:
            raise CheckpointError(f"{self.path / METADATA_FILE}: records no files of {REPLAY_DIR}/; refused")
        for name in names:
            self._check_file(name, required=True)
        unlisted = sorted(f.name for f in directory.iterdir() if f"{REPLAY_DIR}/{f.name}" not in names)
        if unlisted:
            raise CheckpointError(f"{directory}: holds files algorithm.json does not record ({unlisted[:3]}); refused")
        try:
            episodes = load_episodes(directory, reassemble=False)
        except (DatasetInfoError, OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{directory}: cannot be read as an episode dataset ({exc})") from None
        if len(episodes) != sum(g["rows"] for g in groups_meta):
            raise CheckpointError(f"{directory}: {len(episodes)} rows, algorithm.json's replay.groups count "
                                  f"{sum(g['rows'] for g in groups_meta)}")
        groups, start = [], 0
        for g in groups_meta:
            groups.append(episodes[start:start + g["rows"]])
            start += g["rows"]
        return ReplayEpisodes(groups, [g["iteration"] for g in groups_meta], self.observation_space,
                              self.action_space)

    def module_state(self) -> dict[str, torch.Tensor]:
        """The trained module's weights (every learner holds the same; learner 0's are returned)."""
        return self.state["learners"][0]["learner"]["module"]

    def deployed_state(self) -> dict[str, torch.Tensor] | None:
        """A gated fine-tune's deployed policy (inference-only weights); None for any other checkpoint."""
        return self.state.get(DEPLOYED_KEY)

    def deployed_policy(self) -> dict[str, torch.Tensor] | None:
        """``deployed_state`` as the state of the inference-only module it was loaded into (shapes and finiteness
        checked, as ``build_module`` checks them); None for a checkpoint without one."""
        return None if self.deployed_state() is None else self.build_module(inference_only=True).state_dict()

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The weights acting loads: the deployed policy where there is one, else the trained module's."""
        deployed = self.deployed_state()
        return self.module_state() if deployed is None else deployed

    @cached_property
    def trained_module(self) -> Any:
        """The full module (critics and targets too) with this checkpoint's weights, built and checked once."""
        return self.build_module(inference_only=False)

    def module_spec(self) -> Any:
        from offlinerl.core.rl_module import MultiRLModuleSpec, RLModuleSpec

        return MultiRLModuleSpec({
            mid: RLModuleSpec(self.module_class, self.observation_space, self.action_space, self.config.module_config())
            for mid in self.module_ids
        })

    def build_module(self, inference_only: bool = True) -> Any:
        """The MultiRLModule with this checkpoint's weights, checked for shape and finiteness: inference-only, the
        policy (``policy_state``); else the trained module (learners' weights, critics and targets too)."""
        module = self.module_spec().build(inference_only=inference_only)
        weights = self.policy_state() if inference_only else self.module_state()
        file = self.path / STATE_FILE
        for key, value in weights.items():
            if not isinstance(value, torch.Tensor):
                raise CheckpointError(f"{file}: module entry {key!r} is not a tensor")
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                raise CheckpointError(f"{file}: the weights {key!r} hold NaN or inf; this checkpoint cannot act "
                                      "(it was saved after training diverged)")
        try:
            module.load_state_dict(weights)
        except RuntimeError as exc:
            raise CheckpointError(f"{file}: the weights do not fit a {self.module_class.__name__} for the "
                                  f"checkpoint's spaces and model config: {str(exc)[:300]}") from None
        return module

    def env_to_module(self) -> Any:
        """Observation preprocessing as the job trained with, restored from the saved connector state."""
        from offlinerl.connectors import ConnectorStateError, env_to_module_pipeline

        try:
            return env_to_module_pipeline(self.observation_space, self.config.normalize_observations,
                                          self.connector_state)
        except ConnectorStateError as exc:
            raise CheckpointError(f"{self.path / METADATA_FILE}: connector_state.{exc}") from None


def load_checkpoint(path: str | Path | Checkpoint) -> Checkpoint:
    """Read and check a checkpoint's metadata and classes; its tensors load on first use (``.state``).

    A ``Checkpoint`` already loaded is returned as it is, so callers can pass either.
    """
    from offlinerl.config_io import ConfigError
    from offlinerl.algorithms.registry import get_algorithm

    if isinstance(path, Checkpoint):
        return path
    path = Path(path)
    meta = CheckpointMeta.read(path)
    file = path / METADATA_FILE
    try:
        spec = get_algorithm(meta.algorithm)
    except KeyError as exc:
        raise CheckpointError(f"{file}: {exc.args[0]}") from None
    try:
        config = spec.config_cls.from_dict(meta.config)
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{file}: config: {exc}") from None
    try:
        obs_space = space_from_json(meta.observation_space)
        act_space = space_from_json(meta.action_space)
    except (SpaceError, RecursionError) as exc:
        raise CheckpointError(f"{file}: {exc}") from None
    _check_model(file, config)
    _check_statistics(file, meta.connector_state, obs_space)
    ckpt = Checkpoint(path, meta, config, obs_space, act_space,
                      _resolve_class(meta.module_class, "module", file),
                      _resolve_class(meta.learner_class, "learner", file))
    _check_module_size(ckpt)
    return ckpt
