"""``offlinerl inspect PATH``: what is in an episode dataset."""

from __future__ import annotations

import argparse
import json
import sys

from offlinerl.cli.common import add_address_option

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "inspect",
        help="summarise an episode dataset (counts, returns, lengths, actions, observations)",
        description="Summarise an episode parquet dataset: episode/step counts, return and length "
        "distributions (min, mean, std, p5/p25/p50/p75/p95, max), terminated/truncated counts, the action "
        "histogram (Discrete) or per-dimension action statistics, and per-dimension observation statistics. "
        "Runs as a Ray Data job, so datasets larger than memory work.",
    )
    parser.add_argument("path", metavar="PATH", help="dataset directory (dataset.json + *.parquet)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also draw return and length histograms into this image: .png, .jpg/.jpeg, .svg or .pdf "
                        "(the type follows the suffix; another suffix is refused before anything is read)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON instead of text")
    parser.add_argument(
        "--max-dims", type=int, default=16, metavar="N", help="dimensions listed per leaf in the text (default 16)"
    )
    add_address_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.episodes.info import DatasetInfoError
    from offlinerl.ray_utils import quiet_ray_data
    from offlinerl.episodes.scan import scan_locally
    from offlinerl.episodes.stats import StatsError, dataset_stats, format_stats, plot_format, plot_stats

    if args.max_dims < 0:
        print(f"offlinerl inspect: --max-dims must be >= 0, got {args.max_dims}", file=sys.stderr)
        return 2
    if args.plot:  # the suffix and the place, before the dataset is read (and Ray started)
        from offlinerl.episodes.atomic import OutputExistsError, OutputWriteError, UnsafeOutputError, check_output_file

        try:
            plot_format(args.plot)
            check_output_file(args.plot, True, inputs=[args.path])
        except (StatsError, UnsafeOutputError, OutputExistsError, OutputWriteError) as exc:
            print(f"offlinerl inspect: --plot {exc}", file=sys.stderr)
            return 2
    quiet_ray_data()

    try:
        stats = dataset_stats(args.path, local=scan_locally(args.path))
    except (DatasetInfoError, StatsError) as exc:
        print(f"offlinerl inspect: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(stats, indent=2))
    else:
        print(format_stats(stats, max_dims=args.max_dims))
    if args.plot:
        try:
            out = plot_stats(stats, args.plot)
        except StatsError as exc:  # a refused output (the dataset, a file inside it) or a failed write
            print(f"offlinerl inspect: --plot {exc}", file=sys.stderr)
            return 2
        print(f"wrote {out}", file=sys.stderr if args.json else sys.stdout)
    return 0
