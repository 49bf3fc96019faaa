"""Scaling out (issue 13): every table of benchmarks/README.md's scaling sections, one subcommand each.

    PYTHONPATH=. python benchmarks/scale.py learners --learners 1,2 --out benchmarks/results/scale.json
    PYTHONPATH=. python benchmarks/scale.py memory make|run ...   larger than memory (benchmarks/memory.py)
    PYTHONPATH=. python benchmarks/scale.py convert ...           20M legacy steps on a 2-node cluster (convert_cluster.py)
    PYTHONPATH=. python benchmarks/scale.py startup ...           command to first update (startup.py)
    PYTHONPATH=. python benchmarks/scale.py throughput ...        updates/s against a bare PyTorch loop (throughput.py)
    PYTHONPATH=. python benchmarks/scale.py gpu ...               the learner on one CUDA device (gpu_check.py)
    PYTHONPATH=. python benchmarks/scale.py seeds updates|jobs ...  N seeds as one vectorised learner (vectorized_seeds.py)
    PYTHONPATH=. python benchmarks/scale.py streaming D1 D2 ...   streaming / in-memory, whole commands (streaming_ratio.py)

``learners``: samples/s of ``num_learners`` 1 -> 2 (-> 4 where the CPUs exist), in-memory and
streaming. Each learner is a Ray actor with ``--cpus-per-learner`` CPUs (torch threads = that), batch
256 per learner, 256x256 MLPs, on ``datasets/pendulum-mixed`` (streaming: a copy with every episode repeated, as in
``throughput.py``). samples/s = learners x batch x updates/s over the median of ``--rounds`` timed
iterations after a warm-up; efficiency = samples/s(n) / (n x samples/s(1)). Configurations run one
at a time. On a machine with C cores, n learners of 1 CPU each can at best scale while n < C (Ray Data
and the driver need CPU too), so read the table against the cores it states.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def measure(algorithm: str, dataset: str, mode: str, learners: int, cpus: float, updates: int, rounds: int) -> dict:
    from offlinerl.training.algorithm import Algorithm
    from offlinerl.algorithms.registry import get_algorithm

    cfg = get_algorithm(algorithm).config_cls.from_dict({
        "train_batch_size": 256, "updates_per_iteration": updates, "num_learners": learners,
        "num_cpus_per_learner": cpus, "model": {"hidden": [256, 256]}, "evaluation": {"interval": 0},
        "data": {"mode": mode}})
    t0 = time.perf_counter()
    algo = Algorithm(algorithm, cfg, dataset)
    try:
        algo.training_step()  # warm-up (streams start, DDP buckets are built)
        startup = time.perf_counter() - t0
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            algo.training_step()
            times.append(time.perf_counter() - t)
    finally:
        algo.stop()
    ups = updates / statistics.median(times)
    return {"mode": mode, "learners": learners, "updates_per_s": ups, "samples_per_s": ups * 256 * learners,
            "startup_s": startup}


def learners_main() -> None:
    p = argparse.ArgumentParser(prog="scale.py learners", description="samples/s of num_learners 1 -> 2 (-> 4)")
    p.add_argument("--algorithm", default="bc")
    p.add_argument("--dataset", default=str(REPO / "datasets" / "pendulum-mixed"))
    p.add_argument("--learners", default="1,2")
    p.add_argument("--cpus-per-learner", type=float, default=1.0)
    p.add_argument("--modes", default="in_memory,streaming")
    p.add_argument("--updates", type=int, default=300, help="updates per timed iteration")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--streaming-repeat", type=int, default=20)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "scale.json"))
    args = p.parse_args()

    from benchmarks.throughput import _repeated
    from offlinerl.ray_utils import init_ray

    init_ray()
    import ray

    stream = _repeated(args.dataset, args.streaming_repeat)
    rows = []
    for mode in args.modes.split(","):
        for n in (int(x) for x in args.learners.split(",")):
            row = measure(args.algorithm, args.dataset if mode == "in_memory" else stream, mode, n,
                          args.cpus_per_learner, args.updates, args.rounds)
            base = next((r for r in rows if r["mode"] == mode and r["learners"] == 1), row)
            row["efficiency"] = row["samples_per_s"] / (n * base["samples_per_s"] / base["learners"])
            rows.append(row)
            print(f"{mode:9s} learners {n}: {row['samples_per_s']:,.0f} samples/s ({row['updates_per_s']:.0f} upd/s "
                  f"each), efficiency {row['efficiency']:.2f}, start-up {row['startup_s']:.1f} s", flush=True)
    out = {"algorithm": args.algorithm, "dataset": args.dataset, "cpus_per_learner": args.cpus_per_learner,
           "machine": {"cpus": os.cpu_count(), "ray_cpus": ray.cluster_resources().get("CPU"),
                       "load_avg_1m": os.getloadavg()[0], "platform": platform.platform()},
           "streaming_dataset_repeat": args.streaming_repeat, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print("| mode | learners | samples/s | updates/s per learner | efficiency |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['learners']} | {r['samples_per_s']:,.0f} | {r['updates_per_s']:.0f} | "
              f"{r['efficiency']:.2f} |")


#: Subcommand -> the module whose ``main()`` measures it (``learners`` is this file's own).
SUBCOMMANDS = {"memory": "benchmarks.memory", "convert": "benchmarks.convert_cluster",
               "startup": "benchmarks.startup", "throughput": "benchmarks.throughput", "gpu": "benchmarks.gpu_check",
               "seeds": "benchmarks.vectorized_seeds", "streaming": "benchmarks.streaming_ratio"}


def main() -> None:
    names = ["learners", *SUBCOMMANDS]
    if len(sys.argv) < 2 or sys.argv[1] not in names:
        print(__doc__, file=sys.stderr)
        raise SystemExit(f"give a subcommand: {', '.join(names)}")
    name, rest = sys.argv[1], sys.argv[2:]
    sys.argv = [f"scale.py {name}", *rest]
    if name == "learners":
        learners_main()
    else:
        importlib.import_module(SUBCOMMANDS[name]).main()


if __name__ == "__main__":
    main()
