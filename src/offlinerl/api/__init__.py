"""The Python API: ``CQLConfig(...).build(dataset)`` -> :class:`Trainer` (``fit``, ``evaluate``, ``predict``,
``save``), and :func:`load_policy` (a checkpoint's policy, no dataset, no Ray). ``offlinerl`` re-exports these
and the algorithm configs lazily (``from offlinerl import CQLConfig, load_policy``)."""

from offlinerl.api.trainer import Trainer, logging_config
from offlinerl.evaluation.policy import Policy, load_policy
from offlinerl.jobs.tracking import LoggingConfig, MlflowConfig, WandbConfig

__all__ = ["Trainer", "Policy", "load_policy", "logging_config", "LoggingConfig", "WandbConfig", "MlflowConfig"]
