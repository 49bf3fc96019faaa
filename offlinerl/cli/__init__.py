"""``offlinerl`` command line. Each command lives in its own module with a
``register(subparsers)`` function; the command itself calls one library function."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import time
from typing import Iterator

__all__ = ["main", "build_parser", "STARTED_AT"]

STARTED_AT = time.time()
"""When the command started (this package's import, the first thing it does): jobs report the time from
here to their first update (``result.json``: ``first_update_s``)."""

#: Command modules under ``offlinerl.cli``, in ``--help`` order.
COMMANDS = ("validate", "inspect", "convert", "export", "train", "evaluate", "ope", "collect", "finetune", "sweep")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offlinerl",
        description="Offline-first reinforcement learning on Ray Data and PyTorch: convert, validate, "
        "inspect and train on episode parquet datasets.",
    )
    parser.add_argument("--version", action="version", version=f"offlinerl {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"offlinerl.cli.{name}").register(sub)
    return parser


def _version() -> str:
    from offlinerl import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prefix = " ".join(["offlinerl", args.command] + ([args.format] if getattr(args, "format", None) else []))
    with _warnings_to_stderr(prefix), _ray_address(getattr(args, "address", None)):
        return int(args.func(args) or 0)


@contextlib.contextmanager
def _ray_address(address: str | None) -> Iterator[None]:
    """While the command runs, its ``--address`` is ``RAY_ADDRESS``: the library starts Ray lazily, deep inside
    (``offlinerl.ray_utils.init_ray``), and every such start joins that cluster."""
    if not address:
        yield
        return
    before = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = before


@contextlib.contextmanager
def _warnings_to_stderr(prefix: str) -> Iterator[None]:
    """Show the library's warnings (e.g. a writer removing what a killed writer left) as ``PREFIX: message``."""
    logger = logging.getLogger("offlinerl")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prefix}: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
