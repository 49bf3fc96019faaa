"""``offlinerl convert samplebatch``: legacy RLlib SampleBatch JSON → episode parquet."""

from __future__ import annotations

import argparse

from offlinerl.convert.interface import Converter, ConvertUsageError
from offlinerl.convert.options import add_allow_quarantine, add_max_value_bytes, show_progress, space_arg
from offlinerl.convert.report import run_conversion

__all__ = ["CONVERTER"]

_EPILOG = """\
examples:
  offlinerl convert samplebatch /data/rllib-out -o cartpole-ds --env CartPole-v1
  offlinerl convert samplebatch 'runs/*/output-*.json.gz' -o pendulum-ds --env Pendulum-v1 --unsquash-actions
  offlinerl convert samplebatch out/ -o ds --observation-space '{"type": "Box", "dtype": "float32", \\
      "shape": [4], "low": "-inf", "high": "inf"}' --action-space '{"type": "Discrete", "n": 2}'

Unreadable lines and ambiguous episodes are written to OUT/_quarantine/records.jsonl
(file, line, level, reason code, message, raw line); a packed value over --max-value-bytes is quarantined as
too_large without being decompressed or built. Exit codes: 0 ok, 1 something was quarantined (unless
--allow-quarantine), 2 usage error or refused output (nothing written, an existing OUT
kept). docs/convert.md explains what is read, inferred and dropped; docs/safety.md what
--overwrite may replace.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories (their output-*.json[.gz]) or globs")
    spaces = p.add_argument_group("spaces (default: inferred from the data, and the report says so)")
    spaces.add_argument("--env", metavar="ENV_ID", help="take both spaces from gymnasium.make(ENV_ID)")
    spaces.add_argument("--observation-space", metavar="JSON", help="observation space as JSON text or a .json file")
    spaces.add_argument("--action-space", metavar="JSON", help="action space as JSON text or a .json file")
    p.add_argument("--unsquash-actions", action="store_true",
                   help="map actions from RLlib's normalised [-1, 1] space to the Box bounds "
                   "(clip(low + (a+1)(high-low)/2, low, high)); needs --env or --action-space")
    add_allow_quarantine(p)
    p.add_argument("--max-steps-per-row", type=int, default=None, metavar="N",
                   help="store episodes longer than N steps as several chunk rows (default 10000)")
    p.add_argument("--no-obs-check", action="store_true",
                   help="do not quarantine episodes whose new_obs[i] differs from obs[i+1]")
    add_max_value_bytes(p)


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.samplebatch.convert import SampleBatchConvertConfig, convert_samplebatch
    from offlinerl.episodes.atomic import OutputExistsError
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW

    def convert():
        return convert_samplebatch(SampleBatchConvertConfig(
            inputs=tuple(args.inputs),
            output=args.output,
            env_id=args.env,
            env_kwargs=args.env_kwargs or {},
            observation_space=space_arg(args.observation_space, "--observation-space"),
            action_space=space_arg(args.action_space, "--action-space"),
            unsquash_actions=args.unsquash_actions,
            overwrite=args.overwrite,
            allow_quarantine=args.allow_quarantine,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW,
            check_obs=not args.no_obs_check,
            progress=show_progress(),
            max_value_bytes=args.max_value_bytes,
        ))

    return run_conversion("samplebatch", convert, (ConvertUsageError, OutputExistsError), args.allow_quarantine)


CONVERTER = Converter(
    name="samplebatch",
    help="RLlib old-stack JsonWriter output (SampleBatch / MultiAgentBatch JSON lines)",
    description="Convert RLlib old-API-stack JsonWriter recordings (output-*.json[.gz], one SampleBatch or "
    "MultiAgentBatch per line; packed columns decoded with a numpy-only unpickler) into an episode "
    "parquet dataset. Runs on Ray Data and streams: inputs of any size.",
    epilog=_EPILOG,
    add_arguments=add_arguments,
    run=run,
)
