"""``offlinerl`` command line. Each command lives in its own module with a
``register(subparsers)`` function; the command itself calls one library function."""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser"]

#: Command modules under ``offlinerl.cli``, in ``--help`` order.
COMMANDS = ("validate", "inspect", "convert", "export", "train", "evaluate", "collect", "finetune")


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
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
