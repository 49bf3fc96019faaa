"""``DataConfig``: how ``OfflineData`` reads a dataset and feeds the learners (an algorithm config's ``data``
field), and ``HoldoutConfig``, the episodes kept out of training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from offlinerl.config_io import check
from offlinerl.connectors.pipelines import LearnerConnectorsConfig

__all__ = ["DataConfig", "HoldoutConfig", "OfflineDataConfig"]


@dataclass(frozen=True, kw_only=True)
class HoldoutConfig:
    """Episodes kept out of training for model selection by OPE (``offlinerl.data.holdout``)."""

    fraction: float = 0.2
    """Share of the episodes held out (at least one episode, and at least one left to train on)."""
    seed: int = 0
    """Seed of the permutation of the sorted episode ids that picks them (same seed, same split)."""

    def __post_init__(self) -> None:
        check(0 < self.fraction < 1, "data.holdout.fraction", f"must be in (0, 1), got {self.fraction}")


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
    """Streaming mode: blocks prefetched by each learner's iterator, and as many more read ahead by its reader thread
    (at least 1 each)."""
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
        check(self.in_memory_max_bytes > 0, "data.in_memory_max_bytes", "must be positive")
        check(self.shuffle_buffer_size >= 0, "data.shuffle_buffer_size", "must be >= 0")
        check(self.prefetch_batches >= 0, "data.prefetch_batches", "must be >= 0")
        check(self.stats_max_steps is None or self.stats_max_steps >= 1, "data.stats_max_steps", "must be >= 1")
        check(self.block_bytes >= 1, "data.block_bytes", "must be >= 1")
        check(self.map_concurrency is None or self.map_concurrency >= 1, "data.map_concurrency", "must be >= 1")


class OfflineDataConfig(LearnerConnectorsConfig, Protocol):
    """What ``OfflineData`` reads from a config (an ``AlgorithmConfig`` has it): its ``learner_connectors``, and:"""

    @property
    def normalize_observations(self) -> bool:
        """Fit observation statistics on the dataset and normalise with them (learner and acting sides)."""

    @property
    def data(self) -> DataConfig:
        """How the dataset is read and fed to the learners."""

    @property
    def policy_mapping(self) -> str | dict[str, str] | None:
        """The agent -> module mapping of the rows (``offlinerl.core.policy_mapping``; None: a row's module_id,
        else its agent_id)."""
