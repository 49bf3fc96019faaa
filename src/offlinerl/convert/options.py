"""Command-line options and argument parsing shared by the converters' ``add_arguments``/``run``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gymnasium as gym

from offlinerl.convert.interface import ConvertUsageError
from offlinerl.convert.limits import DEFAULT_MAX_VALUE_BYTES, MAX_VALUE_BYTES_FLAG, parse_byte_size

__all__ = ["add_max_value_bytes", "add_allow_quarantine", "space_arg", "show_progress", "start_ray"]


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


def add_allow_quarantine(parser: argparse.ArgumentParser) -> None:
    """``--allow-quarantine``: exit 0 although records were quarantined, and let ``--overwrite`` replace anyway."""
    parser.add_argument(
        "--allow-quarantine", action="store_true",
        help="exit 0 even when records were quarantined (default: exit 1 so scripts notice), and let "
        "--overwrite replace an existing dataset even then (without it the existing dataset is kept)",
    )


def space_arg(text: str | None, flag: str) -> gym.Space | None:
    """A space given on the command line: JSON text, or the path of a JSON file (our / Minari's JSON form)."""
    from offlinerl.episodes.spaces import SpaceError, space_from_json

    if text is None:
        return None
    source = Path(text).read_text() if Path(text).is_file() else text
    try:
        return space_from_json(json.loads(source))
    except (json.JSONDecodeError, SpaceError, ValueError) as exc:
        raise ConvertUsageError(f"{flag}: not a space in JSON form ({exc})") from exc


def show_progress() -> bool:
    """Whether to show Ray Data's progress bars: on an interactive terminal only (off in logs and tests)."""
    return sys.stderr.isatty()


def start_ray(address: str | None) -> None:
    """Start or join Ray for a converter (``init_ray``). Ray Data's progress bars stay off (several redrawn lines
    per operator, mixed into the converter's own output) unless ``-v`` asked for Ray's own output."""
    from offlinerl.ray_utils import init_ray

    init_ray(address)
