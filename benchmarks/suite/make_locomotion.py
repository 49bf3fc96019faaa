"""Train the SAC agents of the locomotion family and ship their medium / expert actors, or generate a dataset.

    python benchmarks/suite/make_locomotion.py --train hopper      # the agent (~16 min) into --runs, then
                                                    # offlinerl/benchmark/policies/hopper-{medium,expert}.pt
    python benchmarks/suite/make_locomotion.py hopper-medium /tmp/hopper-medium --steps 100000 --seed 0

A dataset is written from the shipped actors (``medium``, ``medium-expert``) or from the agent's run
(``medium-replay``: ``--runs`` must hold it). The same actors, steps and seed write the same parquet bytes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from offlinerl.benchmark import locomotion as L


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name", nargs="?", help="the dataset, <env>-<level> (e.g. hopper-medium-replay)")
    p.add_argument("out", nargs="?", type=Path, help="the dataset directory to write")
    p.add_argument("--steps", type=int, default=100_000, help="env steps per policy level (default 100,000)")
    p.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    p.add_argument("--runs", type=Path, default=Path("benchmarks/runs/locomotion-data/_agents"),
                   help="where the agents' run directories are (default benchmarks/runs/locomotion-data/_agents: "
                   "what offlinerl benchmark locomotion --data-dir benchmarks/runs/locomotion-data reads)")
    p.add_argument("--train", choices=sorted(L.TASKS), help="train this env's agent and ship its actors")
    p.add_argument("--budget", choices=sorted(L.AGENT_BUDGETS), default="shipped", help="the agent's budget")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset at OUT")
    args = p.parse_args(argv)
    if args.train:
        task = L.TASKS[args.train]
        budget = task.budget(args.budget)
        run = args.runs / f"{task.name}-{args.budget}"
        started = time.perf_counter()
        result = L.train_agent(task, run, budget, log=lambda m: print(m, flush=True))
        seconds = time.perf_counter() - started
        print(f"{task.name}: trained in {seconds:.0f} s, final evaluation {result['final_eval_return']:.1f}", flush=True)
        dest = L.POLICIES if args.budget == "shipped" else run / "policies"  # only the shipped budget is shipped
        record = L.export_policies(task, run, budget, dest, budget_name=args.budget, train_s=round(seconds, 1))
        print(f"{task.name}: medium {record['medium']} expert {record['expert']}", flush=True)
        return 0
    if args.name is None or args.out is None:
        p.error("give NAME and OUT (or --train ENV)")
    L.generate_locomotion(args.name, args.out, steps=args.steps, seed=args.seed, agents=args.runs,
                          overwrite=args.overwrite, log=print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
