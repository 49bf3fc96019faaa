"""``--quiet`` / ``-v`` / ``--log-level`` on every command, and the one logging setup they choose.

The library logs through the ``offlinerl`` logger (``offlinerl.ray_utils``: the line while Ray starts; the
writers' and validators' warnings); a command shows those records on stderr as ``offlinerl CMD: message``:

- default (``info``): warnings and progress lines (``starting Ray (local, 2 CPUs) ...``), progress bars;
- ``--quiet`` (``warning``): no progress bars or progress lines, no Ray line; warnings, errors, the job's own
  messages and the command's result stay;
- ``-v`` (``debug``): also offlinerl's debug lines, Ray's own INFO lines and its workers' output, Ray Data's
  progress bars.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Iterator

__all__ = ["add_output_options", "log_level", "configured", "LEVELS"]

#: ``--log-level`` choices.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--quiet/-q``, ``--verbose/-v`` and ``--log-level`` on ``parser`` and on every sub-command under it."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if nested:
        for child in nested[0].choices.values():
            add_output_options(child)
        return
    group = parser.add_argument_group("output")
    group.add_argument("--quiet", "-q", action="store_true",
                       help="fewer lines: no progress bars or progress lines, no 'starting Ray' line (warnings, errors "
                       "and the result stay)")
    group.add_argument("--verbose", "-v", action="count", default=0,
                       help="print more: offlinerl's debug lines, Ray's own log lines, its workers' output and "
                       "Ray Data's progress bars")
    group.add_argument("--log-level", choices=tuple(LEVELS), default=None, type=str.lower,
                       help="the level of offlinerl's log lines on stderr (default info; --quiet is warning, "
                       "-v is debug); it wins over --quiet and -v")


def log_level(args: argparse.Namespace) -> int:
    """The level ``args`` chose: ``--log-level``, else ``debug`` for ``-v``, ``warning`` for ``--quiet``, else info."""
    if getattr(args, "log_level", None):
        return LEVELS[args.log_level]
    if getattr(args, "verbose", 0):
        return logging.DEBUG
    return logging.WARNING if getattr(args, "quiet", False) else logging.INFO


@contextlib.contextmanager
def configured(level: int, prefix: str) -> Iterator[None]:
    """While the command runs: the ``offlinerl`` logger at ``level``, its records on stderr as ``PREFIX: message``.

    A level above info also turns progress bars off (:func:`offlinerl.progress.enabled` reads the logger's level).
    """
    logger = logging.getLogger("offlinerl")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prefix}: %(message)s"))
    handler.setLevel(level)
    before = logger.level
    logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
