"""``offlinerl train JOB_FILE``: run a batch training job."""

from __future__ import annotations

import argparse
import sys

from offlinerl.cli import STARTED_AT
from offlinerl.cli.common import add_device_option, add_job_options, device_problem
from offlinerl.cli.summary import train_summary, vectorized_summary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train an algorithm on an episode dataset, as described by a job file",
        description="Train an algorithm on an episode dataset as described by JOB_FILE (YAML or JSON: algorithm, "
        "dataset, config, stop conditions, output). Writes a run directory with the resolved config, metrics.jsonl, "
        "TensorBoard logs, checkpoints, learning_curve.png and result.json.",
        epilog="examples:\n  offlinerl train jobs/cartpole-bc.yaml --set config.lr=3e-4 --set stop.updates=2000\n"
        "  offlinerl train --resume runs/cartpole-bc-20261201T101500Z --set stop.updates=6000\n"
        "  offlinerl train jobs/cartpole-bc.yaml --select-by fqe --set config.data.holdout.fraction=0.2 "
        "--set checkpoint_interval=2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_file", nargs="?", metavar="JOB_FILE",
                   help="job file (e.g. jobs/cartpole-bc.yaml); not with --resume")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the stopped or killed job in RUN_DIR from its newest checkpoint (metrics.jsonl is "
                   "kept up to that checkpoint; --set may only change stop.*, checkpoint_interval, checkpoint_keep)")
    p.add_argument("--select-by", metavar="METHOD", choices=("fqe", "is", "wis", "pdis", "dr"),
                   help="after training, score the periodic checkpoints by this OPE estimator on the held-out "
                   "episodes (needs config.data.holdout and checkpoint_interval) and name the best in result.json; "
                   "the same as --set config.evaluation.ope=METHOD (see docs/ope.md)")
    add_job_options(p, "config.lr=3e-4 or stop.updates=1000")
    add_device_option(p, "the learners compute; the same as --set config.device=DEVICE (cuda with remote learners: "
                      "one GPU each)",
                      default="the config's: a GPU when config.num_gpus_per_learner > 0, else the CPU")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.training.checkpoint import CheckpointError
    from offlinerl.config_io import ConfigError
    from offlinerl.jobs.guards import NonFiniteLossError
    from offlinerl.jobs.spec import load_job_run, load_job_spec
    from offlinerl.jobs.train import run_train
    from offlinerl.ray_utils import ray_failure

    if (args.job_file is None) == (args.resume is None):
        print("offlinerl train: give a JOB_FILE, or --resume RUN_DIR (not both)", file=sys.stderr)
        return 2
    if args.resume and args.output:
        print("offlinerl train: --resume continues in RUN_DIR itself; drop --output", file=sys.stderr)
        return 2
    if args.resume and args.select_by:
        print("offlinerl train: a resumed job keeps its config (and selects again if it did); drop --select-by",
              file=sys.stderr)
        return 2
    if args.resume and args.device:
        print("offlinerl train: a resumed job keeps its config (its device too); drop --device", file=sys.stderr)
        return 2
    if (problem := device_problem(args.device, learners=True)) is not None:
        print(f"offlinerl train: {problem}", file=sys.stderr)
        return 2
    if args.device:
        args.overrides = [*args.overrides, f"config.device={args.device}"]
    if args.select_by:
        args.overrides = [*args.overrides, f"config.evaluation.ope={args.select_by}"]
    try:
        if args.resume:
            job, config, checkpoint = load_job_run(args.resume, args.overrides)
        else:
            job, config = load_job_spec(args.job_file, args.overrides)
            checkpoint = None
    except ConfigError as exc:
        print(f"offlinerl train: {exc}", file=sys.stderr)
        return 2
    except (CheckpointError, ValueError) as exc:
        print(f"offlinerl train: {exc}", file=sys.stderr)
        return 1
    try:
        result = run_train(job, config, run_dir=args.resume or args.output, resume_from=checkpoint,
                              address=args.address, progress=not args.no_progress,
                              skip_validation=args.skip_validation, started_at=STARTED_AT)
    except (FileExistsError, FileNotFoundError, ValueError, NonFiniteLossError) as exc:
        print(f"offlinerl train: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("offlinerl train: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - e.g. an env that crashes mid-evaluation: the state is saved above
        if ray_failure(exc) is not None:
            raise  # offlinerl.cli.main says it in one line: Ray failed, not the job's data or config
        print(f"offlinerl train: the job failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(vectorized_summary(result) if result.get("vectorized") else train_summary(result))
    return 0
