"""Vectorised seeds (issue 28, item 1): N seeds as one stacked learner against N single-seed runs.

    PYTHONPATH=. python benchmarks/scale.py seeds updates --seeds 8 --out benchmarks/results/vectorized_seeds_updates.json
    PYTHONPATH=. python benchmarks/scale.py seeds jobs --seeds 8 --out benchmarks/results/vectorized_seeds_jobs.json

``updates``: the learners alone, in this process. For each algorithm and MLP width: one single-seed learner's
updates/s with 1 torch thread (what a job with the default ``num_cpus_per_learner: 1`` runs) and with every
core, and a ``SeedStack`` of N replicas' seed-updates/s (N x its updates/s) with every core (what a job of
``num_seeds: N`` runs), on batches of 256 drawn from ``datasets/pendulum-mixed`` (each replica its own sampler),
alternated round by round so the machine's load hits them alike; ratio = stacked / single (1 thread) = the
total-throughput gain over N sequential jobs, start-up excluded.

``jobs``: whole commands as a user runs them, start-up and evaluations included. ``offlinerl train JOB
--set config.num_seeds=N`` once, against ``offlinerl train JOB --set config.seed=s`` for s = 0..N-1 one after
another; total updates / wall seconds of each.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = {"bc": "jobs/cartpole-bc.yaml", "iql": "jobs/pendulum-iql.yaml", "td3bc": "jobs/pendulum-td3bc.yaml"}


def _learners(algorithm: str, hidden: int, seeds: list[int], dataset: str, precision: str = "fp32"):
    from offlinerl.algorithms.registry import get_algorithm
    from offlinerl.data.sources import InMemorySource
    from offlinerl.training.algorithm import Algorithm

    spec = get_algorithm(algorithm)
    out = []
    for s in seeds:
        cfg = spec.config_cls.from_dict({"seed": s, "train_batch_size": 256, "model": {"hidden": [hidden, hidden]},
                                         "evaluation": {"interval": 0}, "precision": precision})
        algo = Algorithm(algorithm, cfg, dataset, use_ray=False, validate_data=False)
        learner = algo.learner_group.local_learner
        out.append((learner, InMemorySource(algo.offline_data.load_arrays(), 256, s)))
        algo.stop()
    return out


def updates_main(args: argparse.Namespace) -> dict:
    import torch

    from offlinerl.core.seed_stack import SeedStack

    cpus = os.cpu_count() or 1
    rows = []
    for algorithm in args.algorithms.split(","):
        for hidden in (int(h) for h in args.hidden.split(",")):
            seeds = list(range(args.seeds))
            (single, single_src), = _learners(algorithm, hidden, [100], args.dataset, args.precision)
            pairs = _learners(algorithm, hidden, seeds, args.dataset, args.precision)
            stack = SeedStack([lr for lr, _ in pairs])
            sources = [src for _, src in pairs]
            single.run_updates(single_src, 20)
            stack.run_updates(sources, 20)  # warm-up
            singles: dict[int, list[float]] = {1: [], cpus: []}
            stacks = []
            for _ in range(args.rounds):
                for threads in singles:  # 1: what a single-seed job runs (num_cpus_per_learner: 1)
                    torch.set_num_threads(threads)
                    t = time.perf_counter()
                    single.run_updates(single_src, args.updates)
                    singles[threads].append(args.updates / (time.perf_counter() - t))
                torch.set_num_threads(cpus)  # what a vectorised job of N seeds runs (offlinerl.jobs.vectorized)
                t = time.perf_counter()
                stack.run_updates(sources, args.updates)
                stacks.append(args.seeds * args.updates / (time.perf_counter() - t))
            row = {"algorithm": algorithm, "hidden": hidden, "seeds": args.seeds, "cpus": cpus, "precision": args.precision,
                   "single_updates_per_s": statistics.median(singles[1]),
                   f"single_{cpus}_threads_updates_per_s": statistics.median(singles[cpus]),
                   "stacked_seed_updates_per_s": statistics.median(stacks)}
            row["ratio"] = row["stacked_seed_updates_per_s"] / row["single_updates_per_s"]
            row[f"ratio_vs_{cpus}_threads"] = row["stacked_seed_updates_per_s"] / row[f"single_{cpus}_threads_updates_per_s"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"kind": "updates", "rows": rows}


def _command(job: str, sets: list[str], out: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "offlinerl", "train", job, "--no-progress", "--output", str(out),
           *[a for s in sets for a in ("--set", s)]]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    return wall, json.loads((out / "result.json").read_text())


def jobs_main(args: argparse.Namespace) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algorithm in args.algorithms.split(","):
            job = JOBS[algorithm]
            budget = [f"stop.updates={args.job_updates}"]
            vec_wall, vec = _command(job, [*budget, f"config.num_seeds={args.seeds}"], Path(tmp) / f"{algorithm}-vec")
            seq_wall, seq_updates, seq_returns = 0.0, 0, []
            for s in range(args.seeds):
                wall, r = _command(job, [*budget, f"config.seed={s}"], Path(tmp) / f"{algorithm}-{s}")
                seq_wall += wall
                seq_updates += r["updates"]
                seq_returns.append(r["final_eval_return"])
            row = {"algorithm": algorithm, "job": job, "seeds": args.seeds, "updates_per_seed": args.job_updates,
                   "vectorized_wall_s": vec_wall, "sequential_wall_s": seq_wall,
                   "vectorized_updates_per_s": vec["updates"] / vec_wall,
                   "sequential_updates_per_s": seq_updates / seq_wall,
                   "vectorized_final_return_mean": vec["final_eval_return_mean"],
                   "sequential_final_return_mean": statistics.fmean(r for r in seq_returns if r is not None)}
            row["ratio"] = seq_wall / vec_wall
            print(json.dumps(row), flush=True)
            rows.append(row)
    return {"kind": "jobs", "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(prog="scale.py seeds", description=__doc__.split("\n")[0])
    p.add_argument("kind", choices=("updates", "jobs"))
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--algorithms", default="bc,iql,td3bc")
    p.add_argument("--hidden", default="64,128,256", help="updates: MLP widths (two hidden layers each)")
    p.add_argument("--dataset", default=str(REPO / "datasets" / "pendulum-mixed"))
    p.add_argument("--updates", type=int, default=200, help="updates: updates per timed round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--job-updates", type=int, default=2000, help="jobs: stop.updates of every run")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="updates: config.precision of every learner, single and stacked alike")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    t0 = time.time()
    result = updates_main(args) if args.kind == "updates" else jobs_main(args)
    result.update({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                   "torch_threads": __import__("torch").get_num_threads(),
                   "wall_s": time.time() - t0, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
