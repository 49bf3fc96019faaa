"""Online fine-tuning of offline checkpoints, and acting with a checkpoint's policy."""

from offlinerl.algorithms.online.config import FinetunePipeline, OnlineConfig, load_finetune_pipeline

__all__ = ["FinetunePipeline", "OnlineConfig", "load_finetune_pipeline"]
