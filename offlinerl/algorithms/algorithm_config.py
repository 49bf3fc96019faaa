"""``AlgorithmConfig``: the frozen, keyword-only, documented config every algorithm extends.

Overrides go through ``dataclasses.replace``; ``from_dict`` / ``from_file`` load
YAML or JSON with every value checked; ``to_dict`` is what run directories and
checkpoints store.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping

from offlinerl.algorithms.config_io import ConfigError, from_dict, load_file, to_dict

if TYPE_CHECKING:
    import gymnasium as gym

    from offlinerl.connectors import ConnectorV2

__all__ = ["AlgorithmConfig", "ModelConfig", "DataConfig", "HoldoutConfig", "EvaluationConfig", "ConfigError"]

#: Estimators ``evaluation.ope`` may name (``offlinerl.algorithms.ope.run.METHODS``, which a test keeps equal).
OPE_METHODS = ("fqe", "is", "wis", "pdis", "dr")


def _check(cond: bool, field_name: str, message: str) -> None:
    if not cond:
        raise ConfigError(f"{field_name}: {message}")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of the stock module (``DefaultRLModule``); custom modules read what they need."""

    hidden: tuple[int, ...] = (256, 256)
    """Widths of the hidden layers of every MLP (policy, value, critics)."""
    activation: str = "relu"
    """Activation between layers: relu, tanh, elu, silu or gelu."""
    encoder: Literal["auto", "mlp", "cnn"] = "auto"
    """Observation encoder: "cnn" for HxWxC image observations, "mlp" otherwise; "auto" picks by shape."""
    cnn_channels: tuple[int, ...] = (16, 32)
    """Channels of the CNN encoder's conv layers (3x3, stride 2)."""
    cnn_out: int = 256
    """Width of the CNN encoder's output layer."""
    cnn_scale: float = 1.0
    """Factor applied to image pixels before the CNN (1/255 for uint8 images)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form keys passed on to a custom module's ``model_config``."""

    def __post_init__(self) -> None:
        _check(all(h > 0 for h in self.hidden), "model.hidden", f"widths must be positive, got {self.hidden}")
        _check(self.activation in ("relu", "tanh", "elu", "silu", "gelu"), "model.activation", f"unknown {self.activation!r}")

    def to_module_config(self) -> dict[str, Any]:
        d = {k: v for k, v in to_dict(self).items() if k != "extra"}
        return {**d, **self.extra}


