"""Connectors shared by the learner side and the env side: the same class and the
same state preprocess dataset observations and live env observations."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from offlinerl.connectors.connector import Batch, ConnectorStateError, ConnectorV2
from offlinerl.core import columns as C
from offlinerl.core.flatten import flatten_batch

__all__ = ["FlattenObservations", "NormalizeObservations", "RunningMeanStd"]


class FlattenObservations(ConnectorV2):
    """Flatten ``OBS`` (and ``NEXT_OBS`` if present) to ``[N, D]`` float32 (Discrete -> one-hot)."""

    def __init__(self, observation_space: gym.Space, keys: Sequence[str] = (C.OBS, C.NEXT_OBS)) -> None:
        self.observation_space = observation_space
        self.keys = tuple(keys)

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        for key in self.keys:
            if key in batch:
                batch[key] = flatten_batch(batch[key], self.observation_space)
        return batch


class RunningMeanStd:
    """Count, mean and variance of a stream of ``[N, D]`` rows, merged exactly (Chan et al.) in float64."""

    def __init__(self, dim: int | None = None) -> None:
        self.count = 0
        self.mean = None if dim is None else np.zeros(dim)
        self.var = None if dim is None else np.ones(dim)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        if len(x) > 0:
            self.merge(len(x), x.mean(0), x.var(0))

    def merge(self, n: int, mean: np.ndarray, var: np.ndarray) -> None:
        """Add the moments of ``n`` more rows."""
        mean, var = np.asarray(mean, dtype=np.float64).reshape(-1), np.asarray(var, dtype=np.float64).reshape(-1)
        if self.count == 0 or self.mean is None:
            self.count, self.mean, self.var = n, mean, var
            return
        total = self.count + n
        delta = mean - self.mean
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.var = m2 / total
        self.count = total

    def get_state(self) -> dict[str, Any]:
        if self.mean is None:
            return {"count": 0}
        return {"count": int(self.count), "mean": self.mean.tolist(), "var": self.var.tolist()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.count = int(state.get("count", 0))
        self.mean = np.asarray(state["mean"], dtype=np.float64) if "mean" in state else None
        self.var = np.asarray(state["var"], dtype=np.float64) if "var" in state else None


class NormalizeObservations(ConnectorV2):
    """``x <- clip((x - mean) / sqrt(var + eps), -clip, clip)`` on ``OBS`` and ``NEXT_OBS``.

    Statistics are fitted on the dataset once (``fit``) before training and then
    frozen; env-to-module pipelines get the same state via ``set_state``, and
    checkpoints carry it. With ``update=True`` every call also updates them
    (online use). ``dim`` (the flattened width, if known) lets ``set_state``
    refuse statistics of another size.
    """

    def __init__(self, clip: float = 10.0, eps: float = 1e-8, update: bool = False,
                 keys: Sequence[str] = (C.OBS, C.NEXT_OBS), dim: int | None = None) -> None:
        self.stats = RunningMeanStd()
        self.clip, self.eps, self.update = clip, eps, update
        self.keys = tuple(keys)
        self.dim = dim
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def fitted(self) -> bool:
        return self.stats.mean is not None and self.stats.var is not None

    def fit(self, x: np.ndarray) -> None:
        """Add ``[N, D]`` flattened observations to the statistics."""
        self.stats.update(x)
        self._cache = None

    def fit_moments(self, n: int, mean: np.ndarray, var: np.ndarray) -> None:
        """Add precomputed moments of ``n`` rows (e.g. one Ray Data block)."""
        self.stats.merge(n, mean, var)
        self._cache = None

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, 1 / sqrt(var + eps))`` as float32 ``[D]`` arrays: exactly what ``__call__`` applies
        (an exported policy bakes these in)."""
        return self._coeffs()

    def _coeffs(self) -> tuple[np.ndarray, np.ndarray]:
        if self._cache is None:
            if self.stats.mean is None:
                raise RuntimeError("NormalizeObservations has no statistics: fit it on data or set_state first")
            self._cache = (self.stats.mean.astype(np.float32), (1.0 / np.sqrt(self.stats.var + self.eps)).astype(np.float32))
        return self._cache

    def __call__(self, batch: Batch, episodes: Any = None, state: dict | None = None) -> Batch:
        if self.update and C.OBS in batch:
            self.fit(batch[C.OBS])
        mean, inv_std = self._coeffs()
        for key in self.keys:
            if key in batch:
                x = np.asarray(batch[key], dtype=np.float32)
                batch[key] = np.clip((x - mean) * inv_std, -self.clip, self.clip)
        return batch

    def get_state(self) -> dict[str, Any]:
        return self.stats.get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        """``{"count": n, "mean": [...], "var": [...]}`` (``{"count": 0}``: not fitted yet); mean and var
        must come together, as ``dim`` finite numbers each, or ``ConnectorStateError`` names the bad one."""
        if not isinstance(state, Mapping):
            raise ConnectorStateError(f"{self.name} must be an object with count, mean and var")
        if "mean" in state or "var" in state:
            for key in ("mean", "var"):
                self._check(key, state.get(key))
        self.stats.set_state(state)
        self._cache = None

    def _check(self, key: str, values: Any) -> None:
        if isinstance(values, np.ndarray):
            values = values.tolist()
        ok = isinstance(values, (list, tuple)) and (self.dim is None or len(values) == self.dim) and all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in values)
        if not ok:
            size = self.dim if self.dim is not None else "a list of"
            raise ConnectorStateError(f"{self.name}.{key} must be {size} finite numbers")
