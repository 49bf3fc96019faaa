"""``algorithm.json``, a checkpoint's description of itself: :class:`CheckpointMeta` is the one reader of that file.

``CheckpointMeta.read(directory)`` checks the file (size, strict JSON, format and version, the type of every
field it needs) and gives its fields typed; ``load_checkpoint`` (``offlinerl.training.checkpoint``) builds on it,
and run directories find their newest checkpoint with it. ``Algorithm.metadata`` is what is written, through
``write_checkpoint``, which adds the format fields and the size and sha256 of every other file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offlinerl.core import columns as C
from offlinerl.config_io import plain_json

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "READABLE_VERSIONS", "METADATA_FILE", "REPLAY_DIR",
           "CheckpointError", "CheckpointMeta"]

CHECKPOINT_FORMAT = "offlinerl-checkpoint"
CHECKPOINT_VERSION = 2
#: Versions this code reads. Version 1 (before 2026-12) has no file sizes or hashes.
READABLE_VERSIONS = (1, 2)
METADATA_FILE = "algorithm.json"
REPLAY_DIR = "replay"
#: ``algorithm.json`` holds a config and small statistics; anything bigger is not ours.
MAX_METADATA_BYTES = 16 * 2**20


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the path, the problem and what to do."""


@dataclass(frozen=True)
class CheckpointMeta:
    """What ``algorithm.json`` says, checked; every reader of the file goes through :meth:`read`."""

    file: Path
    """The ``algorithm.json`` read."""
    format_version: int
    """1 or 2 (:data:`READABLE_VERSIONS`)."""
    algorithm: str
    """Registered algorithm name."""
    config: dict[str, Any]
    """The algorithm config as written (``AlgorithmConfig.to_dict``; ``Checkpoint.config`` is it loaded)."""
    observation_space: dict[str, Any]
    """JSON form of the observation space (``Checkpoint.observation_space`` is the gymnasium space)."""
    action_space: dict[str, Any]
    """JSON form of the action space."""
    module_class: str
    """``"package.module:QualName"`` of the RLModule class (looked up among trusted classes, never imported)."""
    learner_class: str
    """The same for the Learner class."""
    connector_state: dict[str, Any]
    """The env-to-module pipeline's state (observation statistics), keyed by connector name."""
    iteration: int
    """Iterations the job had run."""
    num_updates: int
    """Gradient updates the job had run."""
    module_ids: list[str] = field(default_factory=lambda: [C.DEFAULT_MODULE_ID])
    """Module ids of the MultiRLModule (default: the single default module)."""
    env_steps: int = 0
    """Env steps sampled (online jobs; 0 otherwise)."""
    weights_seq_no: int = 0
    """Weight versions sent to the env runners (online jobs; 0 otherwise)."""
    dataset: str | None = None
    """The job's dataset, as it named it."""
    dataset_fingerprint: str | None = None
    """The content fingerprint of the data it trained on (``dataset.json``'s; None: none recorded, or an older
    checkpoint)."""
    env_id: str | None = None
    """The dataset's env id."""
    env_kwargs: Any = None
    """The ``gymnasium.make`` kwargs the job evaluated with (a mapping; absent in older checkpoints: None)."""
    best_eval_return: Any = None
    """The best evaluation mean return so far (None before any)."""
    last_eval: dict[str, Any] = field(default_factory=dict)
    """The newest evaluation's metrics (``{}`` before the first)."""
    online: Any = None
    """An online job's ``OnlineConfig`` as a mapping (None offline)."""
    gate: Any = None
    """A gated fine-tune's gate record: ``score``, ``gates``, ``promotions`` (None otherwise)."""
    replay: dict[str, Any] | None = None
    """An online job's replay record: ``{"dir": "replay", "groups": [{"iteration", "rows"}, ...]}``."""
    files: dict[str, Any] = field(default_factory=dict)
    """Size and sha256 of every other file (``{name: {"bytes", "sha256"}}``; version 1: none)."""
    module_spaces: dict[str, Any] | None = None
    """Modules acting in different spaces (a dataset whose agents' spaces differ, ``episodes.agent_spaces``):
    ``{module_id: {"observation_space", "action_space"}}`` in JSON form; None: every module in the two above."""

    @classmethod
    def read(cls, directory: str | Path) -> "CheckpointMeta":
        """The checked ``algorithm.json`` of checkpoint ``directory``; ``CheckpointError`` (one line naming the file
        and the problem) for a missing, empty, oversized, foreign, newer or incomplete one."""
        directory = Path(directory)
        meta = _read(directory)
        last_eval = meta.get("last_eval")
        fingerprint = meta.get("dataset_fingerprint")
        return cls(
            file=directory / METADATA_FILE, format_version=meta["format_version"], algorithm=meta["algorithm"],
            config=meta["config"], observation_space=meta["observation_space"], action_space=meta["action_space"],
            module_class=meta["module_class"], learner_class=meta["learner_class"], module_ids=list(meta["module_ids"]),
            connector_state=meta["connector_state"], iteration=meta["iteration"], num_updates=meta["num_updates"],
            env_steps=meta["env_steps"], weights_seq_no=meta["weights_seq_no"], dataset=meta.get("dataset"),
            dataset_fingerprint=fingerprint if isinstance(fingerprint, str) else None, env_id=meta.get("env_id"),
            env_kwargs=meta.get("env_kwargs"), best_eval_return=meta.get("best_eval_return"),
            last_eval=last_eval if isinstance(last_eval, dict) else {}, online=meta.get("online"),
            gate=meta.get("gate"), replay=meta.get("replay"), files=meta["files"],
            module_spaces=meta.get("module_spaces"),
        )

    def to_json(self) -> dict[str, Any]:
        """The fields as ``algorithm.json`` holds them (what ``write_checkpoint`` takes back as metadata)."""
        out = {"algorithm": self.algorithm, "config": self.config, "dataset": self.dataset,
               "dataset_fingerprint": self.dataset_fingerprint, "env_id": self.env_id,
               "env_kwargs": self.env_kwargs, "observation_space": self.observation_space,
               "action_space": self.action_space, "module_class": self.module_class, "module_ids": self.module_ids,
               "learner_class": self.learner_class, "connector_state": self.connector_state,
               "iteration": self.iteration, "num_updates": self.num_updates, "env_steps": self.env_steps,
               "weights_seq_no": self.weights_seq_no, "best_eval_return": self.best_eval_return,
               "last_eval": self.last_eval}
        out.update({k: v for k, v in (("online", self.online), ("gate", self.gate), ("replay", self.replay),
                                      ("module_spaces", self.module_spaces)) if v is not None})
        return {**out, "format": CHECKPOINT_FORMAT, "format_version": self.format_version, "files": self.files}


