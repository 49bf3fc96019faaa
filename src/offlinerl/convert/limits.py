"""How large a value read from a recording may become once decoded.

A few bytes of hostile input must not become gigabytes: an LZ4 frame of 11 MB
can hold 2 GiB of zeros, and a 92-byte pickle can declare an array of 11 GB.
Every size is therefore checked *before* anything of that size is allocated:
the size an LZ4 frame or zlib stream declares (or, when it declares none,
streaming decompression that stops one byte past the cap), and an array's
declared ``shape × itemsize``.

Two caps apply, both set by :class:`DecodeLimits`:

- per value: one decompressed payload or one array holds at most
  ``max_value_bytes`` (default 256 MiB);
- per record (a JSON line, a parquet row): all its values together decompress
  to at most ``max(max_value_bytes, max_expansion × the record's own size)``,
  so one line cannot carry many bombs that are each just under the cap.

A value over a cap raises :class:`ValueTooLargeError`, whose message names the
cap and the command-line flag that raises it (:data:`MAX_VALUE_BYTES_FLAG`);
converters quarantine the record and go on.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_MAX_EXPANSION",
    "MAX_VALUE_BYTES_FLAG",
    "TOO_LARGE",
    "ValueTooLargeError",
    "DecodeLimits",
    "DecodeBudget",
    "array_nbytes",
    "check_array",
    "lz4_decompress",
    "zlib_decompress",
    "parse_byte_size",
    "MAX_JSON_DEPTH",
    "json_too_deep",
]

#: Default cap on one decoded value (decompressed payload or array): 256 MiB.
DEFAULT_MAX_VALUE_BYTES = 256 * 1024 * 1024
#: Default cap on how many times its own size a record may decode to (above ``max_value_bytes``).
DEFAULT_MAX_EXPANSION = 64
#: The converters' command-line flag that sets ``DecodeLimits.max_value_bytes``.
MAX_VALUE_BYTES_FLAG = "--max-value-bytes"
#: Quarantine reason for a record holding a value over a cap.
TOO_LARGE = "too_large"
#: Deepest nesting of JSON arrays and objects read from a recording (a line or a cell): Python's JSON parser
#: recurses once per level and gives up (``RecursionError``) near 1,000; real records nest a few levels.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STREAM_CHUNK = 8 * 1024 * 1024
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


class ValueTooLargeError(ValueError):
    """A value would decode to more bytes than the limits allow; nothing that large was allocated."""


def _mib(n: int) -> str:
    return f"{n / 1024**2:.0f} MiB" if n >= 1024**2 else f"{n} bytes"


@dataclass(frozen=True, kw_only=True)
class DecodeLimits:
    """Caps on what one value and one record of a recording may decode to (checked before allocating)."""

    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    """Largest decompressed payload or array (declared shape × item size) of one value; raise it only for a
    trusted recording whose single observations or columns are genuinely larger."""
    max_expansion: int = DEFAULT_MAX_EXPANSION
    """A record may decompress to at most ``max(max_value_bytes, max_expansion × its size in bytes)`` in all."""

    def __post_init__(self) -> None:
        if isinstance(self.max_value_bytes, bool) or not isinstance(self.max_value_bytes, int) \
                or self.max_value_bytes < 1:
            raise ValueError(f"max_value_bytes must be a positive integer, got {self.max_value_bytes!r}")
        if isinstance(self.max_expansion, bool) or not isinstance(self.max_expansion, int) or self.max_expansion < 1:
            raise ValueError(f"max_expansion must be a positive integer, got {self.max_expansion!r}")

    def budget(self, record_bytes: int) -> DecodeBudget:
        """A fresh budget for one record of ``record_bytes`` bytes (as stored)."""
        return DecodeBudget(self, record_bytes)

    def value_error(self, what: str, nbytes: int) -> ValueTooLargeError:
        """The error for one value over ``max_value_bytes``."""
        return ValueTooLargeError(
            f"{what} is {nbytes:,} bytes, over the cap of {self.max_value_bytes:,} bytes "
            f"({_mib(self.max_value_bytes)}) per value, so it was not built. If the recording is trusted and "
            f"its values really are that large, raise the cap with {MAX_VALUE_BYTES_FLAG}"
        )


class DecodeBudget:
    """What one record may still decode to: the per-value cap and what is left of the record's total."""

    def __init__(self, limits: DecodeLimits, record_bytes: int):
        self.limits = limits
        self.record_bytes = int(record_bytes)
        self.total = max(limits.max_value_bytes, limits.max_expansion * self.record_bytes)
        self.used = 0

    @property
    def allowance(self) -> int:
        """The most bytes the next value may decompress to."""
        return min(self.limits.max_value_bytes, self.total - self.used)

    def check(self, nbytes: int, what: str) -> None:
        """Raise :class:`ValueTooLargeError` if a value of ``nbytes`` does not fit (nothing is charged)."""
        if nbytes > self.limits.max_value_bytes:
            raise self.limits.value_error(what, nbytes)
        if nbytes > self.total - self.used:
            raise ValueTooLargeError(
                f"{what} is {nbytes:,} bytes, but this record ({self.record_bytes:,} bytes) may decompress to at "
                f"most {self.total:,} bytes in all ({self.limits.max_expansion}x its size, at least "
                f"{MAX_VALUE_BYTES_FLAG}) and {self.used:,} are used, so it was not built. If the recording is "
                f"trusted, raise the cap with {MAX_VALUE_BYTES_FLAG}"
            )

    def charge(self, nbytes: int, what: str) -> None:
        """Check, then count ``nbytes`` as decoded."""
        self.check(nbytes, what)
        self.used += nbytes

    def charge_many(self, nbytes: int, what: str, record: str = "record") -> None:
        """Count ``nbytes`` of many values (e.g. a parquet row group's columns) against the record's total
        only, not the per-value cap; :class:`ValueTooLargeError` (nothing counted) if they do not fit."""
        if nbytes > self.total - self.used:
            before = f", {self.used:,} of them already counted" if self.used else ""
            raise ValueTooLargeError(
                f"{what} would decode to {nbytes:,} bytes; this {record} of {self.record_bytes:,} bytes may decode "
                f"to at most {self.total:,} bytes in all (the larger of {MAX_VALUE_BYTES_FLAG} "
                f"{_mib(self.limits.max_value_bytes)} and {self.limits.max_expansion}x its size){before}, so it "
                f"was not read. If the {record} is trusted, raise the cap with {MAX_VALUE_BYTES_FLAG}"
            )
        self.used += nbytes


