"""Options shared by the ``convert`` sub-commands."""

from __future__ import annotations

import argparse

from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, MAX_VALUE_BYTES_FLAG, parse_byte_size

__all__ = ["add_max_value_bytes"]


def _byte_size(text: str) -> int:
    try:
        return parse_byte_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_max_value_bytes(parser: argparse.ArgumentParser) -> None:
    """``--max-value-bytes SIZE``: the cap on one decoded value (``args.max_value_bytes``, in bytes)."""
    parser.add_argument(
        MAX_VALUE_BYTES_FLAG, type=_byte_size, default=DEFAULT_MAX_VALUE_BYTES, metavar="SIZE",
        help="largest size one recorded value may decode to (default 256MiB): a decompressed packed (LZ4) value, "
        "an array's declared shape x itemsize (pickle, msgpack, .npy), a line of a JSON recording. A record (line, "
        "row group, episode record) may also decompress to at most 64x its own size, or this much if larger. "
        "Checked before anything is allocated; a record over a cap is quarantined (reason too_large). Raise it "
        "(e.g. 1GiB) only for a trusted recording whose values are genuinely larger. SIZE: bytes or KiB/MiB/GiB. "
        "See docs/safety.md.",
    )
