"""``offlinerl validate PATH``: check an episode dataset before spending compute on it."""

from __future__ import annotations

import argparse
import json
import sys

from offlinerl.cli.common import add_address_option

__all__ = ["register", "run"]

EPILOG = """\
exit codes:
  0  valid (warnings, e.g. observations outside the observation space, are allowed)
  1  invalid: at least one check failed
  2  not readable: PATH is not a directory, or a parquet file cannot be read
     (the file is named; the other files are still checked)

The checks run as a Ray Data job (one task per parquet row group), so datasets
larger than memory validate; a dataset of at most 64 MiB of parquet is checked in
this process instead, without starting Ray, unless a cluster is named. --address
(or RAY_ADDRESS) runs them on an existing cluster (PATH must then be readable from
every node; --json lists the nodes used).
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "validate",
        help="check an episode dataset (dataset.json, schema, lengths, values, ids, counts)",
        description="Check an episode parquet dataset against the format (docs/episode-format.md):\n"
        "dataset.json, schema vs spaces, per-row lengths, flags, NaN/inf, actions and\n"
        "observations inside their spaces, unique ids, contiguous chunks, counts.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help="dataset directory (dataset.json + *.parquet)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    parser.add_argument(
        "--max-examples", type=int, default=5, metavar="N", help="offending rows shown per check (default 5)"
    )
    add_address_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.episodes.scan import scan_locally
    from offlinerl.episodes.validate import validate_dataset
    from offlinerl.ray_utils import quiet_ray_data

    quiet_ray_data()

    if args.max_examples < 0:
        print("offlinerl validate: --max-examples must be >= 0", file=sys.stderr)
        return 2
    report = validate_dataset(args.path, max_examples=args.max_examples, local=scan_locally(args.path))
    if args.json:
        print(json.dumps(report.to_json(), indent=2, allow_nan=False))
    else:
        print(report.format())
    return report.exit_code
