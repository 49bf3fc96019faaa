"""Options shared by the commands that run a job from a pipeline file (train, finetune)."""

from __future__ import annotations

import argparse

__all__ = ["add_job_options", "overwrite_help"]


def add_job_options(parser: argparse.ArgumentParser, set_example: str) -> None:
    """``--set``, ``--output``, ``--address``, ``--no-progress`` and ``--skip-validation``; ``set_example`` shows a
    dotted key."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a pipeline value by dotted key, e.g. {set_example} (repeatable)")
    parser.add_argument("--output", "-o", help="run directory to create (default: <output>/<name>-<UTC time>)")
    parser.add_argument("--address", help="Ray cluster address to join (default: $RAY_ADDRESS, else start a local Ray)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--skip-validation", action="store_true",
                        help="do not validate the dataset before training (for data you already ran "
                        "`offlinerl validate` on); by default a dataset with errors stops the job before it starts")


def overwrite_help(kind: str = "dataset", marker: str = "dataset.json", target: str = "the output") -> str:
    """``--help`` of ``--overwrite`` for a command writing a ``kind`` recognised by its ``marker`` file."""
    return (f"replace {target} if it is an existing {kind} (a directory holding {marker}) or an empty "
            "directory; never a file, another non-empty directory, an input of this command, or a directory "
            "holding or inside one (exit 2, nothing changed; see docs/safety.md)")
