"""Acting with the policy of a training checkpoint (inference-only module + env-to-module state)."""

from __future__ import annotations

from typing import Any

from offlinerl.env.env_runner import ConnectorsFactory, PolicyFactory

__all__ = ["checkpoint_policy"]


def checkpoint_policy(path: str) -> tuple[PolicyFactory, ConnectorsFactory | None, dict[str, Any]]:
    """Factories that rebuild a checkpoint's inference-only module and connectors inside each runner."""
    raise NotImplementedError(
        f"acting with checkpoint {path!r} needs the training core's checkpoints (issue 4), "
        "which this build does not have yet; use --policy random"
    )
