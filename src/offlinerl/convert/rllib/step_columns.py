"""The columns of RLlib's new-stack per-step layout (``output_write_episodes=False``):
which are core, which are dropped, and how the extra ones are described.

A recording's own metadata (Ray's tensor extension shape) and first values
decide an extra column's dtype and per-step shape; a declared shape over the
per-value cap (:mod:`offlinerl.convert.limits`), or one that disagrees with the
first value's length, is not kept, since every step of it would be allocated.
"""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
import pyarrow as pa

from offlinerl.convert.limits import DecodeLimits, array_nbytes
from offlinerl.convert.packing import LZ4_MAGIC_B64, unpack_any

__all__ = ["CORE_COLUMNS", "DROPPED_COLUMNS", "plain", "is_list", "extra_specs"]

#: Columns every per-step recording has (``agent_id``/``module_id`` may be null-typed).
CORE_COLUMNS = ("eps_id", "agent_id", "module_id", "obs", "new_obs", "actions", "rewards", "terminateds", "truncateds")
#: Bookkeeping columns that are dropped (derivable from the row order).
DROPPED_COLUMNS = ("t",)


def plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Strip extension types (Ray's tensor type) down to their storage."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    while isinstance(arr.type, pa.ExtensionType):
        arr = arr.storage
    return arr


def is_list(t: pa.DataType) -> bool:
    """Whether ``t`` is a (large, fixed-size) list type."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _shape_from_field(field: pa.Field) -> tuple[int, ...] | None:
    meta = field.metadata or {}
    if b"ARROW:extension:metadata" in meta:
        try:
            shape = json.loads(meta[b"ARROW:extension:metadata"])
            return tuple(int(s) for s in (shape if isinstance(shape, list) else shape["shape"]))
        except (ValueError, TypeError, KeyError):
            return None
    shape = getattr(field.type, "shape", None)
    return tuple(shape) if shape is not None else None


def extra_specs(schema: pa.Schema, first: pa.Table,
                limits: DecodeLimits | None = None) -> tuple[dict[str, dict], list[str]]:
    """Describe the extra per-step columns from a file's schema and its first rows; notes on anything not kept.

    A column whose declared per-step shape is over ``limits.max_value_bytes`` or disagrees with its
    first value, or whose first packed value cannot be decoded within the limits, is not kept (and a
    note says why).
    """
    limits = limits or DecodeLimits()
    specs, notes = {}, []
    for field in schema:
        name = field.name
        if name in CORE_COLUMNS or name in DROPPED_COLUMNS:
            continue
        col = plain(first.column(name)) if name in first.column_names else None
        t = col.type if col is not None else field.type
        if is_list(t) and (pa.types.is_floating(t.value_type) or pa.types.is_integer(t.value_type)):
            value0 = col[0].as_py() if col is not None and len(col) else None
            shape = _shape_from_field(field)
            if shape is None and col is not None and len(col):
                shape = (len(value0 or []),)
            dtype = t.value_type.to_pandas_dtype().__name__
            problem = _oversized(shape or (), dtype, limits)
            if problem is None and shape and value0 is not None and math.prod(shape) != len(value0):
                # a step that cannot be read gets a placeholder of the declared shape: it must be the data's
                problem = (f"its metadata declares a per-step shape {tuple(shape)}, "
                           f"its first value has {len(value0)} entries")
            if problem:
                notes.append(f"column {name!r} is not kept: {problem}")
                continue
            specs[name] = {"dtype": dtype, "shape": list(shape or ())}
        elif pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_boolean(t):
            specs[name] = {"dtype": np.dtype(t.to_pandas_dtype()).name, "shape": []}
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            first_value = col[0].as_py() if col is not None and len(col) else None
            if isinstance(first_value, str) and first_value.startswith(LZ4_MAGIC_B64):
                try:
                    arr = np.asarray(unpack_any(first_value, limits.budget(len(first_value))))
                except ValueError as exc:  # PackedDecodeError, ValueTooLargeError
                    notes.append(f"column {name!r} is not kept: its first packed value cannot be read: {exc}")
                    continue
                specs[name] = {"dtype": arr.dtype.name, "shape": list(arr.shape), "packed": True}
            else:
                specs[name] = {"dtype": "string", "shape": []}
        else:
            notes.append(f"column {name!r} of type {t} is not kept (no per-step numeric or text form)")
    return specs, notes


def _oversized(shape: Sequence[int], dtype: str, limits: DecodeLimits) -> str | None:
    """Why a declared per-step shape is refused (negative, or over the cap), or None."""
    try:
        nbytes = array_nbytes(tuple(shape), dtype)
    except ValueError as exc:
        return str(exc)
    if nbytes > limits.max_value_bytes:
        return str(limits.value_error(f"one step of shape {tuple(shape)} and dtype {dtype}", nbytes))
    return None
