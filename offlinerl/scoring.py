"""Normalised scores: 0 = a uniformly random policy, 100 = the dataset's best behaviour level.

A dataset may carry a ``card.json`` beside its ``dataset.json`` (the shipped
reference datasets do) with the two anchors ``random_return`` and
``best_return``; training jobs report ``normalized_score(R, **anchors(card))``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["CARD_FILE", "CardError", "normalized_score", "load_card", "score_for_dataset"]

CARD_FILE = "card.json"


class CardError(ValueError):
    """``card.json`` exists but does not parse or lacks the anchors."""


def normalized_score(return_: float, random_return: float, best_return: float) -> float:
    """100 · (R − random_return) / (best_return − random_return)."""
    span = best_return - random_return
    if not math.isfinite(span) or span == 0.0:
        raise ValueError(
            f"cannot normalise: best_return ({best_return}) and random_return ({random_return}) "
            "must be finite and different"
        )
    return 100.0 * (return_ - random_return) / span


def load_card(dataset_path: str | Path) -> dict[str, Any] | None:
    """The dataset's ``card.json`` as a dict, or None when the dataset has none.

    Raises :class:`CardError` naming the file when it exists but is not a JSON
    object with numeric ``random_return`` and ``best_return``.
    """
    path = Path(dataset_path) / CARD_FILE
    if not path.is_file():
        return None
    try:
        card = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CardError(f"{path}: does not parse as JSON: {exc}") from exc
    if not isinstance(card, dict):
        raise CardError(f"{path}: expected a JSON object, got {type(card).__name__}")
    for key in ("random_return", "best_return"):
        value = card.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CardError(f"{path}: {key} must be a finite number, got {value!r}")
    return card


def score_for_dataset(return_: float, dataset_path: str | Path) -> float | None:
    """``return_`` normalised with the anchors of the dataset's card; None without a card."""
    card = load_card(dataset_path)
    if card is None:
        return None
    return normalized_score(return_, card["random_return"], card["best_return"])
