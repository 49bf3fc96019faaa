"""``offlinerl convert FORMAT ...``: one sub-command module per input format."""

from __future__ import annotations

import argparse
import importlib

#: Modules under ``offlinerl.cli`` that each add one ``convert`` sub-command via ``register(subparsers)``.
FORMATS: tuple[str, ...] = ("convert_samplebatch", "convert_rllib", "convert_minari")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "convert",
        help="convert recordings of other tools into an episode parquet dataset",
        description="Convert recordings of other tools (RLlib SampleBatch JSON, RLlib new-stack parquet, "
        "Minari) into an episode parquet dataset.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    for name in FORMATS:
        importlib.import_module(f"offlinerl.cli.{name}").register(formats)
