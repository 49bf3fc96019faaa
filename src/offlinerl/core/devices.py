"""Device names: ``cpu``, ``cuda`` (the current GPU) or ``cuda:N`` (GPU N), as ``--device`` and
``config.device`` take them, and the CUDA devices torch sees here."""

from __future__ import annotations

import re

__all__ = ["DEVICE_PATTERN", "cuda_count", "is_cuda"]

DEVICE_PATTERN = re.compile(r"cpu|cuda(:[0-9]+)?")
"""What a device name may be (``fullmatch``)."""


def is_cuda(device: str | None) -> bool:
    """``cuda`` or ``cuda:N``."""
    return bool(device) and device.startswith("cuda")


def cuda_count() -> int:
    """The CUDA devices torch sees (0 on a CPU build or a machine without a GPU)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
