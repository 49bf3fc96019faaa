"""Every source format of ``offlinerl convert``: a module path per converter, each
module defining ``CONVERTER`` (an :class:`~offlinerl.convert.interface.Converter`).
Adding a format = adding its module and one line here (docs/convert.md, "Add a converter")."""

from __future__ import annotations

import importlib

from offlinerl.convert.interface import Converter

__all__ = ["CONVERTERS", "converters"]

CONVERTERS: tuple[str, ...] = (
    "offlinerl.convert.samplebatch.command",
    "offlinerl.convert.rllib.command",
    "offlinerl.convert.minari",
    "offlinerl.convert.table.command",
)


def converters() -> list[Converter]:
    """The registered converters, in order (their modules import only light dependencies at top level)."""
    return [importlib.import_module(path).CONVERTER for path in CONVERTERS]
