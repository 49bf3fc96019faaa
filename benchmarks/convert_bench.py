"""Throughput and peak memory of ``convert samplebatch`` on a generated legacy recording.

Generates RLlib-JsonWriter-style recordings (CartPole-shaped: packed float32
``obs``/``new_obs``, plain actions, rewards, flags, infos and the usual PPO
extra columns; ``truncate_episodes`` lines of ``--fragment`` steps, so most
episodes span two or more lines and files), converts each with the real Ray
pipeline, and samples the memory of the driver and of every Ray process it
started (its descendants: raylet, GCS, workers) twice a second from /proc:
peak resident set (RSS) and peak proportional set size (PSS, which counts
shared object-store pages once instead of once per process).

    PYTHONPATH=. python benchmarks/convert_bench.py --steps 250000 1000000 --out benchmarks/results/convert.json

Linux only (reads /proc). Results go to a JSON file; benchmarks/README.md holds measured numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np



def _pack(array: np.ndarray) -> str:
    import base64
    import pickle

    import lz4.frame

    return base64.b64encode(lz4.frame.compress(pickle.dumps(array, protocol=5))).decode("ascii")


def generate(root: Path, steps: int, files: int, fragment: int, episode_len: int, seed: int = 0) -> int:
    """Write ``steps`` steps as ``files`` files of lines of ``fragment`` steps; returns bytes written."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    lines_total = -(-steps // fragment)
    per_file = -(-lines_total // files)
    eps_id, t, written, step = int(rng.integers(2**62)), 0, 0, 0
    obs = rng.standard_normal(4).astype(np.float32)
    for fi in range(files):
        path = root / f"output-2026-01-01_00-00-00_worker-0_{fi}.json"
        with open(path, "w") as f:
            for _ in range(per_file):
                n = min(fragment, steps - step)
                if n <= 0:
                    break
                cols = {k: [] for k in ("actions", "rewards", "terminateds", "truncateds", "eps_id", "t")}
                o = np.empty((n, 4), np.float32)
                no = np.empty((n, 4), np.float32)
                for i in range(n):
                    o[i] = obs
                    obs = (obs + 0.01 * rng.standard_normal(4)).astype(np.float32)
                    no[i] = obs
                    done = t == episode_len - 1
                    cols["actions"].append(int(i % 2))
                    cols["rewards"].append(1.0)
                    cols["terminateds"].append(done)
                    cols["truncateds"].append(False)
                    cols["eps_id"].append(eps_id)
                    cols["t"].append(t)
                    t += 1
                    if done:
                        eps_id, t = int(rng.integers(2**62)), 0
                        obs = rng.standard_normal(4).astype(np.float32)
                logits = rng.standard_normal((n, 2)).astype(np.float32)
                line = {
                    "type": "SampleBatch", "obs": _pack(o), "new_obs": _pack(no), **cols,
                    "prev_actions": [0] * n, "prev_rewards": [0.0] * n, "infos": [{}] * n,
                    "unroll_id": [fi] * n, "agent_index": [0] * n,
                    "action_logp": np.float64(np.full(n, -0.6931, np.float32)).tolist(),
                    "action_dist_inputs": logits.astype(np.float64).tolist(),
                    "vf_preds": np.float64(rng.standard_normal(n).astype(np.float32)).tolist(),
                }
                f.write(json.dumps(line) + "\n")
                step += n
        written += path.stat().st_size
    return written


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _anon_kb(pid: int) -> int:
    """Private (anonymous) resident memory: RSS without shared object-store and file pages."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _mem_kb(pid: int) -> tuple[int, int]:
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")[:80]
    except OSError:
        return "?"


class MemorySampler(threading.Thread):
    """Peak memory of this process and all its descendants (the local Ray cluster)."""

    def __init__(self, interval: float = 0.5):
        super().__init__(daemon=True)
        self.interval, self.stop_flag = interval, threading.Event()
        self.peak_driver_rss = self.peak_total_rss = self.peak_total_pss = self.peak_worker_rss = 0
        self.peak_worker_name = self.peak_worker_anon_name = ""
        self.peak_worker_anon = 0

    def sample(self) -> None:
        me = os.getpid()
        total_rss = total_pss = 0
        for pid in _descendants(me):
            rss, pss = _mem_kb(pid)
            total_rss += rss
            total_pss += pss
            if pid == me:
                self.peak_driver_rss = max(self.peak_driver_rss, rss)
            else:
                if rss > self.peak_worker_rss:
                    self.peak_worker_rss, self.peak_worker_name = rss, _name(pid)
                anon = _anon_kb(pid)
                if anon > self.peak_worker_anon:
                    self.peak_worker_anon, self.peak_worker_anon_name = anon, _name(pid)
        self.peak_total_rss = max(self.peak_total_rss, total_rss)
        self.peak_total_pss = max(self.peak_total_pss, total_pss)

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.sample()
            self.stop_flag.wait(self.interval)

    def stop(self) -> dict[str, float]:
        self.stop_flag.set()
        self.join()
        mib = 1 / 1024
        return {"peak_driver_rss_mib": self.peak_driver_rss * mib, "peak_single_ray_process_rss_mib": self.peak_worker_rss * mib,
                "peak_single_ray_process": self.peak_worker_name,
                "peak_single_ray_process_private_mib": self.peak_worker_anon * mib,
                "peak_single_ray_process_private": self.peak_worker_anon_name,
                "peak_total_rss_mib": self.peak_total_rss * mib, "peak_total_pss_mib": self.peak_total_pss * mib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--fragment", type=int, default=1000, help="steps per line (rollout_fragment_length)")
    parser.add_argument("--episode-len", type=int, default=500)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--range-mib", type=int, default=64, help="byte-range size for reading big files")
    parser.add_argument("--tmp", default=None, help="where to generate (default: system temp dir)")
    parser.add_argument("--out", default="benchmarks/results/convert_bench.json")
    args = parser.parse_args()

    import ray
    import ray.data

    from offlinerl.convert.samplebatch import SampleBatchConvertConfig, convert_samplebatch

    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    results = []
    base = Path(tempfile.mkdtemp(prefix="convert-bench-", dir=args.tmp))
    try:
        for steps in args.steps:
            src, out = base / f"rec-{steps}", base / f"ds-{steps}"
            t0 = time.time()
            size = generate(src, steps, args.files, args.fragment, args.episode_len)
            gen_s = time.time() - t0
            sampler = MemorySampler()
            sampler.sample()
            baseline = {"baseline_total_pss_mib": sampler.peak_total_pss / 1024, "baseline_total_rss_mib": sampler.peak_total_rss / 1024}
            sampler.start()
            t0 = time.time()
            report = convert_samplebatch(SampleBatchConvertConfig(
                inputs=(str(src),), output=str(out), env_id="CartPole-v1", range_bytes=args.range_mib << 20))
            seconds = time.time() - t0
            mem = sampler.stop()
            assert report.steps == steps and report.quarantined == 0, report.text()
            row = {"steps": steps, "episodes": report.episodes, "files": args.files, "input_mib": size / 2**20,
                   "output_mib": sum(f.stat().st_size for f in out.glob("*.parquet")) / 2**20,
                   "generate_s": gen_s, "convert_s": seconds, "steps_per_s": steps / seconds,
                   "input_mib_per_s": size / 2**20 / seconds, **baseline, **mem}
            print(json.dumps(row), flush=True)
            results.append(row)
            shutil.rmtree(src)
            shutil.rmtree(out)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    machine = {"cpus_for_ray": args.num_cpus, "os_cpus": os.cpu_count(), "python": platform.python_version(),
               "ray": ray.__version__, "load_average_at_end": os.getloadavg()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"benchmark": "convert samplebatch", "machine": machine,
                                          "settings": vars(args), "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
