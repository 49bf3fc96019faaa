"""LossOut (PLACEHOLDER with the TRAINING_API.md contract; training-core owns this file)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = ["LossOut"]


@dataclass(frozen=True)
class LossOut:
    losses: dict[str, Tensor]
    metrics: dict[str, Tensor]
