"""``LossOut``: what every loss function returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

__all__ = ["LossOut"]


@dataclass(frozen=True)
class LossOut:
    """Named loss terms and metrics of one loss evaluation.

    Each key of ``losses`` names the optimizer that term steps ("actor", "critic",
    "value", "alpha", ...): the Learner gives each optimizer the gradient of its own
    term only. ``metrics`` are detached scalar tensors, reduced once per iteration.
    """

    losses: dict[str, torch.Tensor]
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.losses:
            raise ValueError("LossOut needs at least one loss term")
        for name, value in self.losses.items():
            if not isinstance(value, torch.Tensor) or value.dim() != 0:
                raise ValueError(f"loss term {name!r} must be a scalar tensor, got {getattr(value, 'shape', value)!r}")
