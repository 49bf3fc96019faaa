"""``offlinerl sweep JOB_FILE --grid KEY=V1,V2 --seeds 0,1,2``: a grid × seeds of training jobs on Ray Tune."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from offlinerl.cli.common import add_address_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="train a grid of job-file settings × seeds as Ray Tune trials, with a summary table and plot",
        description="Run JOB_FILE once per grid point and seed, each trial an `offlinerl train` job scheduled by "
        "Ray Tune on the local Ray or the cluster given by --address. Writes SWEEP_DIR with sweep.json, one run "
        "directory per trial under trials/, summary.csv and summary.md (mean ± std over seeds per grid point) and "
        "sweep.png. An interrupted sweep continues with --resume: finished trials are kept, the others resume "
        "from their newest checkpoint.",
        epilog="examples:\n  offlinerl sweep jobs/pendulum-iql.yaml --grid config.beta=1,3,10 --seeds 0,1,2\n"
        "  offlinerl sweep jobs/cartpole-bc.yaml --grid config.lr=1e-3,3e-4 --grid 'config.model.hidden=[64,64],"
        "[256,256]' --set stop.updates=2000 -o sweeps/bc-lr\n"
        "  offlinerl sweep --resume sweeps/bc-lr\n"
        "  offlinerl sweep jobs/cartpole-iql.yaml --grid config.expectile=0.7,0.9 --seeds 0,1 "
        "--address 10.0.0.1:6379 --max-concurrent 8",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job_file", nargs="?", metavar="JOB_FILE", help="job file (as for offlinerl train); not with --resume")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a dotted job-file key and the values to try (repeatable: the trials are the product); "
                   "commas inside [...] stay with the value")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="config.seed of each trial of a grid point: a list, a range (0-7) or both (default: one "
                   "trial with the job file's seed)")
    p.add_argument("--vectorize", action="store_true",
                   help="train each grid point's seeds (consecutive: e.g. --seeds 0-7) as one job of one vectorised "
                   "learner (config.num_seeds; docs/training.md): trials/<point>/seed-<s>/ are its trials, and an "
                   "interrupted point trains all its seeds again on --resume")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a job-file value in every trial, e.g. stop.updates=2000 (repeatable)")
    p.add_argument("--output", "-o", help="sweep directory to create (default: sweeps/<job file name>-<UTC time>)")
    p.add_argument("--resume", metavar="SWEEP_DIR",
                   help="continue the interrupted sweep in SWEEP_DIR (refused, before anything is written, if a "
                   "symbolic link in it points outside it)")
    p.add_argument("--max-concurrent", type=int, default=None, metavar="N",
                   help="trials at once (default: what the cluster's CPUs hold, one CPU per trial for its data)")
    p.add_argument("--cpus-per-trial", type=float, default=1.0, metavar="C",
                   help="CPUs Tune reserves for each trial's training process (default 1; the trial's learner "
                   "actors and Ray Data tasks take their own); refused, before anything runs, above the CPUs of "
                   "the local Ray or of the cluster's largest node")
    add_address_option(p)
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines (one per finished trial; a running trial's updates, rate, time left and last "
                        "evaluation at most once a minute)")
    p.add_argument("--skip-validation", action="store_true",
                   help="do not validate the datasets first (by default the sweep validates each trial's dataset, "
                   "each distinct one once, before any trial starts; a trial whose dataset has errors is not run "
                   "and counts as failed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from offlinerl.config_io import ConfigError
    from offlinerl.jobs.sweep import SweepSpec, parse_grid, parse_seeds, plan_trials, resume_sweep, run_sweep
    from offlinerl.jobs.sweep.trials import check_trial_resources

    if (args.job_file is None) == (args.resume is None):
        print("offlinerl sweep: give a JOB_FILE, or --resume SWEEP_DIR (not both)", file=sys.stderr)
        return 2
    if args.resume and (args.grid or args.seeds or args.overrides or args.output or args.vectorize):
        print("offlinerl sweep: a resumed sweep keeps its grid, seeds and settings; drop --grid/--seeds/--set/-o/"
              "--vectorize",
              file=sys.stderr)
        return 2
    if args.max_concurrent is not None and args.max_concurrent < 1:
        print(f"offlinerl sweep: --max-concurrent must be >= 1, got {args.max_concurrent}", file=sys.stderr)
        return 2
    options = {"max_concurrent": args.max_concurrent, "cpus_per_trial": args.cpus_per_trial, "address": args.address,
               "skip_validation": args.skip_validation, "log": (lambda s: None) if args.no_progress else print}
    try:
        # before anything is read or started: a trial reservation no node can hold would wait forever
        check_trial_resources(args.cpus_per_trial, args.address)
        if args.resume:
            summary = resume_sweep(args.resume, **options)
        else:
            grid = parse_grid(args.grid)
            seeds = parse_seeds(args.seeds)
            trials = plan_trials(grid, seeds, args.overrides, vectorize=args.vectorize)
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            out = Path(args.output or Path("sweeps") / f"{Path(args.job_file).stem}-{stamp}")
            spec = SweepSpec(job=str(Path(args.job_file).resolve()), workdir=os.getcwd(),
                             overrides=list(args.overrides), grid=grid, seeds=seeds, trials=trials,
                             vectorize=args.vectorize)
            summary = run_sweep(out, spec, **options)
    except ConfigError as exc:
        print(f"offlinerl sweep: {exc}", file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"offlinerl sweep: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("offlinerl sweep: interrupted; continue with  offlinerl sweep --resume SWEEP_DIR", file=sys.stderr)
        return 130
    root = Path(summary["sweep_dir"])
    print((root / "summary.md").read_text().rstrip())
    best = summary["best"]
    if best is not None:
        print(f"best final return: {best['final_eval_return_mean']:.1f} at "
              + (", ".join(f"{k}={best[k]}" for k in summary["keys"]) or "the job file's settings"))
    print(f"sweep directory: {root}  (summary.csv, summary.md, sweep.png, trials/)")
    for name, why in summary["invalid"].items():
        print(f"offlinerl sweep: trial {name} not run: {why}", file=sys.stderr)
    if summary["failed"]:
        print(f"offlinerl sweep: {len(summary['failed'])} trial(s) failed: {', '.join(summary['failed'])} (their "
              f"logs: {root / 'trials'}/<name>.log); continue with  offlinerl sweep --resume {root}", file=sys.stderr)
        return 1
    return 0
