"""``offlinerl finetune JOB_FILE --from CHECKPOINT``: continue an offline checkpoint online
(``--resume RUN_DIR``: continue a stopped or killed fine-tuning job; ``--record DIR``: also write the online
episodes as an episode dataset)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from offlinerl.cli import STARTED_AT
from offlinerl.cli.common import add_device_option, add_job_options, device_problem, overwrite_help
from offlinerl.cli.summary import finetune_summary

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "finetune",
        help="fine-tune an offline checkpoint with online experience",
        description="Start from an offline checkpoint (module, optimizers, connector state) and keep training with "
        "experience gathered by EnvRunners in the real env, mixed with the offline dataset in a replay buffer "
        "(IQL, CQL), or as MARWIL on complete online episodes. Writes a run directory with config.yaml, "
        "metrics.jsonl, checkpoints (with the replay, so --resume continues exactly), learning_curve.png, result.json, and the "
        "online episodes as a dataset (--record DIR, else RUN/online-episodes).",
        epilog="examples:\n  offlinerl finetune jobs/pendulum-iql-finetune.yaml --from runs/iql/checkpoints/final "
        "--record data/pendulum-online\n"
        "  offlinerl finetune --resume runs/pendulum-iql-finetune-20261201T101500Z --set stop.iterations=20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_file", nargs="?", metavar="JOB_FILE",
                   help="fine-tuning job file (e.g. jobs/pendulum-iql-finetune.yaml); not with --resume")
    p.add_argument("--from", dest="checkpoint", help="offline checkpoint directory (overrides the file's checkpoint)")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the stopped or killed fine-tuning job in RUN_DIR from its newest checkpoint (its "
                   "replay included; --set may only change stop.*, checkpoint_interval, checkpoint_keep)")
    p.add_argument("--record", metavar="DIR",
                   help="write every online episode to DIR, a new episode dataset (validated by `offlinerl "
                   "validate`; episodes running at the end are stored as truncated)")
    p.add_argument("--overwrite", action="store_true", help=overwrite_help(target="the --record directory"))
    add_job_options(p, "online.online_fraction=0.25")
    add_device_option(p, "the learners compute; the same as --set config.device=DEVICE (cuda with remote learners: "
                      "one GPU each)",
                      default="the config's: a GPU when config.num_gpus_per_learner > 0, else the CPU")
    p.set_defaults(func=run)


def _usage(args: argparse.Namespace) -> str | None:
    if (args.job_file is None) == (args.resume is None):
        return "give a JOB_FILE, or --resume RUN_DIR (not both)"
    if args.resume and (args.output or args.checkpoint or args.record):
        return "--resume continues in RUN_DIR itself, from its own checkpoint and recording; drop --output, --from, --record"
    if args.resume and args.device:
        return "a resumed job keeps its config (its device too); drop --device"
    return device_problem(args.device, learners=True)


def run(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from offlinerl.training.checkpoint import CheckpointError
    from offlinerl.config_io import ConfigError
    from offlinerl.jobs.guards import NonFiniteLossError
    from offlinerl.jobs.spec import load_finetune_run, load_finetune_spec
    from offlinerl.jobs.finetune import run_finetune
    from offlinerl.episodes.atomic import OutputExistsError
    from offlinerl.ray_utils import quiet_ray_data

    problem = _usage(args)
    if problem:
        print(f"offlinerl finetune: {problem}", file=sys.stderr)
        return 2
    if args.device:
        args.overrides = [*args.overrides, f"config.device={args.device}"]
    try:
        if args.resume:
            job, checkpoint = load_finetune_run(args.resume, args.overrides)
        else:
            job, checkpoint = load_finetune_spec(args.job_file, args.overrides, checkpoint=args.checkpoint), None
            if args.record:
                job = dataclasses.replace(job, record=args.record)
    except ConfigError as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 2
    except (CheckpointError, ValueError) as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 1
    quiet_ray_data()
    try:
        result = run_finetune(job, run_dir=args.resume or args.output, resume_from=checkpoint,
                              overwrite=args.overwrite, address=args.address, progress=not args.no_progress,
                              skip_validation=args.skip_validation, started_at=STARTED_AT)
    except (ConfigError, OutputExistsError) as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError, ValueError, NonFiniteLossError, gym.error.Error) as exc:
        print(f"offlinerl finetune: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("offlinerl finetune: interrupted", file=sys.stderr)
        return 130
    print(finetune_summary(result))
    return 0
