"""Decoding RLlib's packed columns without running untrusted code.

RLlib's ``pack()`` stores a numpy array as ``base64(lz4.frame(pickle(array)))``
(ASCII text; some versions wrote the bytes' repr, ``b'…'``). Unpickling runs
arbitrary code, so :func:`safe_loads` uses an unpickler that rebuilds only
numpy arrays, dtypes and scalars and refuses every other global.
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
from typing import Any

import numpy as np

__all__ = ["PackedDecodeError", "RefusedPickleError", "safe_loads", "is_packed", "unpack", "LZ4_MAGIC_B64"]

#: base64 of the LZ4 frame magic number ``04 22 4D 18``: how every packed value starts.
LZ4_MAGIC_B64 = "BCJNGG"

# The only globals a pickled numpy array needs (numpy 2 and numpy 1.x module paths).
_ALLOWED_GLOBALS = {
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
}


class PackedDecodeError(ValueError):
    """A packed value is not valid base64 / LZ4 / pickle of a numpy array."""


class RefusedPickleError(PackedDecodeError):
    """A pickle asked for a global outside the numpy allow-list; nothing was executed."""


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise RefusedPickleError(f"refused to unpickle global {module}.{name} (only numpy arrays are allowed)")
        if module.startswith("numpy.core."):
            module = "numpy._core." + module[len("numpy.core."):] if hasattr(np, "_core") else module
        return super().find_class(module, name)


def safe_loads(data: bytes) -> Any:
    """Unpickle ``data`` allowing only numpy arrays, dtypes and scalars."""
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(data)).load()
    except RefusedPickleError:
        raise
    except Exception as exc:  # a malformed pickle raises many kinds of errors
        raise PackedDecodeError(f"not a valid pickle: {type(exc).__name__}: {exc}") from exc


def is_packed(value: Any) -> bool:
    """Whether a JSON value looks like a packed column (a string, not a list)."""
    return isinstance(value, (str, bytes))


def unpack(value: str | bytes) -> np.ndarray:
    """Decode one packed value into the numpy array it holds."""
    import lz4.frame

    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("b'", 'b"')) and text.endswith(("'", '"')):
            text = text[2:-1]
        raw_b64 = text.encode("ascii", errors="strict")
    else:
        raw_b64 = value
    try:
        compressed = base64.b64decode(raw_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PackedDecodeError(f"bad base64: {exc}") from exc
    try:
        payload = lz4.frame.decompress(compressed)
    except RuntimeError as exc:
        raise PackedDecodeError(f"bad LZ4 frame: {exc}") from exc
    array = safe_loads(payload)
    if not isinstance(array, np.ndarray):
        raise PackedDecodeError(f"packed value holds a {type(array).__name__}, expected a numpy array")
    return array
