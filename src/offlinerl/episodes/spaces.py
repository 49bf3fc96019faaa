"""Gymnasium spaces to JSON and back (the form stored in ``dataset.json``).

The JSON form follows Minari's (``{"type": "Box", "dtype": ..., "shape": ...,
"low": ..., "high": ...}``) so that datasets move between the two without a
translation table. Non-finite bounds are written as the strings ``"inf"``,
``"-inf"`` and ``"nan"`` so the file stays strict JSON; the bare tokens
``Infinity``/``NaN`` that Python's ``json`` module emits are accepted on read.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["space_to_json", "space_from_json", "SpaceError", "flat_size", "leaf_spaces"]


#: Largest Box read from JSON (its bounds are materialised): 16M elements, e.g. 4 frames of 1024x1024x3.
MAX_BOX_ELEMENTS = 2**24


class SpaceError(ValueError):
    """A space that offlinerl cannot store, or a JSON form that does not parse."""


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _nums(values: np.ndarray) -> list:
    flat = [_num(v) for v in values.reshape(-1).tolist()]
    return np.array(flat, dtype=object).reshape(values.shape).tolist() if values.ndim else flat[0]


def _array(value: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.array(value, dtype=object)
    conv = np.vectorize(lambda v: float(v) if isinstance(v, str) else v, otypes=[object])
    arr = conv(arr) if arr.size else arr
    return np.broadcast_to(np.asarray(arr.tolist(), dtype=dtype), shape).copy()


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """Serialise a Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple space."""
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "dtype": str(space.dtype),
            "shape": list(space.shape),
            "low": _nums(space.low),
            "high": _nums(space.high),
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "dtype": str(space.dtype), "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "dtype": str(space.dtype),
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
        }
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "dtype": str(space.dtype), "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "subspaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "subspaces": [space_to_json(s) for s in space.spaces]}
    raise SpaceError(f"unsupported space type {type(space).__name__}: {space}")


def space_from_json(data: dict[str, Any]) -> gym.Space:
    """Inverse of :func:`space_to_json`; raises :class:`SpaceError` naming the problem."""
    if not isinstance(data, dict) or "type" not in data:
        raise SpaceError(f"a space must be a JSON object with a 'type' key, got {data!r:.200}")
    kind = data["type"]
    try:
        if kind == "Box":
            shape = tuple(int(s) for s in data["shape"])
            if any(s < 0 for s in shape) or math.prod(shape) > MAX_BOX_ELEMENTS:
                raise SpaceError(f"Box shape {list(shape)}: negative, or more than {MAX_BOX_ELEMENTS} elements")
            dtype = np.dtype(data.get("dtype", "float32"))
            low = _array(data["low"], dtype.name, shape)
            high = _array(data["high"], dtype.name, shape)
            return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            dtype = np.dtype(data.get("dtype", "int64"))
            return gym.spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)), dtype=dtype)
        if kind == "MultiDiscrete":
            nvec = np.asarray(data["nvec"], dtype=np.int64)
            start = np.asarray(data.get("start", np.zeros_like(nvec)), dtype=np.int64)
            return gym.spaces.MultiDiscrete(nvec, dtype=np.dtype(data.get("dtype", "int64")), start=start)
        if kind == "MultiBinary":
            n = data["n"]
            return gym.spaces.MultiBinary(n if isinstance(n, int) else list(n))
        if kind == "Dict":
            return gym.spaces.Dict({k: space_from_json(v) for k, v in data["subspaces"].items()})
        if kind == "Tuple":
            return gym.spaces.Tuple([space_from_json(v) for v in data["subspaces"]])
    except SpaceError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise SpaceError(f"invalid {kind} space {data!r:.200}: {exc}") from exc
    raise SpaceError(f"unknown space type {kind!r}")


def leaf_spaces(space: gym.Space, prefix: str = "") -> list[tuple[str, gym.Space]]:
    """Flatten nested Dict/Tuple spaces into ``[(path, leaf_space)]`` with dotted paths."""
    if isinstance(space, gym.spaces.Dict):
        return [p for k, s in space.spaces.items() for p in leaf_spaces(s, f"{prefix}{k}.")]
    if isinstance(space, gym.spaces.Tuple):
        return [p for i, s in enumerate(space.spaces) for p in leaf_spaces(s, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), space)]


def flat_size(space: gym.Space) -> int:
    """Number of scalars one value of a leaf space stores (Discrete: 1)."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return int(np.prod(space.shape, dtype=np.int64))
    raise SpaceError(f"flat_size needs a leaf space, got {type(space).__name__}")
