"""``offlinerl train PIPELINE.yaml``: run a batch training job."""

from __future__ import annotations

import argparse
import sys

from offlinerl.cli.common import add_job_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train an algorithm on an episode dataset, as described by a pipeline file",
        description="Train an algorithm on an episode dataset as described by PIPELINE (YAML or JSON: algorithm, "
        "dataset, config, stop conditions, output). Writes a run directory with the resolved config, metrics.jsonl, "
        "TensorBoard logs, checkpoints, learning_curve.png and result.json.",
        epilog="example: offlinerl train pipelines/cartpole-bc.yaml --set config.lr=3e-4 --set stop.updates=2000",
    )
    p.add_argument("pipeline", help="pipeline file (e.g. pipelines/cartpole-bc.yaml)")
    add_job_options(p, "config.lr=3e-4 or stop.updates=1000")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.algorithms.config_io import ConfigError
    from offlinerl.algorithms.guards import NonFiniteLossError
    from offlinerl.algorithms.pipeline import load_pipeline, run_pipeline
    from offlinerl.ray_utils import quiet_ray_data

    try:
        pipeline, config = load_pipeline(args.pipeline, args.overrides)
    except ConfigError as exc:
        print(f"offlinerl train: {exc}", file=sys.stderr)
        return 2
    quiet_ray_data()  # keep the progress bar readable
    try:
        result = run_pipeline(pipeline, config, run_dir=args.output, address=args.address, progress=not args.no_progress,
                              skip_validation=args.skip_validation)
    except (FileExistsError, FileNotFoundError, ValueError, NonFiniteLossError) as exc:
        print(f"offlinerl train: {exc}", file=sys.stderr)
        return 1
    print(_summary(result))
    return 0


def _summary(r: dict) -> str:
    lines = [f"{r['algorithm']} on {r['dataset']}: {r['updates']} updates in {r['train_time_s']:.1f} s "
             f"({r['updates_per_s']:.0f} updates/s)"]
    if r["final_eval_return"] is None:
        lines.append("no evaluation (several modules: a multi-agent dataset)")
    else:
        lines.append(f"evaluation in {r['env']} ({r['eval_episodes']} episodes): final return {r['final_eval_return']:.1f} "
                     f"± {r['final_eval_return_std']:.1f}, best {r['best_eval_return']:.1f}")
    if "final_eval_normalized_score" in r:
        lines.append(f"normalised score (0 = random, 100 = best in dataset): final {r['final_eval_normalized_score']:.1f}, "
                     f"best {r['best_eval_normalized_score']:.1f}")
    lines.append(f"run directory: {r['run_dir']}  (checkpoint: {r['checkpoint']})")
    return "\n".join(lines)


