"""``offlinerl finetune PIPELINE.yaml --from CHECKPOINT``: continue an offline checkpoint online."""

from __future__ import annotations

import argparse
import json
import sys

from offlinerl.cli.common import add_job_options

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "finetune",
        help="fine-tune an offline checkpoint with online experience",
        description="Start from an offline checkpoint (module, optimizers, connector state) and keep training with "
        "experience gathered by EnvRunners in the real env, mixed with the offline dataset in a replay buffer "
        "(IQL, CQL), or as MARWIL on complete online episodes. Writes a run directory with config.yaml, "
        "metrics.jsonl, the final checkpoint, the online episodes as a dataset, and result.json.",
        epilog="example: offlinerl finetune pipelines/pendulum-iql-finetune.yaml --from runs/iql/checkpoints/final",
    )
    p.add_argument("pipeline", help="fine-tuning pipeline file (e.g. pipelines/pendulum-iql-finetune.yaml)")
    p.add_argument("--from", dest="checkpoint", help="offline checkpoint directory (overrides the file's checkpoint)")
    add_job_options(p, "online.online_fraction=0.25")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from offlinerl.algorithms.config_io import ConfigError
    from offlinerl.algorithms.guards import NonFiniteLossError
    from offlinerl.algorithms.online.config import load_finetune_pipeline
    from offlinerl.algorithms.online.finetune import run_finetune

    try:
        pipeline = load_finetune_pipeline(args.pipeline, args.overrides, checkpoint=args.checkpoint)
        result = run_finetune(pipeline, run_dir=args.output, address=args.address, progress=not args.no_progress,
                              skip_validation=args.skip_validation)
    except ConfigError as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError, ValueError, NonFiniteLossError, gym.error.Error) as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0
