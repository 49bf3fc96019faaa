"""``offlinerl convert minari``: a local Minari dataset -> episode dataset."""

from __future__ import annotations

import argparse
import sys

from offlinerl.cli.common import overwrite_help

__all__ = ["register", "run"]


def register(formats: argparse._SubParsersAction) -> None:
    p = formats.add_parser(
        "minari",
        help="a local Minari dataset (hdf5, arrow or parquet storage), by id or path",
        description="Import a local Minari dataset into an episode dataset. DATASET is a dataset id "
        "(looked up under $MINARI_DATASETS_PATH, default ~/.minari/datasets) or the path of a dataset "
        "directory (the one holding data/metadata.json, or its data/ folder). Spaces and the env spec come from "
        "the dataset's metadata; infos are kept as a JSON column when every step has them.",
    )
    p.add_argument("dataset", metavar="DATASET", help="Minari dataset id (e.g. D4RL/door/human-v2) or directory")
    p.add_argument("-o", "--output", required=True, help="output dataset directory (must not exist unless --overwrite)")
    p.add_argument("--no-infos", action="store_true", help="do not keep infos")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")
    p.add_argument("--overwrite", action="store_true", help=overwrite_help())
    p.add_argument("--ray-address", default=None, help="join this Ray cluster instead of starting a local Ray")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.minari import MinariError, import_minari
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, OutputExistsError
    from offlinerl.ray_utils import init_ray

    init_ray(args.ray_address)
    _show_progress()
    try:
        info = import_minari(
            args.dataset, args.output, keep_infos=not args.no_infos,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW, overwrite=args.overwrite,
        )
    except (FileNotFoundError, OutputExistsError, MinariError) as exc:
        print(f"offlinerl convert minari: error: {exc}", file=sys.stderr)
        return 2
    print(f"Minari {info.provenance.get('minari_dataset_id')} ({info.provenance.get('minari_data_format')}) -> "
          f"{args.output}: {info.num_episodes} episodes, {info.num_steps} steps")
    return 0


def _show_progress() -> None:
    """Ray Data's progress bars on an interactive terminal (off in logs and tests)."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = sys.stderr.isatty()
