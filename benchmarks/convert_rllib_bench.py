"""Throughput of ``convert rllib-parquet`` on a large synthetic per-step recording.

Replicates the shared CartPole per-step fixture (packed obs, Ray tensor column)
N times with fresh eps_ids into a temporary recording, converts it, and writes
steps/s to ``benchmarks/results/convert_rllib.json``. Run by hand:

    PYTHONPATH=. python benchmarks/convert_rllib_bench.py --copies 50
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "rllib_newstack"


def make_recording(root: Path, copies: int, layout: str) -> int:
    src = FIXTURE / ("cartpole_columns" if layout == "columns" else "cartpole_episodes")
    files = sorted(src.glob("**/*.parquet"))
    rows = 0
    for c in range(copies):
        for i, f in enumerate(files):
            table = pq.read_table(f)
            if layout == "columns":
                table = table.set_column(0, "eps_id", pc.binary_join_element_wise(table.column("eps_id"), f"-{c}", ""))
            out = root / f"run-{c:05d}" / f"{i:05d}.parquet"
            out.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, out)
            rows += table.num_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--layout", choices=("columns",), default="columns")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    from offlinerl.convert.rllib.convert import convert_rllib_parquet
    from offlinerl.ray_utils import init_ray

    init_ray(num_cpus=args.num_cpus)
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "rec"
        rows = make_recording(rec, args.copies, args.layout)
        start = time.perf_counter()
        report = convert_rllib_parquet(rec, Path(tmp) / "out", env_id="CartPole-v1")
        seconds = time.perf_counter() - start
    result = {
        "layout": args.layout, "rows": rows, "episodes": report.episodes, "steps": report.steps,
        "seconds": round(seconds, 2), "steps_per_s": round(report.steps / seconds),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "num_cpus": args.num_cpus, "machine": platform.machine(), "python": platform.python_version(),
    }
    out = Path(__file__).parent / "results" / "convert_rllib.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
