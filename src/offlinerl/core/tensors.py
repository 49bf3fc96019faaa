"""Numpy columns to torch tensors on a device: the one helper every batch passes through."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

__all__ = ["to_tensor", "to_tensors"]


def to_tensor(x: Any, device: torch.device | str = "cpu") -> torch.Tensor:
    """A tensor on ``device`` (numpy arrays are made contiguous first and shared when already on the CPU)."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x)
    return t.to(device)


def to_tensors(batch: Mapping[str, Any], device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """``to_tensor`` of every column."""
    return {k: to_tensor(v, device) for k, v in batch.items()}