@dataclass(frozen=True, kw_only=True)
class HoldoutConfig:
    """Episodes kept out of training for model selection by OPE (``offlinerl.data.holdout``)."""

    fraction: float = 0.2
    """Share of the episodes held out (at least one episode, and at least one left to train on)."""
    seed: int = 0
    """Seed of the permutation of the sorted episode ids that picks them (same seed, same split)."""

    def __post_init__(self) -> None:
        _check(0 < self.fraction < 1, "data.holdout.fraction", f"must be in (0, 1), got {self.fraction}")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """How OfflineData reads the dataset and feeds the learners."""

    mode: Literal["auto", "in_memory", "streaming"] = "auto"
    """"in_memory" holds every transition as arrays in each learner (fast path); "streaming" reads with a
    local shuffle buffer (datasets larger than memory); "auto" picks in-memory below ``in_memory_max_bytes``."""
    in_memory_max_bytes: int = 2 * 1024**3
    """Size (estimated from dataset.json) up to which "auto" picks in-memory mode."""
    shuffle_buffer_size: int = 10_000
    """Streaming mode: each learner pools whole Ray Data blocks until it holds at least this many transitions,
    then serves them as minibatches in a random order (every transition once per epoch)."""
    prefetch_batches: int = 2
    """Streaming mode: blocks prefetched by each learner's iterator (at least 1)."""
    stats_max_steps: int | None = 1_000_000
    """Streaming mode: the observation statistics (``normalize_observations``) are fitted on about this many
    steps at most: a fixed sample of the files (at least 16, or all) and of their episodes, so the time to the
    first update does not grow with the dataset. None = every step (one full pass before training)."""
    block_bytes: int = 4 * 1024**2
    """Streaming mode: Ray Data blocks of about this many bytes of transitions (estimated as for "auto"; at
    least one block per file and one row per block), so what each map task, the read-ahead and a learner's
    pool hold does not grow with the size or the number of the files (Pendulum: ~80k steps per block)."""
    map_concurrency: int | None = None
    """Parallel Ray Data tasks transforming episodes; None = CPUs in the cluster minus one (never all)."""
    holdout: HoldoutConfig | None = None
    """Hold these episodes out of training (both modes); ``evaluation.ope`` scores checkpoints on them."""

    def __post_init__(self) -> None:
        _check(self.in_memory_max_bytes > 0, "data.in_memory_max_bytes", "must be positive")
        _check(self.shuffle_buffer_size >= 0, "data.shuffle_buffer_size", "must be >= 0")
        _check(self.prefetch_batches >= 0, "data.prefetch_batches", "must be >= 0")
        _check(self.stats_max_steps is None or self.stats_max_steps >= 1, "data.stats_max_steps", "must be >= 1")
        _check(self.block_bytes >= 1, "data.block_bytes", "must be >= 1")
        _check(self.map_concurrency is None or self.map_concurrency >= 1, "data.map_concurrency", "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class EvaluationConfig:
    """Evaluation in the real environment through ``forward_inference``."""

    env: str | None = None
    """Gymnasium env id; None = the dataset's ``env_id``."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make``."""
    episodes: int = 10
    """Episodes per evaluation (run side by side, one env each, seeds ``seed, seed+1, ...``)."""
    interval: int = 1
    """Evaluate every this many training iterations (0 = only at the end)."""
    seed: int = 10_000
    """Seed of the first evaluation episode (fixed, so evaluations are comparable)."""
    ope: str | None = None
    """Select the job's checkpoint by this OPE estimator on ``data.holdout`` after training (fqe, is, wis,
    pdis, dr; see docs/ope.md); None = no selection."""
    ope_updates: int = 10_000
    """FQE gradient steps per scored checkpoint (fqe and dr; the default is `FQEConfig`'s)."""

    def __post_init__(self) -> None:
        _check(self.episodes >= 1, "evaluation.episodes", f"must be >= 1, got {self.episodes}")
        _check(self.interval >= 0, "evaluation.interval", f"must be >= 0, got {self.interval}")
        _check(self.ope is None or self.ope in OPE_METHODS, "evaluation.ope",
               f"unknown estimator {self.ope!r}; choose among {', '.join(OPE_METHODS)}")
        _check(self.ope_updates >= 1, "evaluation.ope_updates", f"must be >= 1, got {self.ope_updates}")


@dataclass(frozen=True, kw_only=True)
class AlgorithmConfig:
    """Settings shared by every algorithm; an algorithm's config subclasses this."""

    seed: int = 0
    """Seeds module initialisation, minibatch sampling and evaluation."""
    lr: float = 3e-4
    """Learning rate of the default optimizer(s)."""
    train_batch_size: int = 256
    """Transitions per gradient update, per learner."""
    updates_per_iteration: int = 500
    """Gradient updates per ``training_step`` (one Ray call per learner)."""
    grad_clip: float | None = None
    """Clip each optimizer's gradient to this global norm (None = no clipping)."""
    gamma: float = 0.99
    """Discount factor."""
    normalize_observations: bool = False
    """Normalise observations with dataset statistics (same state on the learner and env sides)."""
    num_learners: int = 0
    """0 = learn in this process; m >= 1 = m Ray actors with torch.distributed (DDP semantics)."""
    num_cpus_per_learner: float = 1
    """CPUs each learner reserves and uses (torch threads = ceil of it)."""
    num_gpus_per_learner: float = 0
    """GPUs per learner (NCCL when > 0); the in-memory data then lives on the GPU."""
    learner_placement: str = "spread"
    """Where Ray starts the learner actors: ``spread`` over the cluster's nodes (a placement group with Ray's SPREAD
    strategy: one per node while nodes have room, what scaling out on CPUs is for) or ``default`` (Ray's default policy, which
    fills the driver's node first: e.g. several GPUs of one machine, where NCCL stays inside the node)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Network architecture."""
    data: DataConfig = field(default_factory=DataConfig)
    """Data pipeline settings."""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """Evaluation settings."""

    def __post_init__(self) -> None:
        _check(self.lr > 0, "lr", f"must be positive, got {self.lr}")
        _check(self.train_batch_size >= 1, "train_batch_size", f"must be >= 1, got {self.train_batch_size}")
        _check(self.updates_per_iteration >= 1, "updates_per_iteration", f"must be >= 1, got {self.updates_per_iteration}")
        _check(self.grad_clip is None or self.grad_clip > 0, "grad_clip", f"must be positive or null, got {self.grad_clip}")
        _check(0.0 <= self.gamma <= 1.0, "gamma", f"must be in [0, 1], got {self.gamma}")
        _check(self.num_learners >= 0, "num_learners", f"must be >= 0, got {self.num_learners}")
        _check(self.num_cpus_per_learner > 0, "num_cpus_per_learner", f"must be positive, got {self.num_cpus_per_learner}")
        _check(self.num_gpus_per_learner >= 0, "num_gpus_per_learner", f"must be >= 0, got {self.num_gpus_per_learner}")
        _check(self.learner_placement in ("spread", "default"), "learner_placement",
               f"'spread' or 'default', got {self.learner_placement!r}")
        _check(self.evaluation.ope is None or self.data.holdout is not None, "evaluation.ope",
               "selection by OPE scores checkpoints on held-out episodes; set data.holdout (e.g. "
               "data: {holdout: {fraction: 0.2}}, or --set config.data.holdout.fraction=0.2)")

    # -- what an algorithm customises -------------------------------------------------------------
    def module_config(self) -> dict[str, Any]:
        """``model_config`` passed to the module (algorithms add e.g. ``value_head``)."""
        return self.model.to_module_config()

    def learner_connectors(self, observation_space: "gym.Space", action_space: "gym.Space") -> list["ConnectorV2"]:
        """Episode rows -> train batch, before observation flattening/normalisation (added by
        ``connectors.learner_pipeline``). Default: transitions and next observations."""
        from offlinerl.connectors import transition_connectors

        return transition_connectors()

    # -- loading and saving --------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AlgorithmConfig":
        return from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> "AlgorithmConfig":
        return from_dict(cls, load_file(path))

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def replace(self, **changes: Any) -> "AlgorithmConfig":
        return dataclasses.replace(self, **changes)
