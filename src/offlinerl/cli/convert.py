"""``offlinerl convert FORMAT ...``: one sub-command per registered converter
(:mod:`offlinerl.convert.registry`); each converter adds its own options and runs."""

from __future__ import annotations

import argparse

from offlinerl.cli.common import add_address_option, add_env_kwargs_option, overwrite_help
from offlinerl.convert.registry import converters


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "convert",
        help="convert recordings of other tools, or your own step logs, into an episode parquet dataset",
        description="Convert recordings of other tools (RLlib SampleBatch JSON, RLlib new-stack parquet, "
        "Minari), or your own step logs (CSV, parquet, JSON lines), into an episode parquet dataset.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    for converter in converters():
        p = formats.add_parser(
            converter.name, help=converter.help, description=converter.description or converter.help,
            epilog=converter.epilog or None,
            formatter_class=argparse.RawDescriptionHelpFormatter if converter.epilog else argparse.HelpFormatter,
        )
        converter.add_arguments(p)
        if "--env" in p._option_string_actions:  # noqa: SLF001 - every converter taking --env takes its kwargs too
            add_env_kwargs_option(p)
        p.add_argument("-o", "--output", required=True, metavar="OUT",
                       help="output dataset directory (must not exist unless --overwrite)")
        p.add_argument("--overwrite", action="store_true", help=overwrite_help())
        add_address_option(p, "--ray-address")  # --ray-address: its name before every command had --address
        p.set_defaults(func=converter.run)
