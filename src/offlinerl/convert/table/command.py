"""``offlinerl convert table``: step logs (CSV, parquet, JSON lines) + a spec -> episode dataset."""

from __future__ import annotations

import argparse

from offlinerl.convert.interface import ConvertUsageError, Converter
from offlinerl.convert.options import add_allow_quarantine, add_max_value_bytes, start_ray
from offlinerl.convert.report import run_conversion

__all__ = ["CONVERTER"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="+", help=".csv, .parquet, .jsonl/.json files, directories (searched "
                   "recursively) or globs")
    p.add_argument("--spec", required=True, help="the YAML (or .json) spec mapping columns (docs/convert.md, "
                   "'Your own step logs: convert table')")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")
    add_max_value_bytes(p)
    add_allow_quarantine(p)


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.table.convert import convert_table
    from offlinerl.convert.table.spec import load_spec
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, OutputExistsError

    def convert():
        spec = load_spec(args.spec)
        start_ray(args.address)
        return convert_table(args.input, args.output, spec,
                             max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW,
                             overwrite=args.overwrite, allow_quarantine=args.allow_quarantine,
                             max_value_bytes=args.max_value_bytes)

    return run_conversion("table", convert, (FileNotFoundError, OutputExistsError, ConvertUsageError, ValueError),
                          args.allow_quarantine)


CONVERTER = Converter(
    name="table",
    help="your own step logs (CSV, parquet, JSON lines; one row per step) mapped by a --spec YAML",
    description="Convert step tables (one row per env step) into an episode dataset. A spec names the episode "
    "id, step, observation, action, reward and end-flag columns, and optionally the agent (docs/convert.md, 'Your "
    "own step logs'). Rows are grouped by episode (and agent) and sorted by step with Ray Data; bad rows and the "
    "episodes they break go to OUT/_quarantine/records.jsonl with file, line/row and reason. A parquet file whose "
    "columns would decode to more than --max-value-bytes (or 64x its size, if larger) is refused whole, before a "
    "row is read.",
    add_arguments=add_arguments,
    run=run,
)
