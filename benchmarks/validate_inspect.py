"""Throughput of ``validate`` and ``inspect`` on a synthetic MuJoCo-sized dataset (run by hand).

    PYTHONPATH=. python benchmarks/validate_inspect.py [--episodes 400] [--steps 500]

Writes the timings to benchmarks/results/validate_inspect.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from offlinerl.episodes import SingleAgentEpisode, write_dataset
from offlinerl.episodes.stats import dataset_stats
from offlinerl.episodes.validate import validate_dataset
from offlinerl.ray_utils import init_ray

OBS = gym.spaces.Box(-np.inf, np.inf, (17,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)


def episodes(n: int, steps: int):
    rng = np.random.default_rng(0)
    for i in range(n):
        yield SingleAgentEpisode(
            f"ep-{i}", obs=rng.normal(size=(steps + 1, 17)).astype(np.float32),
            actions=rng.uniform(-1, 1, (steps, 6)).astype(np.float32),
            rewards=rng.normal(size=steps).astype(np.float32), truncated=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "validate_inspect.json"))
    args = parser.parse_args()
    init_ray()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ds"
        write_dataset(episodes(args.episodes, args.steps), path, observation_space=OBS, action_space=ACT,
                      rows_per_file=100)
        size = sum(f.stat().st_size for f in path.iterdir())
        validate_dataset(path)  # warm the Ray workers
        t = time.perf_counter()
        report = validate_dataset(path)
        t_validate = time.perf_counter() - t
        t = time.perf_counter()
        stats = dataset_stats(path)
        t_inspect = time.perf_counter() - t
    steps = args.episodes * args.steps
    result = {
        "episodes": args.episodes, "steps": steps, "bytes_on_disk": size, "valid": report.ok,
        "validate_s": round(t_validate, 2), "validate_steps_per_s": round(steps / t_validate),
        "inspect_s": round(t_inspect, 2), "inspect_steps_per_s": round(steps / t_inspect),
        "inspect_steps_seen": stats["steps"], "machine": f"{platform.machine()}, {platform.node()}",
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
