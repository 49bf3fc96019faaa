"""``offlinerl convert samplebatch``: legacy RLlib SampleBatch JSON → episode parquet."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from offlinerl.cli.common import overwrite_help
from offlinerl.cli.convert_options import add_max_value_bytes

__all__ = ["register", "run"]

_EPILOG = """\
examples:
  offlinerl convert samplebatch /data/rllib-out -o cartpole-ds --env CartPole-v1
  offlinerl convert samplebatch 'runs/*/output-*.json.gz' -o pendulum-ds --env Pendulum-v1 --unsquash-actions
  offlinerl convert samplebatch out/ -o ds --observation-space '{"type": "Box", "dtype": "float32", \\
      "shape": [4], "low": "-inf", "high": "inf"}' --action-space '{"type": "Discrete", "n": 2}'

Unreadable lines and ambiguous episodes are written to OUT/_quarantine/quarantine.jsonl
(file, line, reason, raw line); a packed value over --max-value-bytes is quarantined as
too_large without being decompressed or built. Exit codes: 0 ok, 1 something was quarantined (unless
--allow-quarantine), 2 usage error or refused output (nothing written, an existing OUT
kept). docs/convert.md explains what is read, inferred and dropped; docs/safety.md what
--overwrite may replace.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "samplebatch",
        help="RLlib old-stack JsonWriter output (SampleBatch / MultiAgentBatch JSON lines)",
        description="Convert RLlib old-API-stack JsonWriter recordings (output-*.json[.gz], one SampleBatch or "
        "MultiAgentBatch per line; packed columns decoded with a numpy-only unpickler) into an episode "
        "parquet dataset. Runs on Ray Data and streams: inputs of any size.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories (their output-*.json[.gz]) or globs")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="dataset directory to create")
    spaces = p.add_argument_group("spaces (default: inferred from the data, and the report says so)")
    spaces.add_argument("--env", metavar="ENV_ID", help="take both spaces from gymnasium.make(ENV_ID)")
    spaces.add_argument("--observation-space", metavar="JSON", help="observation space as JSON text or a .json file")
    spaces.add_argument("--action-space", metavar="JSON", help="action space as JSON text or a .json file")
    p.add_argument("--unsquash-actions", action="store_true",
                   help="map actions from RLlib's normalised [-1, 1] space to the Box bounds "
                   "(clip(low + (a+1)(high-low)/2, low, high)); needs --env or --action-space")
    p.add_argument("--allow-quarantine", action="store_true",
                   help="exit 0 even if lines or episodes were quarantined, and let --overwrite replace an "
                   "existing dataset even then (without it the existing dataset is kept)")
    p.add_argument("--overwrite", action="store_true", help=overwrite_help())
    p.add_argument("--max-steps-per-row", type=int, default=None, metavar="N",
                   help="store episodes longer than N steps as several chunk rows (default 10000)")
    p.add_argument("--no-obs-check", action="store_true",
                   help="do not quarantine episodes whose new_obs[i] differs from obs[i+1]")
    add_max_value_bytes(p)
    p.set_defaults(func=run)


def _space_arg(text: str | None, flag: str):
    from offlinerl.episodes.spaces import SpaceError, space_from_json

    if text is None:
        return None
    source = Path(text).read_text() if text.endswith(".json") and Path(text).is_file() else text
    try:
        return space_from_json(json.loads(source))
    except (json.JSONDecodeError, SpaceError) as exc:
        raise ValueError(f"{flag}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    from offlinerl.convert.samplebatch import ConvertUsageError, SampleBatchConvertConfig, convert_samplebatch
    from offlinerl.episodes.atomic import OutputExistsError
    from offlinerl.episodes.io import DEFAULT_MAX_STEPS_PER_ROW

    try:
        config = SampleBatchConvertConfig(
            inputs=tuple(args.inputs),
            output=args.output,
            env_id=args.env,
            observation_space=_space_arg(args.observation_space, "--observation-space"),
            action_space=_space_arg(args.action_space, "--action-space"),
            unsquash_actions=args.unsquash_actions,
            overwrite=args.overwrite,
            allow_quarantine=args.allow_quarantine,
            max_steps_per_row=args.max_steps_per_row or DEFAULT_MAX_STEPS_PER_ROW,
            check_obs=not args.no_obs_check,
            progress=sys.stderr.isatty(),
            max_value_bytes=args.max_value_bytes,
        )
    except ValueError as exc:
        return _usage_error(exc)
    try:
        report = convert_samplebatch(config)
    except (ConvertUsageError, OutputExistsError) as exc:
        return _usage_error(exc)
    print(report.to_text())
    if report.quarantined:
        where = f"{args.output}/{report.quarantine_file}"
        if not args.allow_quarantine:
            print(f"{report.quarantined} record(s) quarantined, see {where}; the dataset was written. "
                  "Pass --allow-quarantine to accept this (exit 0).", file=sys.stderr)
            return 1
        print(f"{report.quarantined} record(s) quarantined (allowed), see {where}", file=sys.stderr)
    return 0


def _usage_error(exc: Exception) -> int:
    print(f"offlinerl convert samplebatch: error: {exc}", file=sys.stderr)
    return 2
