"""Deciding how converted columns are stored: spaces (given or inferred from
the data) and the dtype/shape of each extra column, from small per-episode
descriptions gathered while stitching.

A column description (``describe``) is ``{"dtype", "shape", "f32", "min",
"max"}`` for numeric columns (``f32``: every float64 value is exactly a
float32, as when RLlib widened float32 arrays to JSON doubles; ``min``/``max``:
element-wise bounds, NaN ignored) and ``{"dtype": "json"}`` otherwise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from offlinerl.episodes.schema import JSON_DTYPE

__all__ = ["describe", "ColumnStats", "infer_space", "conforms", "extra_spec", "out_of_bounds"]


def describe(value: Any) -> dict[str, Any]:
    """Describe one episode's column (first axis = steps)."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        return {"dtype": JSON_DTYPE}
    desc: dict[str, Any] = {"dtype": value.dtype.name, "shape": list(value.shape[1:])}
    if value.dtype.kind == "f":
        desc["f32"] = value.dtype == np.float32 or bool(
            np.array_equal(value.astype(np.float32).astype(value.dtype), value, equal_nan=True)
        )
    if value.dtype.kind in "iuf" and len(value):
        lo, hi = (np.fmin.reduce(value, axis=0), np.fmax.reduce(value, axis=0)) if value.dtype.kind == "f" else (
            value.min(axis=0), value.max(axis=0))
        desc["min"], desc["max"] = lo.tolist(), hi.tolist()
    return desc


def out_of_bounds(desc: dict[str, Any], space: gym.Space) -> bool:
    """Whether an episode's values (by their recorded min/max) leave a Box space's bounds."""
    if not isinstance(space, gym.spaces.Box) or "min" not in desc:
        return False
    lo, hi = np.asarray(desc["min"], dtype=np.float64), np.asarray(desc["max"], dtype=np.float64)
    return bool(np.any(lo < space.low) or np.any(hi > space.high))


@dataclass
class ColumnStats:
    """What all episodes' descriptions of one column have in common."""

    episodes: int = 0
    kinds: set[str] = field(default_factory=set)
    shapes: Counter = field(default_factory=Counter)
    f32: bool = True
    min: Any = None
    max: Any = None

    def add(self, desc: dict[str, Any]) -> None:
        self.episodes += 1
        dtype = desc["dtype"]
        self.kinds.add(dtype)
        if dtype == JSON_DTYPE:
            return
        self.shapes[tuple(desc["shape"])] += 1
        self.f32 = self.f32 and desc.get("f32", True)
        if "min" in desc:
            lo, hi = np.asarray(desc["min"]), np.asarray(desc["max"])
            if self.min is None:
                self.min, self.max = lo, hi
            elif self.min.shape == lo.shape:  # other shapes are refused later by `conforms`
                self.min, self.max = np.minimum(self.min, lo), np.maximum(self.max, hi)

    @property
    def numeric(self) -> bool:
        return JSON_DTYPE not in self.kinds and bool(self.kinds)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shapes.most_common(1)[0][0] if self.shapes else ()

    @property
    def dtype(self) -> np.dtype:
        """One dtype every episode's values fit in exactly."""
        kinds = {np.dtype(k).kind for k in self.kinds}
        if "f" in kinds:
            return np.dtype(np.float32 if self.f32 and "i" not in kinds and "u" not in kinds else np.float64)
        if kinds <= {"b"}:
            return np.dtype(bool)
        return np.result_type(*(np.dtype(k) for k in self.kinds if np.dtype(k).kind in "iu"))


def infer_space(stats: ColumnStats, what: str) -> gym.Space:
    """A space for a column seen only in the data: Discrete (scalars) / MultiDiscrete (vectors) for
    non-negative integers (n = max + 1); booleans → MultiBinary; other integers (images: uint8 or
    more than one dimension) → a Box with the dtype's limits; floats → a Box with the observed
    dtype/shape and unbounded limits."""
    if not stats.numeric:
        raise ValueError(f"cannot infer the {what} space: the {what} are not numeric arrays")
    dtype, shape = stats.dtype, stats.shape
    if dtype.kind in "iu" and stats.min is not None and np.all(stats.min >= 0):
        if shape == ():
            return gym.spaces.Discrete(int(stats.max) + 1)
        if len(shape) == 1 and dtype != np.uint8:  # uint8 / multi-dimensional: images, a Box below
            return gym.spaces.MultiDiscrete(np.asarray(stats.max, dtype=np.int64) + 1)
    if dtype.kind == "b":
        return gym.spaces.MultiBinary(list(shape)) if shape else gym.spaces.Discrete(2)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return gym.spaces.Box(low=info.min, high=info.max, shape=shape, dtype=dtype)
    return gym.spaces.Box(low=-np.inf, high=np.inf, shape=shape, dtype=dtype)


def conforms(desc: dict[str, Any], space: gym.Space) -> str | None:
    """``None`` if an episode's column fits ``space``, else why not."""
    if desc["dtype"] == JSON_DTYPE:
        return "values are not a numeric array"
    shape = tuple(desc["shape"])
    kind = np.dtype(desc["dtype"]).kind
    if isinstance(space, gym.spaces.Discrete):
        if shape not in ((), (1,)):
            return f"shape {shape} for a Discrete space"
        if kind not in "iub":
            return f"dtype {desc['dtype']} for a Discrete space"
        if "min" in desc and (np.min(desc["min"]) < space.start or np.max(desc["max"]) >= space.start + space.n):
            return f"values {desc['min']}..{desc['max']} outside Discrete({space.n}, start={space.start})"
        return None
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        if shape != tuple(space.shape):
            return f"shape {shape}, the space has {tuple(space.shape)}"
        if not isinstance(space, gym.spaces.Box) and kind not in "iub":
            return f"dtype {desc['dtype']} for a {type(space).__name__} space"
        return None
    return f"{type(space).__name__} spaces are not supported for legacy recordings"


def extra_spec(stats: ColumnStats, total_episodes: int) -> dict[str, Any]:
    """Numeric spec when every episode has the column with one shape, else JSON per step."""
    if stats.numeric and stats.episodes == total_episodes and len(stats.shapes) == 1:
        return {"dtype": stats.dtype.name, "shape": list(stats.shape)}
    return {"dtype": JSON_DTYPE, "shape": []}
