"""The converter interface: what ``offlinerl convert FORMAT`` needs from a source format.

A converter is a plain value (no base class): its sub-command name, a one-line
help, a function that adds the format's own command-line options and a function
that runs the conversion and returns the exit code. ``offlinerl.cli.convert``
adds the options every converter shares (``-o/--output``, ``--overwrite``) and
dispatches to ``run``. Converters are listed in :mod:`offlinerl.convert.registry`.

Exit codes (the same for every converter): 0 converted; 1 converted, but records
were quarantined and ``--allow-quarantine`` was not given; 2 usage error or
refused output (nothing written, an existing output kept).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

__all__ = ["Converter", "ConvertUsageError", "EXIT_OK", "EXIT_QUARANTINED", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_QUARANTINED = 1
EXIT_USAGE = 2


class ConvertUsageError(ValueError):
    """The request itself is wrong (inputs, output, flags, env id); nothing was converted."""


@dataclass(frozen=True, kw_only=True)
class Converter:
    """One source format of ``offlinerl convert``."""

    name: str
    """Sub-command name (``offlinerl convert NAME``)."""
    help: str
    """One line for ``offlinerl convert --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the format's own options (its inputs, spaces, limits); ``-o/--output`` and ``--overwrite`` are added for it."""
    run: Callable[[argparse.Namespace], int]
    """Converts ``args.output`` from the parsed arguments; returns the exit code."""
    description: str = ""
    """Longer text for ``offlinerl convert NAME --help`` (default: ``help``)."""
    epilog: str = ""
    """Text after the options in ``--help`` (examples), printed as written."""
