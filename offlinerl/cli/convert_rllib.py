"""``offlinerl convert rllib-parquet``: RLlib new-API-stack parquet recordings -> episode dataset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from offlinerl.cli.common import overwrite_help
from offlinerl.cli.convert_options import add_max_value_bytes

__all__ = ["register", "run", "load_space_arg"]


def load_space_arg(text: str | None, what: str):
    """A space given on the command line: JSON text, or the path of a JSON file (our / Minari's JSON form)."""
    if text is None:
        return None
    from offlinerl.episodes.spaces import space_from_json

    source = Path(text).read_text() if Path(text).is_file() else text
    try:
        return space_from_json(json.loads(source))
    except (ValueError, json.JSONDecodeError) as exc:
        raise SystemExit(f"--{what}: not a space in JSON form ({exc})") from exc


def register(formats: argparse._SubParsersAction) -> None:
    p = formats.add_parser(
        "rllib-parquet",
        help="RLlib new-API-stack recordings (offline_data output=...): per-step rows or msgpack episodes",
        description="Convert parquet written by RLlib's new API stack (config.offline_data(output=...)) into an "
        "episode dataset. Both layouts are detected: one row per env step (output_write_episodes=False) and one "
        "msgpack episode state per row (output_write_episodes=True; decoded without pickle). Steps of an episode "
        "may be spread over files and run folders: all **/*.parquet files are read in path order and grouped "
        "by episode with Ray Data. Unreadable records go to OUT/_quarantine/records.jsonl.",
    )
    p.add_argument("input", nargs="+", help="recording directory (searched recursively), parquet files or globs")
    p.add_argument("-o", "--output", required=True, help="output dataset directory (must not exist unless --overwrite)")
    p.add_argument("--env", dest="env_id", help="gymnasium env id: spaces and env spec come from it")
    p.add_argument("--observation-space", help="observation space as JSON text or a JSON file (overrides --env)")
    p.add_argument("--action-space", help="action space as JSON text or a JSON file (overrides --env)")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")
    p.add_argument("--allow-quarantine", action="store_true",
                   help="exit 0 even when records were quarantined (default: exit 1 so pipelines notice), and let "
                   "--overwrite replace an existing dataset even then (without it the existing dataset is kept)")
    p.add_argument("--overwrite", action="store_true", help=overwrite_help())
    p.add_argument("--ray-address", default=None, help="join this Ray cluster instead of starting a local Ray")
    add_max_value_bytes(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.rllib_parquet import convert_rllib_parquet
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, OutputExistsError
    from offlinerl.ray_utils import init_ray

    obs_space = load_space_arg(args.observation_space, "observation-space")
    act_space = load_space_arg(args.action_space, "action-space")
    init_ray(args.ray_address)
    _show_progress()
    try:
        report = convert_rllib_parquet(
            args.input, args.output, env_id=args.env_id, observation_space=obs_space, action_space=act_space,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW, overwrite=args.overwrite,
            allow_quarantine=args.allow_quarantine,
            max_value_bytes=args.max_value_bytes,
        )
    except (FileNotFoundError, OutputExistsError, ValueError) as exc:
        print(f"offlinerl convert rllib-parquet: error: {exc}", file=sys.stderr)
        return 2
    print(report.text())
    if report.quarantined and not args.allow_quarantine:
        print("some records were quarantined (see above); pass --allow-quarantine to accept that", file=sys.stderr)
        return 1
    return 0


def _show_progress() -> None:
    """Ray Data's progress bars on an interactive terminal (off in logs and tests)."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = sys.stderr.isatty()
