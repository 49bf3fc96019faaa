"""How values of a gymnasium space are laid out in Arrow, and the vectorised
conversions between numpy batches and Arrow arrays.

A *space batch* is the numpy form of N values of a space: an array of shape
``(N, *shape)`` for Box/MultiDiscrete/MultiBinary, ``(N,)`` for Discrete, a
``dict`` of space batches for Dict and a ``tuple`` of them for Tuple.

Arrow layout of one value (``docs/episode-format.md`` has the table):

- Box: ``fixed_size_list<dtype>[prod(shape)]`` (row-major flattening)
- Discrete: ``int64``
- MultiDiscrete: ``fixed_size_list<dtype>[prod(shape)]``
- MultiBinary: ``fixed_size_list<int8>[prod(shape)]``
- Dict: ``struct`` with one field per key, in the space's key order
- Tuple: ``struct`` with fields ``"0"``, ``"1"``, …
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offlinerl.episodes.spaces import SpaceError, flat_size

__all__ = [
    "value_type",
    "to_arrow",
    "from_arrow",
    "list_array",
    "split_list_array",
    "batch_len",
    "batch_slice",
    "batch_concat",
    "batch_map",
    "batch_equal",
]


def _leaf_dtype(space: gym.Space) -> np.dtype:
    if isinstance(space, gym.spaces.Discrete):
        return np.dtype(np.int64)
    if isinstance(space, gym.spaces.MultiBinary):
        return np.dtype(np.int8)
    return np.dtype(space.dtype)


def value_type(space: gym.Space) -> pa.DataType:
    """Arrow type of a single value of ``space``."""
    if isinstance(space, gym.spaces.Dict):
        return pa.struct([pa.field(k, value_type(s)) for k, s in space.spaces.items()])
    if isinstance(space, gym.spaces.Tuple):
        return pa.struct([pa.field(str(i), value_type(s)) for i, s in enumerate(space.spaces)])
    if isinstance(space, gym.spaces.Discrete):
        return pa.int64()
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return pa.list_(pa.from_numpy_dtype(_leaf_dtype(space)), flat_size(space))
    raise SpaceError(f"unsupported space type {type(space).__name__}")


def to_arrow(batch: Any, space: gym.Space) -> pa.Array:
    """Encode a space batch of N values as an Arrow array of length N."""
    if isinstance(space, gym.spaces.Dict):
        children = [to_arrow(batch[k], s) for k, s in space.spaces.items()]
        return pa.StructArray.from_arrays(children, names=list(space.spaces))
    if isinstance(space, gym.spaces.Tuple):
        children = [to_arrow(batch[i], s) for i, s in enumerate(space.spaces)]
        return pa.StructArray.from_arrays(children, names=[str(i) for i in range(len(children))])
    arr = np.ascontiguousarray(np.asarray(batch), dtype=_leaf_dtype(space))
    if isinstance(space, gym.spaces.Discrete):
        return pa.array(arr.reshape(-1), type=pa.int64())
    size = flat_size(space)
    values = pa.array(arr.reshape(-1), type=pa.from_numpy_dtype(arr.dtype))
    return pa.FixedSizeListArray.from_arrays(values, size)


def from_arrow(array: pa.Array | pa.ChunkedArray, space: gym.Space) -> Any:
    """Decode an Arrow array of N values into a space batch (copies into numpy)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(space, gym.spaces.Dict):
        return {k: from_arrow(array.field(k), s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(from_arrow(array.field(str(i)), s) for i, s in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Discrete):
        return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    values = array.flatten().to_numpy(zero_copy_only=False).astype(_leaf_dtype(space), copy=False)
    width = array.type.list_size if pa.types.is_fixed_size_list(array.type) else None
    if width is not None and len(space.shape) == 1 and width > space.shape[0]:
        # an agent's narrower Box in a dataset's storage columns (episodes.agent_spaces): its first values
        return np.ascontiguousarray(values.reshape(len(array), width)[:, :space.shape[0]])
    return values.reshape((len(array), *space.shape))


def list_array(lengths: Sequence[int] | np.ndarray, values: pa.Array) -> pa.ListArray:
    """Group ``values`` into consecutive lists of the given lengths."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.asarray(lengths, dtype=np.int64))
    if offsets[-1] >= 2**31:
        return pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), values)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), type=pa.int32()), values)


def split_list_array(array: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """Split a list array into (flattened values, per-row lengths)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    offsets = array.offsets.to_numpy()
    values = array.values.slice(offsets[0], offsets[-1] - offsets[0])
    return values, np.diff(offsets)


def batch_map(fn: Callable[[np.ndarray], Any], batch: Any) -> Any:
    """Apply ``fn`` to every leaf array of a space batch, keeping the nesting."""
    if isinstance(batch, dict):
        return {k: batch_map(fn, v) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(batch_map(fn, v) for v in batch)
    return fn(batch)


def batch_len(batch: Any) -> int:
    """Number of values in a space batch."""
    if isinstance(batch, dict):
        return batch_len(next(iter(batch.values())))
    if isinstance(batch, tuple):
        return batch_len(batch[0])
    return len(batch)


def batch_slice(batch: Any, start: int, stop: int) -> Any:
    return batch_map(lambda a: a[start:stop], batch)


def batch_concat(batches: Sequence[Any]) -> Any:
    """Concatenate space batches along the first axis."""
    first = batches[0]
    if isinstance(first, dict):
        return {k: batch_concat([b[k] for b in batches]) for k in first}
    if isinstance(first, tuple):
        return tuple(batch_concat([b[i] for b in batches]) for i in range(len(first)))
    return np.concatenate([np.asarray(b) for b in batches], axis=0)


def batch_equal(a: Any, b: Any) -> bool:
    """Exact equality of two space batches: same nesting, dtypes, shapes and values (NaN == NaN)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and all(
            batch_equal(a[k], b[k]) for k in a
        )
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            batch_equal(x, y) for x, y in zip(a, b)
        )
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(
        np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    )
