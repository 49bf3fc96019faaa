"""From a CSV of logs to an ONNX policy, without a simulator: the path of ``docs/logs-to-policy.md``.

    python examples/logs_to_onnx.py --workdir /tmp/logs-demo            # about 10 min on 2 CPU cores
    python examples/logs_to_onnx.py --workdir /tmp/logs-demo --quick    # a smoke run (tests use it)

Every step is an ``offlinerl`` command, printed before it runs:

1. logs: ``logs.csv``, one row per step (here written from the shipped CartPole data and then
   treated as a plant's logs: no env id travels with them);
2. ``offlinerl convert table logs.csv --spec spec.yaml -o dataset``;
3. ``offlinerl validate dataset``;
4. ``offlinerl train`` CQL and IQL, each holding 20% of the episodes out and choosing its best
   checkpoint by FQE on them (``evaluation: {ope: fqe}``);
5. the better of the two selected checkpoints by the same FQE estimate (same held-out episodes);
6. ``offlinerl export policy BEST --format onnx -o policy.onnx``;
7. the ONNX file answers raw observations with env actions in onnxruntime, with no offlinerl import.

CartPole exists here, so the last step also reports the exported policy's real return, to show
what the env-free choice was worth; a user without a simulator stops at step 7.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "datasets" / "cartpole-mixed"

#: How the log columns map onto an episode (docs/convert.md, "Your own step logs").
SPEC = {
    "episode_id": "episode",
    "step": "t",
    "observation": ["cart_position", "cart_velocity", "pole_angle", "pole_velocity"],
    "action": "action",
    "reward": "reward",
    "terminated": {"column": "terminated"},
    "truncated": {"column": "truncated"},
    "action_logp": "action_logp",
    "observation_space": {"type": "Box", "dtype": "float32", "shape": [4],
                          "low": ["-inf"] * 4, "high": ["inf"] * 4},
    "action_space": {"type": "Discrete", "dtype": "int64", "n": 2, "start": 0},
}


def offlinerl(*args: str) -> None:
    """Run one ``offlinerl`` command as a user would, echoing it first."""
    print("\n$ offlinerl " + " ".join(shlex.quote(a) for a in args), flush=True)
    subprocess.run([sys.executable, "-m", "offlinerl", *args], check=True)


def write_logs(work: Path, episodes: int) -> Path:
    """``logs.csv``: some episodes of the shipped data as a plain step log with named columns."""
    from offlinerl.convert.table.export import write_step_table
    from offlinerl.episodes import load_episodes, read_info
    from offlinerl.episodes.io import write_dataset

    info = read_info(SOURCE)
    eps = load_episodes(SOURCE)
    eps = random.Random(0).sample(eps, min(episodes, len(eps)))
    for ep in eps:
        ep.extras = {"action_logp": ep.extras["action_logp"]}
    subset = work / "_subset"
    write_dataset(eps, subset, observation_space=info.observation_space, action_space=info.action_space,
                  extra_columns={"action_logp": info.extra_columns["action_logp"]})
    write_step_table(subset, work / "_table.csv", "csv")
    names = {f"obs_{i}": name for i, name in enumerate(SPEC["observation"])}
    lines = (work / "_table.csv").read_text().splitlines()
    header = ",".join(names.get(c, c) for c in lines[0].split(","))
    logs = work / "logs.csv"
    logs.write_text("\n".join([header, *lines[1:]]) + "\n")
    print(f"wrote {logs}: {len(lines) - 1} rows of {len(eps)} episodes; columns {header}")
    return logs


def job(work: Path, algorithm: str, quick: bool) -> Path:
    """A job spec that trains ``algorithm`` on the converted logs and selects by FQE on held-out episodes."""
    algo_settings = {"cql": {"cql_weight": 1.0, "critic_lr": 3.0e-4, "tau": 0.02},
                     "iql": {"expectile": 0.9, "beta": 10.0}}[algorithm]
    spec = {
        "algorithm": algorithm,
        "dataset": str(work / "dataset"),
        "config": {
            "seed": 0, "train_batch_size": 64 if quick else 256, "updates_per_iteration": 25 if quick else 1000,
            "normalize_observations": True, "model": {"hidden": [32, 32] if quick else [128, 128]},
            **algo_settings,
            "data": {"holdout": {"fraction": 0.2, "seed": 0}},
            "evaluation": {"ope": "fqe", "ope_updates": 100 if quick else 3000},
        },
        "checkpoint_interval": 1 if quick else 2,
        "stop": {"updates": 50 if quick else 6000},
        "output": str(work / "runs"),
    }
    path = work / f"{algorithm}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_onnx(policy: Path, observations: list[list[float]]) -> list[int]:
    """Actions from the ONNX file in onnxruntime, in a process that does not import offlinerl."""
    code = (
        "import json, sys, numpy as np, onnxruntime as ort\n"
        "s = ort.InferenceSession(sys.argv[1])\n"
        "obs = np.asarray(json.loads(sys.argv[2]), dtype=np.float32)\n"
        "print(json.dumps(s.run(['actions'], {'obs': obs})[0].tolist()))\n"
        "assert 'offlinerl' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(policy), json.dumps(observations)], check=True,
                         capture_output=True, text=True, cwd="/")
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, help="a new or empty directory for every file made")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: checks the path, not the policy")
    args = parser.parse_args(argv)
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)

    logs = write_logs(work, 24 if args.quick else 200)
    (work / "spec.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    offlinerl("convert", "table", str(logs), "--spec", str(work / "spec.yaml"), "-o", str(work / "dataset"))
    offlinerl("validate", str(work / "dataset"))

    selected = {}
    for algorithm in ("cql", "iql"):
        run = work / "runs" / algorithm
        offlinerl("train", str(job(work, algorithm, args.quick)), "--output", str(run), "--no-progress")
        selection = json.loads((run / "result.json").read_text())["selection"]
        selected[algorithm] = (selection["selected_estimate"], selection["selected"])
    best_algorithm = max(selected, key=lambda a: selected[a][0])
    estimate, best = selected[best_algorithm]
    print("\nFQE on the held-out episodes: " + ", ".join(f"{a} {e:.1f}" for a, (e, _) in selected.items())
          + f" -> {best_algorithm}: {best}")

    policy = work / "policy.onnx"
    offlinerl("export", "policy", best, "--format", "onnx", "-o", str(policy), "--overwrite")
    observations = [[0.0, 0.0, 0.05, 0.0], [0.0, 0.0, -0.05, 0.0], [0.5, 0.1, 0.0, 0.2]]
    actions = run_onnx(policy, observations)
    print(f"onnxruntime: observations {observations} -> actions {actions}")

    import gymnasium as gym
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(policy))
    returns = []
    for seed in range(5):
        env, total, done = gym.make("CartPole-v1"), 0.0, False
        obs, _ = env.reset(seed=10_000 + seed)
        while not done:
            action = session.run(["actions"], {"obs": np.asarray(obs, np.float32)[None]})[0][0]
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    summary = {"selected": {a: {"estimate": e, "checkpoint": c} for a, (e, c) in selected.items()},
               "best": best_algorithm, "policy": str(policy), "actions": actions,
               "cartpole_return_mean": float(np.mean(returns))}
    print(f"(CartPole exists here: the exported policy returns {summary['cartpole_return_mean']:.1f} on average "
          "over 5 episodes)")
    (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
