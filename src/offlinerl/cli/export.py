"""``offlinerl export FORMAT ...``: write an episode dataset in another tool's format (``minari``), or a
checkpoint's policy as one deployable file (``policy``)."""

from __future__ import annotations

import argparse
import sys

from offlinerl.cli.common import overwrite_help
from offlinerl.cli.export_policy import register_policy

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help="export an episode dataset in another tool's format (Minari), or a policy to deploy (ONNX, TorchScript)",
        description="Export an episode parquet dataset in another tool's format, or a checkpoint's policy as one "
        "self-contained ONNX or TorchScript file.",
    )
    formats = parser.add_subparsers(dest="format", metavar="FORMAT")
    formats.required = True
    p = formats.add_parser(
        "minari",
        help="as a Minari dataset that minari.load_dataset opens",
        description="Write the episode dataset at PATH as the Minari dataset DATASET_ID under the Minari datasets "
        "root ($MINARI_DATASETS_PATH, default ~/.minari/datasets) or --root. Observations, actions, rewards and "
        "terminated/truncated flags are written losslessly (no JPEG encoding); infos and extra columns are not.",
    )
    p.add_argument("path", metavar="PATH", help="episode dataset directory")
    p.add_argument("--dataset-id", required=True, help="Minari id: (namespace/)name-v<version>, e.g. cartpole/ppo-v0")
    p.add_argument("--data-format", choices=("hdf5", "arrow", "parquet"), default="hdf5",
                   help="Minari storage backend (default: hdf5, Minari's default)")
    p.add_argument("--root", default=None, help="datasets root to write under instead of Minari's")
    p.add_argument("--description", default=None, help="dataset description stored in the Minari metadata")
    p.add_argument("--overwrite", action="store_true",
                   help=overwrite_help("Minari dataset", "data/metadata.json", "ROOT/DATASET_ID"))
    p.set_defaults(func=run_minari)
    register_policy(formats)


def run_minari(args: argparse.Namespace) -> int:
    from offlinerl.convert.minari import MinariError, export_minari
    from offlinerl.episodes.info import DatasetInfoError
    from offlinerl.episodes.atomic import OutputWriteError
    from offlinerl.episodes.io import OutputExistsError

    try:
        target = export_minari(args.path, args.dataset_id, data_format=args.data_format, root=args.root,
                               description=args.description, overwrite=args.overwrite,
                               progress=sys.stderr.isatty())
    except OutputWriteError as exc:  # a read-only or full disk: nothing half-written is left
        print(f"offlinerl export minari: error: {exc}", file=sys.stderr)
        return 1
    except (MinariError, DatasetInfoError, OutputExistsError) as exc:
        print(f"offlinerl export minari: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote Minari dataset {args.dataset_id} ({args.data_format}) to {target}")
    return 0
