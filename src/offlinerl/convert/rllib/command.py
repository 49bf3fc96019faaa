"""``offlinerl convert rllib-parquet``: RLlib new-API-stack parquet recordings -> episode dataset."""

from __future__ import annotations

import argparse

from offlinerl.convert.interface import Converter
from offlinerl.convert.options import add_allow_quarantine, add_max_value_bytes, space_arg, start_ray
from offlinerl.convert.report import run_conversion

__all__ = ["CONVERTER"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", nargs="+", help="recording directory (searched recursively), parquet files or globs")
    p.add_argument("--env", dest="env_id", help="gymnasium env id: spaces and env spec come from it")
    p.add_argument("--observation-space", help="observation space as JSON text or a JSON file (overrides --env)")
    p.add_argument("--action-space", help="action space as JSON text or a JSON file (overrides --env)")
    p.add_argument("--max-steps-per-row", type=int, default=None, help="split longer episodes into chunks")
    add_allow_quarantine(p)
    add_max_value_bytes(p)


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.rllib.convert import convert_rllib_parquet
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW, OutputExistsError

    def convert():
        obs_space = space_arg(args.observation_space, "--observation-space")
        act_space = space_arg(args.action_space, "--action-space")
        start_ray(args.address)
        return convert_rllib_parquet(
            args.input, args.output, env_id=args.env_id, env_kwargs=args.env_kwargs,
            observation_space=obs_space, action_space=act_space,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW, overwrite=args.overwrite,
            allow_quarantine=args.allow_quarantine,
            max_value_bytes=args.max_value_bytes,
        )

    return run_conversion("rllib-parquet", convert, (FileNotFoundError, OutputExistsError, ValueError),
                          args.allow_quarantine)


CONVERTER = Converter(
    name="rllib-parquet",
    help="RLlib new-API-stack recordings (offline_data output=...): per-step rows or msgpack episodes",
    description="Convert parquet written by RLlib's new API stack (config.offline_data(output=...)) into an "
    "episode dataset. Both layouts are detected: one row per env step (output_write_episodes=False) and one "
    "msgpack episode state per row (output_write_episodes=True; decoded without pickle). Steps of an episode "
    "may be spread over files and run folders: all **/*.parquet files are read in path order and grouped "
    "by episode with Ray Data. Unreadable records go to OUT/_quarantine/records.jsonl.",
    add_arguments=add_arguments,
    run=run,
)
