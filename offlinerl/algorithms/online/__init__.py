"""Online experience for an ``Algorithm`` (``experience``: runners, the split over learners, what checkpoints keep),
``offlinerl finetune`` (``finetune``: start or resume the job; ``recording``: ``--record``), and acting with a
checkpoint's policy (``checkpoint_policy``)."""

from offlinerl.algorithms.online.config import FinetunePipeline, OnlineConfig, load_finetune_pipeline, load_finetune_run

__all__ = ["FinetunePipeline", "OnlineConfig", "load_finetune_pipeline", "load_finetune_run"]
