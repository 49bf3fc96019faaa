"""Helpers for the converter tests: a msgpack-numpy encoder written
from the format description (map with nd/type/kind/shape/data), and a CLI runner."""

from __future__ import annotations

import argparse
from typing import Any

import msgpack
import numpy as np


def encode_ndarray(obj: Any) -> Any:
    """msgpack ``default``: arrays and numpy scalars the way msgpack-numpy writes them."""
    if isinstance(obj, np.ndarray):
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": list(obj.shape), b"data": obj.tobytes()}
    if isinstance(obj, np.generic):
        return {b"nd": False, b"type": obj.dtype.str, b"data": obj.tobytes()}
    raise TypeError(f"cannot encode {type(obj).__name__}")


def pack_state(state: dict) -> bytes:
    return msgpack.packb(state, default=encode_ndarray, use_bin_type=True)


def raw_state(raw: bytes) -> dict:
    """Decode keeping msgpack-numpy maps as they are (to re-encode modified states)."""
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def run_cli(argv: list[str]) -> int:
    """Run ``offlinerl convert|export ...`` through the real argparse wiring of those commands."""
    from offlinerl.cli import convert, export

    parser = argparse.ArgumentParser(prog="offlinerl")
    sub = parser.add_subparsers(dest="command")
    convert.register(sub)
    export.register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)
