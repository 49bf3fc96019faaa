"""Normalised scores: 0 = a uniformly random policy, 100 = the dataset's best behaviour level.

A dataset may carry a ``card.json`` beside its ``dataset.json`` (the shipped
reference datasets do) with the two anchors ``random_return`` and
``best_return``; training jobs report ``normalized_score(R, **anchors(card))``.

Aggregates across tasks and seeds follow Agarwal et al. (2021, "Deep RL at the edge of the statistical
precipice"): the interquartile mean (:func:`iqm`, the mean of the middle 50% of all runs) and a
stratified bootstrap confidence interval (:func:`bootstrap_ci`: runs are resampled within each task).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["CARD_FILE", "CardError", "normalized_score", "load_card", "score_for_dataset", "iqm", "bootstrap_ci"]

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


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle half of ``values`` once sorted, the lowest and highest quarter
    dropped (a run cut by a quartile counts with the fraction of it inside, so any number of runs works)."""
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = len(x)
    if n == 0:
        raise ValueError("iqm of no values")
    lo, hi = 0.25 * n, 0.75 * n
    weights = np.clip(np.minimum(np.arange(1, n + 1), hi) - np.maximum(np.arange(n), lo), 0.0, 1.0)
    return float(np.dot(weights, x) / weights.sum())


def bootstrap_ci(runs_by_task: Mapping[str, Sequence[float]], statistic: Callable[[Sequence[float]], float] = iqm,
                 *, reps: int = 2000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """``(point, low, high)``: ``statistic`` of all runs, and its stratified bootstrap percentile interval (each
    replicate resamples, with replacement, the same number of runs within every task)."""
    tasks = [np.asarray(v, dtype=np.float64) for v in runs_by_task.values() if len(v)]
    if not tasks:
        raise ValueError("bootstrap_ci of no runs")
    point = statistic(np.concatenate(tasks))
    rng = np.random.default_rng(seed)
    stats = np.empty(reps)
    for r in range(reps):
        stats[r] = statistic(np.concatenate([t[rng.integers(0, len(t), len(t))] for t in tasks]))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return point, float(low), float(high)
