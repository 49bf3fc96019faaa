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

Nothing a checkpoint declares is allocated before it is checked
(``offlinerl.training.checkpoint_bounds``: layer widths, the module's parameter
count, the tensors file's size, observation statistics); an online job's
``replay/`` is written and read by ``offlinerl.training.checkpoint_replay``.

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
import pickle
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import gymnasium as gym
import torch

from offlinerl.algorithms.algorithm_config import AlgorithmConfig
from offlinerl.config_io import to_finite_json
from offlinerl.episodes.agent_spaces import agent_spaces_from_json
from offlinerl.episodes.io import atomic_directory
from offlinerl.episodes.spaces import SpaceError, space_from_json
from offlinerl.training.checkpoint_bounds import (check_model, check_module_size, check_state_file, check_statistics,
                                                  state_error)
from offlinerl.training.checkpoint_meta import (CHECKPOINT_FORMAT, CHECKPOINT_VERSION, METADATA_FILE, REPLAY_DIR,
                                                CheckpointError, CheckpointMeta)
from offlinerl.training.checkpoint_replay import ReplayEpisodes, read_replay, write_replay

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "DEPLOYED_KEY",
    "METADATA_FILE",
    "STATE_FILE",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMeta",
    "ReplayEpisodes",
    "allow_class",
    "class_path",
    "file_sha256",
    "load_checkpoint",
    "write_checkpoint",
]

STATE_FILE = "learner_group.pt"
#: ``learner_group.pt``'s entry for a gated fine-tune's deployed policy (inference-only weights).
DEPLOYED_KEY = "deployed"

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


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of ``path``, as ``algorithm.json``'s ``files`` records it."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_record(path: Path) -> dict[str, Any]:
    return {"bytes": path.stat().st_size, "sha256": file_sha256(path)}


def write_checkpoint(path: str | Path, state: Mapping[str, Any], metadata: Mapping[str, Any],
                     overwrite: bool = False, replay: ReplayEpisodes | None = None) -> Path:
    """Write ``state`` (tensors), ``metadata`` (JSON) and an online job's ``replay`` episodes as a checkpoint
    directory, atomically."""
    with atomic_directory(path, overwrite=overwrite, kind="checkpoint") as tmp:
        torch.save(dict(state), tmp / STATE_FILE)
        files = {STATE_FILE: _file_record(tmp / STATE_FILE)}
        extra: dict[str, Any] = {}
        if replay is not None:
            extra["replay"] = write_replay(replay, tmp / REPLAY_DIR)
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
    module_spaces: dict[str, tuple[gym.Space, gym.Space]] | None = None
    """Each module's ``(observation, action)`` spaces where they differ (``CheckpointMeta.module_spaces``); None:
    every module acts in the two spaces above."""

    def spaces_of(self, module_id: str | None = None) -> tuple[gym.Space, gym.Space]:
        """Module ``module_id``'s ``(observation, action)`` spaces (None: the only module's)."""
        if self.module_spaces is None:
            return self.observation_space, self.action_space
        if module_id is None:
            if len(self.module_ids) != 1:
                raise ValueError(f"{self.path} holds the modules {self.module_ids}; choose one with module_id")
            module_id = self.module_ids[0]
        return self.module_spaces[module_id]

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
            if file_sha256(file) != recorded.get("sha256"):
                raise CheckpointError(f"{file}: its sha256 differs from the one algorithm.json records; the file "
                                      "was modified or corrupted")
        return file

    @cached_property
    def state(self) -> dict[str, Any]:
        """The LearnerGroup state (tensors only), after checking the file's size and hash."""
        file = self._check_file(STATE_FILE)
        check_state_file(file)
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile,
                AttributeError, TypeError, KeyError, IndexError) as exc:
            raise state_error(file, exc) from None
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
        return read_replay(self.path, self.meta, self._check_file, self.observation_space, self.action_space)

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
        """The ``MultiRLModuleSpec`` the job trained (``AlgorithmConfig.module_spec``: a shared encoder too)."""
        return self.config.module_spec(self.module_class, self.observation_space, self.action_space, self.module_ids,
                                       self.module_spaces)

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

    def module_connector_state(self, module_id: str | None = None) -> dict[str, Any]:
        """Module ``module_id``'s connector state (None: the only module's); a multi-module checkpoint saves
        ``{module_id: state}`` (``connectors.split_module_states``)."""
        from offlinerl.connectors import ConnectorStateError, split_module_states

        ids = self.module_ids
        if module_id is None and len(ids) != 1:
            raise ValueError(f"{self.path} holds the modules {ids}; choose one with module_id")
        module_id = module_id or ids[0]
        if module_id not in ids:
            raise ValueError(f"{self.path} has no module {module_id!r}; it holds {ids}")
        try:
            return split_module_states(self.connector_state, ids)[module_id]
        except ConnectorStateError as exc:
            raise CheckpointError(f"{self.path / METADATA_FILE}: connector_state.{exc}") from None

    def env_to_module(self, module_id: str | None = None) -> Any:
        """Observation preprocessing as module ``module_id`` (None: the only module) trained with, restored from
        the saved connector state."""
        from offlinerl.connectors import ConnectorStateError, env_to_module_pipeline

        state = self.module_connector_state(module_id)
        try:
            return env_to_module_pipeline(self.spaces_of(module_id)[0], self.config.normalize_observations, state)
        except ConnectorStateError as exc:
            where = f"{module_id}." if module_id is not None and module_id in self.connector_state else ""
            raise CheckpointError(f"{self.path / METADATA_FILE}: connector_state.{where}{exc}") from None

    def env_to_modules(self) -> dict[str, Any]:
        """Every module's ``env_to_module`` (each checked: the state a job restores before its data uses it)."""
        return {mid: self.env_to_module(mid) for mid in self.module_ids}


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
    try:
        spaces = agent_spaces_from_json(meta.module_spaces, f"{file}: module_spaces")
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(str(exc)) from None
    if spaces is not None and sorted(spaces) != sorted(meta.module_ids):
        raise CheckpointError(f"{file}: module_spaces names the modules {sorted(spaces)}, module_ids {meta.module_ids}")
    check_model(file, config)
    check_statistics(file, meta.connector_state, obs_space, meta.module_ids,
                     None if spaces is None else {m: o for m, (o, _) in spaces.items()})
    ckpt = Checkpoint(path, meta, config, obs_space, act_space,
                      _resolve_class(meta.module_class, "module", file),
                      _resolve_class(meta.learner_class, "learner", file), spaces)
    state, recorded = path / STATE_FILE, meta.files.get(STATE_FILE) or {}
    size = state.stat().st_size if state.is_file() else 0  # a missing or empty file is named as such later
    if size and recorded.get("bytes") not in (None, size):  # before the weights' size is judged by the config
        raise CheckpointError(f"{state}: {size:,} bytes, but algorithm.json records "
                              f"{recorded['bytes']:,}; the file is truncated or was replaced")
    check_module_size(file, state, ckpt.module_spec)
    return ckpt
