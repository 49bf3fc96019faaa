"""A small, pickle-free binary form for a dict of per-step columns.

Fragments and stitched episodes travel between Ray Data stages (and through the
shuffle of a group-by) as one ``bytes`` value each. Numeric columns are stored
as raw buffers with their dtype and shape; any other column (lists of dicts,
ragged lists) as JSON text. Decoding never runs code.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

__all__ = ["encode_columns", "decode_columns"]

_HEADER_LEN = struct.Struct("<I")


def encode_columns(columns: dict[str, Any]) -> bytes:
    """Encode ``{name: ndarray | list}``; arrays must have a numeric or bool dtype."""
    header: list[list[Any]] = []
    buffers: list[bytes] = []
    for name, value in columns.items():
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            data = np.ascontiguousarray(value).tobytes()
            header.append([name, value.dtype.str, list(value.shape), len(data)])
        else:
            data = json.dumps(list(value)).encode()
            header.append([name, "json", None, len(data)])
        buffers.append(data)
    head = json.dumps(header).encode()
    return _HEADER_LEN.pack(len(head)) + head + b"".join(buffers)


def decode_columns(blob: bytes) -> dict[str, Any]:
    """Inverse of :func:`encode_columns` (arrays are read-only views of ``blob``)."""
    (head_len,) = _HEADER_LEN.unpack_from(blob, 0)
    pos = _HEADER_LEN.size + head_len
    header = json.loads(blob[_HEADER_LEN.size:pos])
    out: dict[str, Any] = {}
    for name, dtype, shape, size in header:
        data = blob[pos:pos + size]
        pos += size
        if dtype == "json":
            out[name] = json.loads(data)
        else:
            out[name] = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
    return out
