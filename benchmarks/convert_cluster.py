"""Conversion at scale: a generated legacy SampleBatch corpus converted on a local Ray and on a 2-node cluster.

    PYTHONPATH=. python benchmarks/convert_cluster.py --steps 20000000 --files 40 \\
        --out benchmarks/results/convert_cluster.json [--keep-input /data/legacy-20M]

The corpus is ``convert_bench.generate``'s (CartPole-shaped RLlib ``JsonWriter`` lines of 1,000 steps: packed
``obs``/``new_obs``, plain actions, rewards, flags, infos and PPO extra columns; episodes of 500 steps, so
episodes span lines and files), in ``--files`` files. It is converted twice with ``offlinerl convert
samplebatch`` as a separate process, as a user runs it: once starting its own local Ray (the machine's CPUs),
once joining a cluster of a head and ``--workers`` worker nodes (``examples/local_cluster.py``, ``--num-cpus``
CPUs each). Twice a second the PSS of each process tree is sampled: the convert command (the driver, plus its
own Ray when local) and, on the cluster, each node (``ray start --block`` and everything under it: GCS, raylet,
workers). Reported: steps/s, the peak of each tree, and the nodes the report says the work ran on. The output
is checked: every step converted. On one machine the nodes share its cores, so the
cluster shows that the work spreads and memory per node stays flat, not more steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]  # the checkout's package (src/ layout) and its helpers

from benchmarks.convert_bench import generate  # noqa: E402
from benchmarks.memory import tree_pss  # noqa: E402
from examples import local_cluster  # noqa: E402


def convert(src: Path, out: Path, trees: dict[str, int], env: dict[str, str], address: str | None, log: Path) -> dict:
    """Run the conversion; ``trees``: name -> root pid of the node trees to sample besides the driver's."""
    cmd = [sys.executable, "-m", "offlinerl.cli", "convert", "samplebatch", str(src), "-o", str(out),
           "--env", "CartPole-v1"] + (["--address", address] if address else [])
    env = {**env, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=env)
        peaks = {name: 0 for name in ["driver", *trees]}
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                for name, pid in [("driver", proc.pid), *trees.items()]:
                    peaks[name] = max(peaks[name], sum(b for _, b in tree_pss(pid)))
                stop.wait(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        stop.set()
        sampler.join()
    seconds = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    info = json.loads((out / "dataset.json").read_text()) if (out / "dataset.json").exists() else {}
    nodes = re.search(r"ray nodes:\s+(\d+)", text)
    return {"exit_code": rc, "convert_s": seconds, "steps": info.get("num_steps"),
            "steps_per_s": info.get("num_steps", 0) / seconds, "episodes": info.get("num_episodes"),
            "ray_nodes": int(nodes.group(1)) if nodes else None,  # None: the report named no nodes
            "peak_pss_mib": {k: v / 2**20 for k, v in peaks.items()},
            "output_mib": sum(f.stat().st_size for f in out.glob("*.parquet")) / 2**20}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000_000)
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--workers", type=int, default=1, help="worker nodes besides the head")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of each cluster node")
    p.add_argument("--modes", default="local,cluster")
    p.add_argument("--tmp", default=None, help="where the corpus and outputs go (default: system temp dir)")
    p.add_argument("--keep-input", default=None, help="reuse (or generate into and keep) the corpus here")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "convert_cluster.json"))
    a = p.parse_args()

    base = Path(tempfile.mkdtemp(prefix="convert-cluster-", dir=a.tmp))
    src = Path(a.keep_input) if a.keep_input else base / "legacy"
    rows = []
    try:
        t0 = time.perf_counter()
        if not (src.is_dir() and any(src.iterdir())):
            generate(src, a.steps, a.files, fragment=1000, episode_len=500)
        input_mib = sum(f.stat().st_size for f in src.iterdir()) / 2**20
        print(f"corpus: {a.steps:,} steps, {a.files} files, {input_mib:,.0f} MiB ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        for mode in a.modes.split(","):
            out = base / f"out-{mode}"
            if mode == "local":
                row = convert(src, out, {}, dict(os.environ), None, base / "local.log")
                row["nodes"] = 1
            else:
                root = Path(tempfile.mkdtemp(prefix="cc-", dir="/tmp"))  # short: Ray's socket paths live under it
                info = local_cluster.up(root, workers=a.workers, head_cpus=a.num_cpus, worker_cpus=a.num_cpus,
                                        env={"PYTHONPATH": str(REPO)})
                try:
                    trees = {n["name"]: n["pid"] for n in info["nodes"]}
                    row = convert(src, out, trees, local_cluster.client_env(root), info["address"],
                                  base / "cluster.log")
                finally:
                    local_cluster.down(root)
                    shutil.rmtree(root, ignore_errors=True)
                row["nodes"] = 1 + a.workers
            row.update({"mode": mode, "cpus": os.cpu_count() if mode == "local" else a.num_cpus * row["nodes"], "input_mib": input_mib, "files": a.files})
            if row["exit_code"] or row["steps"] != a.steps:
                raise SystemExit(f"{mode}: conversion failed or incomplete: {row} (log in {base})")
            print(json.dumps(row), flush=True)
            rows.append(row)
            shutil.rmtree(out)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    machine = {"os_cpus": os.cpu_count(), "python": platform.python_version(), "load_average_at_end": os.getloadavg()}
    Path(a.out).write_text(json.dumps({"benchmark": "convert samplebatch at scale", "machine": machine,
                                       "settings": vars(a), "results": rows}, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
