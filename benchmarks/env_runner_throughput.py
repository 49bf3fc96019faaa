"""EnvRunner sampling throughput (env steps/s recorded as episodes), by hand:

    PYTHONPATH=. python benchmarks/env_runner_throughput.py [--out benchmarks/results/env_runner.json]

Measures CartPole-v1 and Pendulum-v1 with a uniform RandomPolicy and with the
stock DefaultRLModule (256x256, forward_exploration) for several vector widths,
sync and async, against a bare gymnasium loop (single env, random actions, no
recording): the ratio shows what recording and the batched policy cost.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import gymnasium as gym
import torch

from offlinerl.connectors import env_to_module_pipeline, module_to_env_pipeline
from offlinerl.core.default_module import DefaultRLModule
from offlinerl.env import EnvRunner, EnvRunnerConfig
from offlinerl.env.module_policy import PipelineConnectors


def bare_loop(env_id: str, steps: int) -> float:
    env = gym.make(env_id)
    env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


def runner_rate(env_id: str, num_envs: int, mode: str, module: bool, steps: int) -> float:
    config = EnvRunnerConfig(env=env_id, num_envs=num_envs, vectorize_mode=mode, seed=0)
    kwargs = {}
    if module:
        probe = gym.make(env_id)
        obs_space, act_space = probe.observation_space, probe.action_space
        kwargs = {
            "policy_factory": lambda o, a: DefaultRLModule(o, a, {"hidden": [256, 256]}, inference_only=True),
            "connectors_factory": PipelineConnectors(env_to_module_pipeline(obs_space),
                                                     module_to_env_pipeline(act_space)),
        }
    runner = EnvRunner(config, **kwargs)
    runner.sample(num_timesteps=num_envs * 10)  # warm-up
    t = time.perf_counter()
    n = sum(len(e) for e in runner.sample(num_timesteps=steps))
    rate = n / (time.perf_counter() - t)
    runner.stop()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--out", default="benchmarks/results/env_runner.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        bare = bare_loop(env_id, args.steps)
        rows.append({"env": env_id, "what": "bare gymnasium loop", "steps_per_s": bare})
        for module in (False, True):
            for mode, widths in (("sync", (1, 4, 16)), ("async", (4,))):
                for n in widths:
                    rate = runner_rate(env_id, n, mode, module, args.steps)
                    rows.append({"env": env_id, "policy": "DefaultRLModule 256x256" if module else "random",
                                 "vectorize_mode": mode, "num_envs": n, "steps_per_s": rate,
                                 "ratio_to_bare": rate / bare})
                    print(json.dumps(rows[-1]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "torch_threads": 1, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
