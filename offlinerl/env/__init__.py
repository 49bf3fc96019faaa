"""Acting in real environments: evaluation (and, later, EnvRunners for online training)."""

from offlinerl.env.evaluation import evaluate_module

__all__ = ["evaluate_module"]
