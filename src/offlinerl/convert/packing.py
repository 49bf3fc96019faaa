"""Decoding RLlib's packed columns without running untrusted code or allocating without bound.

RLlib's ``pack()`` stores a numpy array as ``base64(lz4.frame(pickle(array)))``
(ASCII text; some versions wrote the bytes' repr, ``b'…'``). Unpickling runs
arbitrary code, so :func:`safe_loads` uses an unpickler that rebuilds only
numpy arrays, dtypes and scalars and refuses every other global. It also
checks every array's declared ``shape × itemsize`` against a cap *before* numpy
allocates it, and the LZ4 frame is decompressed only up to the cap
(:mod:`offlinerl.convert.limits`).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import pickle
from typing import Any, Callable

import numpy as np

from offlinerl.convert.limits import (
    DEFAULT_MAX_VALUE_BYTES, DecodeBudget, DecodeLimits, ValueTooLargeError, check_array, lz4_decompress,
)

__all__ = [
    "PackedDecodeError", "RefusedPickleError", "ValueTooLargeError", "safe_loads", "is_packed", "unpack",
    "LZ4_MAGIC_B64",
]

#: base64 of the LZ4 frame magic number ``04 22 4D 18``: how every packed value starts.
LZ4_MAGIC_B64 = "BCJNGG"


class PackedDecodeError(ValueError):
    """A packed value is not valid base64 / LZ4 / pickle of a numpy array."""


class RefusedPickleError(PackedDecodeError):
    """A pickle asked for a global outside the numpy allow-list; nothing was executed."""


def _array_state(state: Any, max_bytes: int) -> None:
    """Check ``ndarray.__setstate__``'s ``([version,] shape, dtype, is_fortran, data)`` before numpy allocates."""
    if not isinstance(state, tuple) or len(state) not in (4, 5):
        raise PackedDecodeError(f"ndarray state is a {type(state).__name__}, expected a 4- or 5-tuple")
    shape, dtype, _, data = state[-4:]
    if not isinstance(dtype, np.dtype):
        raise PackedDecodeError(f"ndarray state holds a {type(dtype).__name__} where a dtype belongs")
    check_array(shape, dtype, max_bytes, "pickled array")
    count = math.prod(shape)
    if dtype.hasobject:
        if not isinstance(data, list) or len(data) != count:
            raise PackedDecodeError("object array state: the list of items does not match the shape")
    elif not isinstance(data, (bytes, bytearray)) or len(data) != count * dtype.itemsize:
        raise PackedDecodeError("array state: the data does not match shape and dtype")


class _DirectNdarrayCall:
    """Stands in for ``numpy.ndarray`` in a pickle: numpy's own pickles only pass it to ``_reconstruct``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise RefusedPickleError("refused to call numpy.ndarray directly (numpy's own pickles never do)")


def _checked_globals(max_bytes: int) -> dict[str, Callable[..., Any]]:
    """The allowed numpy callables, each checking declared sizes before numpy allocates."""
    try:
        from numpy._core.multiarray import _reconstruct, scalar
        from numpy._core.numeric import _frombuffer
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct, scalar
        from numpy.core.numeric import _frombuffer

    def reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
        if subtype is not _DirectNdarrayCall:
            raise RefusedPickleError(f"refused to reconstruct a {subtype!r:.60} (only numpy.ndarray)")
        dtype = np.dtype(dtype)
        check_array(shape, dtype, max_bytes, "pickled array")
        if math.prod(shape) != 0:  # its memory would not come from the pickled data
            raise PackedDecodeError(f"refused to reconstruct a non-empty array of shape {shape!r:.60} (numpy's own "
                                    "pickles reconstruct an empty array and fill it from the pickled data)")
        return _reconstruct(np.ndarray, shape, dtype)

    def frombuffer(buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
        check_array(shape, dtype, max_bytes, "pickled array")
        return _frombuffer(buf, dtype, shape, order)

    def make_scalar(dtype: Any, *args: Any) -> Any:
        check_array((), dtype, max_bytes, "pickled scalar")
        return scalar(dtype, *args)

    return {"dtype": np.dtype, "ndarray": _DirectNdarrayCall, "_reconstruct": reconstruct,
            "_frombuffer": frombuffer, "scalar": make_scalar}


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


class _NumpyOnlyUnpickler(pickle._Unpickler):
    """The pure-Python unpickler, so that ``BUILD`` (``ndarray.__setstate__``) can be checked before it runs."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: io.BytesIO, max_bytes: int):
        super().__init__(file)
        self._globals = _checked_globals(max_bytes)
        self._max_bytes = max_bytes

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise RefusedPickleError(f"refused to unpickle global {module}.{name} (only numpy arrays are allowed)")
        return self._globals[name]

    def load_build(self) -> None:
        if len(self.stack) >= 2 and isinstance(self.stack[-2], np.ndarray):
            _array_state(self.stack[-1], self._max_bytes)
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build


def safe_loads(data: bytes, max_array_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> Any:
    """Unpickle ``data`` allowing only numpy arrays, dtypes and scalars, each at most ``max_array_bytes``."""
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(data), max_array_bytes).load()
    except (PackedDecodeError, ValueTooLargeError):
        raise
    except Exception as exc:  # a malformed pickle raises many kinds of errors
        raise PackedDecodeError(f"not a valid pickle: {type(exc).__name__}: {exc}") from exc


def is_packed(value: Any) -> bool:
    """Whether a JSON value looks like a packed column (a string, not a list)."""
    return isinstance(value, (str, bytes))


def unpack_any(value: str | bytes, budget: DecodeBudget | None = None) -> Any:
    """Decode one packed value into what it holds (an array, or a dict/tuple of arrays).

    ``budget`` bounds the decompressed size (default: the default limits, for this value alone).
    Raises :class:`ValueTooLargeError` for a value over a cap, :class:`PackedDecodeError` otherwise.
    """
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("ascii", "replace")
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("b'", 'b"')) and text.endswith(("'", '"')):
            text = text[2:-1]
        try:
            raw_b64 = text.encode("ascii", errors="strict")
        except UnicodeEncodeError as exc:
            raise PackedDecodeError(f"bad base64: packed text is not ASCII: {exc}") from exc
    else:
        raise PackedDecodeError(f"packed value is a {type(value).__name__}, expected text")
    budget = budget or DecodeLimits().budget(len(raw_b64))
    try:
        compressed = base64.b64decode(raw_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PackedDecodeError(f"bad base64: {exc}") from exc
    try:
        payload = lz4_decompress(compressed, budget)
    except ValueTooLargeError:
        raise
    except ValueError as exc:
        raise PackedDecodeError(str(exc)) from exc
    return safe_loads(payload, budget.limits.max_value_bytes)


def unpack(value: str | bytes, budget: DecodeBudget | None = None) -> np.ndarray:
    """Decode one packed value into the numpy array it holds (see :func:`unpack_any`)."""
    array = unpack_any(value, budget)
    if not isinstance(array, np.ndarray):
        raise PackedDecodeError(f"packed value holds a {type(array).__name__}, expected a numpy array")
    return array