def _read(path: Path) -> dict[str, Any]:
    """The checked JSON of ``path / algorithm.json`` (optional counters and ``module_ids`` filled in)."""
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint directory")
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a checkpoint (a checkpoint is a directory holding {METADATA_FILE})")
    file = path / METADATA_FILE
    if not file.is_file():
        hint = f"; did you mean {path / 'checkpoints' / 'final'}?" if (path / "checkpoints" / "final").is_dir() else ""
        raise CheckpointError(f"{path}: not a checkpoint (no {METADATA_FILE}){hint}")
    size = file.stat().st_size
    if size == 0:
        raise CheckpointError(f"{file}: empty file (the checkpoint was not written completely)")
    if size > MAX_METADATA_BYTES:
        raise CheckpointError(f"{file}: {size} bytes, more than an offlinerl checkpoint's {MAX_METADATA_BYTES}; not ours")
    try:
        meta = plain_json(file.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:  # bad JSON, deep nesting, huge integers (NestingError)
        raise CheckpointError(f"{file}: not valid JSON ({exc}); the checkpoint is truncated or not an offlinerl checkpoint") from None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{file}: not an offlinerl checkpoint (no \"format\": \"{CHECKPOINT_FORMAT}\")")
    version = meta.get("format_version")
    if version not in READABLE_VERSIONS:
        newer = isinstance(version, int) and version > CHECKPOINT_VERSION
        raise CheckpointError(
            f"{file}: checkpoint format version {version!r}; this offlinerl reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}" + ("; upgrade offlinerl to load it" if newer else "")
        )
    expected = {"algorithm": str, "config": dict, "observation_space": dict, "action_space": dict,
                "module_class": str, "learner_class": str, "connector_state": dict, "iteration": int, "num_updates": int}
    for key, tp in expected.items():
        if not isinstance(meta.get(key), tp) or isinstance(meta.get(key), bool):
            raise CheckpointError(f"{file}: field {key!r} is missing or not a {tp.__name__} ({meta.get(key)!r:.80})")
    for key in ("env_steps", "weights_seq_no"):  # online jobs' counters (absent: 0)
        value = meta.setdefault(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise CheckpointError(f"{file}: field {key!r} must be a non-negative integer ({value!r:.80})")
    replay = meta.get("replay")
    if replay is not None and not (isinstance(replay, dict) and replay.get("dir") == REPLAY_DIR and isinstance(
            replay.get("groups"), list) and all(isinstance(g, dict) and isinstance(g.get("rows"), int)
                                                 and isinstance(g.get("iteration"), int) for g in replay["groups"])):
        raise CheckpointError(f"{file}: field 'replay' must be {{\"dir\": \"{REPLAY_DIR}\", \"groups\": "
                              "[{\"iteration\": int, \"rows\": int}, ...]}")
    ids = meta.setdefault("module_ids", [C.DEFAULT_MODULE_ID])
    if not (isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids)):
        raise CheckpointError(f"{file}: field 'module_ids' must be a non-empty list of strings")
    if not isinstance(meta.setdefault("files", {}), dict):  # version 1 records none
        raise CheckpointError(f"{file}: field 'files' must be an object (file name -> bytes and sha256)")
    return meta