def array_nbytes(shape: Any, dtype: Any) -> int:
    """Bytes of an array of ``shape`` and ``dtype``, computed exactly (Python ints: no overflow).

    Raises ``ValueError`` for a shape that is not a sequence of non-negative integers.
    """
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ValueError(f"array shape must be a tuple of integers, got {type(shape).__name__}")
    dims = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ValueError(f"array shape {shape!r:.80} holds {type(d).__name__}, expected integers")
        if d < 0:
            raise ValueError(f"array shape {shape!r:.80} has a negative dimension")
        dims.append(int(d))
    return math.prod(dims) * int(np.dtype(dtype).itemsize)


def check_array(shape: Any, dtype: Any, max_bytes: int, what: str = "array") -> None:
    """Refuse an array whose declared ``shape × itemsize`` is over ``max_bytes`` (before it is built)."""
    nbytes = array_nbytes(shape, dtype)
    if nbytes > max_bytes:
        raise DecodeLimits(max_value_bytes=max_bytes).value_error(
            f"{what} of shape {tuple(shape) if isinstance(shape, (list, tuple)) else shape!r:.80} and dtype "
            f"{np.dtype(dtype).str}", nbytes)


def lz4_decompress(data: bytes, budget: DecodeBudget, what: str = "packed value") -> bytes:
    """Decompress one LZ4 frame, refusing one larger than the budget allows before decompressing it.

    A frame that declares its content size is judged by that; one that does not is
    decompressed in chunks that stop one byte past the allowance. Raises ``ValueError``
    (``RuntimeError`` from lz4 wrapped) for a frame that is not valid.
    """
    import lz4.frame

    allowance = budget.allowance
    try:
        declared = int(lz4.frame.get_frame_info(data).get("content_size") or 0)
    except RuntimeError as exc:
        raise ValueError(f"bad LZ4 frame: {exc}") from exc
    if declared:
        budget.check(declared, f"{what} (as its LZ4 frame declares)")
    decompressor = lz4.frame.LZ4FrameDecompressor()
    parts, size, pending = [], 0, data
    chunk = declared + 1 if declared else 64 * 1024  # lz4 allocates max_length up front: start small
    try:
        while True:
            part = decompressor.decompress(pending, max_length=min(chunk, allowance + 1 - size))
            pending, chunk = b"", min(2 * chunk, _STREAM_CHUNK)
            parts.append(part)
            size += len(part)
            if decompressor.eof:
                break
            if size > allowance:
                budget.check(size, f"{what} (decompressed so far)")
            if decompressor.needs_input:
                raise ValueError("bad LZ4 frame: the data ends inside the frame")
    except RuntimeError as exc:
        raise ValueError(f"bad LZ4 frame: {exc}") from exc
    budget.charge(size, what)
    return b"".join(parts)


def zlib_decompress(data: bytes, budget: DecodeBudget, what: str = "zlib value") -> bytes:
    """Decompress a zlib stream, stopping one byte past the allowance (zlib declares no size)."""
    allowance = budget.allowance
    decompressor = zlib.decompressobj()
    out = decompressor.decompress(data, allowance + 1)
    if len(out) > allowance:
        budget.check(len(out), f"{what} (decompressed so far)")
    if not decompressor.eof:
        raise zlib.error("incomplete or truncated zlib stream")
    budget.charge(len(out), what)
    return out


def parse_byte_size(text: str) -> int:
    """``"512MiB"``, ``"2GiB"``, ``"1048576"`` -> bytes (binary units; ``k``/``M``/``G``/``T`` too)."""
    raw = text.strip().lower().replace("_", "")
    number = raw.rstrip("kmgtib")
    unit = raw[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a byte size: {text!r} (examples: 268435456, 512MiB, 2GiB)") from None
    if unit not in _UNITS or not math.isfinite(value) or value * _UNITS[unit] < 1:
        raise ValueError(f"not a byte size: {text!r} (examples: 268435456, 512MiB, 2GiB)")
    return int(value * _UNITS[unit])


def json_too_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON ``text`` nests arrays and objects more than ``max_depth`` levels deep (brackets inside
    strings do not count). Linear time, vectorised; text with few brackets is answered at once."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    if '"' in text:
        text = _JSON_STRING.sub('""', text)
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]], step[[ord("]"), ord("}")]] = 1, -1
    depth = 0
    for start in range(0, len(data), _STREAM_CHUNK):  # int32 running depth, one chunk at a time
        levels = np.cumsum(step[data[start:start + _STREAM_CHUNK]], dtype=np.int32) + depth
        if len(levels) and int(levels.max()) > max_depth:
            return True
        depth = int(levels[-1]) if len(levels) else depth
    return False
