"""Streaming against in-memory through whole `offlinerl train` commands, at several update budgets (issue 28, item 3).

    PYTHONPATH=. python benchmarks/memory.py make --steps 1000000 -o /tmp/pendulum-1M
    PYTHONPATH=. python benchmarks/memory.py make --steps 5000000 --seed 1 -o /tmp/pendulum-5M
    PYTHONPATH=. python benchmarks/scale.py streaming /tmp/pendulum-1M /tmp/pendulum-5M --updates 16000,100000 \\
        --rounds 2 --out benchmarks/results/streaming_ratio.json

Each (dataset, budget) runs ``jobs/pendulum-bc.yaml`` (BC, 64x64, batch 256, 500 updates per iteration, one torch
thread) with ``config.data.mode=streaming`` and ``=in_memory`` in turn, ``--rounds`` times, alternating, one command
at a time, no evaluation during training (the final 20-episode one stays, in both). Recorded per command, from its
``result.json`` and ``metrics.jsonl``: updates/s over training time (the job's figure), the steady rate (iterations 2
onward: the first holds a stream's start), the first iteration's seconds, seconds to the first update, and the
command's wall time. The ratios are streaming / in-memory of the medians. A streaming job pays once for its stream's
start (Ray Data's split coordinator and first read, ~2 s here) where an in-memory one reads its data before the clock
starts, so the job's figure depends on the budget and the steady rate does not; the table gives both, and the wall
time of the whole command.
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
MODES = ("streaming", "in_memory")


def run_one(dataset: str, mode: str, updates: int, job: str) -> dict:
    """One ``offlinerl train`` command; its figures."""
    with tempfile.TemporaryDirectory(prefix="streaming-ratio-") as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "offlinerl", "train", job, "-q", "-o", str(out), "--set", f"dataset={dataset}",
               "--set", f"config.data.mode={mode}", "--set", f"stop.updates={updates}",
               "--set", "config.evaluation.interval=0"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        wall = time.perf_counter() - t
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        result = json.loads((out / "result.json").read_text())
        iters = [json.loads(line)["perf/iteration_s"] for line in (out / "metrics.jsonl").read_text().splitlines()
                 if line.strip() and "perf/iteration_s" in line]
    per_iter = updates / len(iters)
    return {"dataset": Path(dataset).name, "mode": mode, "updates": updates, "wall_s": round(wall, 2),
            "updates_per_s": round(result["updates_per_s"], 1), "train_time_s": round(result["train_time_s"], 2),
            "steady_updates_per_s": round(per_iter * (len(iters) - 1) / sum(iters[1:]), 1) if len(iters) > 1 else None,
            "first_iteration_s": round(iters[0], 2), "first_update_s": round(result["first_update_s"], 2)}


def _median(values: list) -> float | None:
    """The median of the values that are not None (a budget of one iteration has no steady rate); None if none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def ratios(rows: list[dict]) -> list[dict]:
    """Per (dataset, budget): medians of each mode and streaming / in-memory."""
    table = []
    for key in dict.fromkeys((r["dataset"], r["updates"]) for r in rows):
        med = {m: {f: _median([r[f] for r in rows if (r["dataset"], r["updates"]) == key and r["mode"] == m])
                   for f in ("updates_per_s", "steady_updates_per_s", "wall_s", "first_update_s")} for m in MODES}
        s, i = med["streaming"], med["in_memory"]
        steady = (s["steady_updates_per_s"] / i["steady_updates_per_s"]
                  if s["steady_updates_per_s"] and i["steady_updates_per_s"] else None)  # None: a one-iteration budget
        table.append({"dataset": key[0], "updates": key[1], "streaming": s, "in_memory": i,
                      "job_ratio": s["updates_per_s"] / i["updates_per_s"], "steady_ratio": steady,
                      "wall_ratio": i["wall_s"] / s["wall_s"]})
    return table


def markdown(table: list[dict]) -> str:
    lines = ["| dataset | updates | streaming: job upd/s (steady) | in-memory: job (steady) | streaming / in-memory: "
             "job | steady | wall s, streaming / in-memory (ratio) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for t in table:
        s, i = t["streaming"], t["in_memory"]
        steady = "—" if t["steady_ratio"] is None else f"{t['steady_ratio']:.2f}"
        lines.append(f"| {t['dataset']} | {t['updates']:,} | {s['updates_per_s']:,.0f} ({_rate(s['steady_updates_per_s'])}) "
                     f"| {i['updates_per_s']:,.0f} ({_rate(i['steady_updates_per_s'])}) | **{t['job_ratio']:.2f}** "
                     f"| {steady} | {s['wall_s']:.1f} / {i['wall_s']:.1f} ({t['wall_ratio']:.2f}) |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="scale.py streaming", description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="+", help="episode datasets (memory.py make)")
    p.add_argument("--updates", default="16000,100000", help="comma-separated update budgets")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--job", default=str(REPO / "jobs" / "pendulum-bc.yaml"))
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "streaming_ratio.json"))
    args = p.parse_args()
    budgets = [int(x) for x in args.updates.split(",")]
    rows: list[dict] = []
    t0 = time.perf_counter()
    for dataset in args.datasets:
        for updates in budgets:
            for rnd in range(1, args.rounds + 1):
                for mode in MODES:
                    row = {**run_one(dataset, mode, updates, args.job), "round": rnd}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    table = ratios(rows)
    out = {"date": time.strftime("%Y-%m-%d"), "job": args.job, "rounds": args.rounds, "wall_s": round(time.perf_counter() - t0),
           "machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0], "platform": platform.platform()},
           "rows": rows, "table": table}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(markdown(table))


if __name__ == "__main__":
    main()
