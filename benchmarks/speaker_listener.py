"""Learning check on a team whose agents act in different spaces: MPE ``simple_speaker_listener`` (mpe2).

    PYTHONPATH=. python benchmarks/speaker_listener.py --out benchmarks/results/speaker_listener.json

The speaker sees the goal landmark's colour (3 numbers) and says one of 3 words; the listener sees its velocity,
the three landmarks relative to itself and the word heard (11 numbers) and picks one of 5 moves; both are rewarded
with minus the listener's squared distance to the goal. A dataset of the two agents is therefore version 2
(docs/episode-format.md, §8a). Scripted levels (each agent acts from its own observation):

- ``expert``: the speaker names the goal's colour (argmax); the listener steers to the landmark the word names
  with a PD rule (the spread controller's); each agent's move replaced by a uniform one with probability 0.1;
- ``medium``: the same with probability 0.5;
- ``random``: uniform words and moves.

The shipped multi-agent jobs (``jobs/spread-bc.yaml``, ``jobs/spread-iql.yaml``) train on it unchanged but for
the dataset; scores are team returns normalised 0 = uniform random, 100 = the noise-free expert (anchors on 200
episodes from reset seeds no dataset episode uses). Results go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ENV_ID = "pettingzoo:mpe2.simple_speaker_listener_v4"
ENV_KWARGS = {"max_cycles": 25}
LEVELS = (("expert", 300, 0.1), ("medium", 150, 0.5), ("random", 150, 1.0))
SEED, ANCHOR_SEED = 7000, 1_000_000
ACTIONS = {"speaker_0": 3, "listener_0": 5}


def _listener_move(obs: np.ndarray, kp: float = 1.0, kd: float = 0.2, dead: float = 0.02) -> int:
    """Steer to the landmark the heard word names (obs: velocity 2, landmarks relative 6, word 3)."""
    target = obs[2 + 2 * int(np.argmax(obs[8:11])):4 + 2 * int(np.argmax(obs[8:11]))]
    error = kp * target - kd * obs[0:2]
    axis = int(np.argmax(np.abs(error)))
    if abs(error[axis]) < dead:
        return 0
    return (2 if error[0] > 0 else 1) if axis == 0 else (4 if error[1] > 0 else 3)


class Scripted:
    """The joint policy of one level: scripted moves, each replaced by a uniform one with probability ``epsilon``
    (``action_logp`` exact)."""

    def __init__(self, epsilon: float, rng: np.random.Generator) -> None:
        self.epsilon, self.rng = epsilon, rng

    def __call__(self, observations):
        actions, extras = {}, {}
        for agent in sorted(observations):
            obs = np.asarray(observations[agent])
            greedy = int(np.argmax(obs)) if agent == "speaker_0" else _listener_move(obs)
            n = ACTIONS[agent]
            action = int(self.rng.integers(n)) if self.rng.random() < self.epsilon else greedy
            actions[agent] = np.int64(action)
            extras[agent] = {"action_logp": np.float32(math.log(self.epsilon / n + (1 - self.epsilon) * (action == greedy)))}
        return actions, extras


def build(out: Path) -> dict:
    from offlinerl.env.multi_agent import env_spaces, run_team_episodes
    from offlinerl.episodes import write_dataset
    from offlinerl.episodes.agent_spaces import storage_spaces
    from offlinerl.trusted import make_parallel_env

    env = make_parallel_env(ENV_ID, ENV_KWARGS, explicit=True)
    obs, act, agents = storage_spaces(*env_spaces(env))
    episodes, level_returns = [], {}
    for i, (name, count, epsilon) in enumerate(LEVELS):
        returns = []
        for k in range(count):
            played = run_team_episodes(env, Scripted(epsilon, np.random.default_rng([SEED, i, k])),
                                       [SEED + 10_000 * i + k], record=True)
            episodes += [e.__class__(**{**e.__dict__, "id": f"{name}-{k}"}) for e in played.episodes]
            returns += played.returns
        level_returns[name] = float(np.mean(returns))
    anchors = {}
    for name, epsilon in (("random", 1.0), ("expert", 0.0)):
        played = run_team_episodes(env, Scripted(epsilon, np.random.default_rng([SEED, 99])),
                                   list(range(ANCHOR_SEED, ANCHOR_SEED + 200)))
        anchors[name] = float(np.mean(played.returns))
    env.close()
    write_dataset(episodes, out, observation_space=obs, action_space=act, agent_spaces=agents, env_id=ENV_ID,
                  env_spec={"id": ENV_ID, "kwargs": ENV_KWARGS}, overwrite=True,
                  provenance={"collector": "benchmarks/speaker_listener.py", "levels": level_returns})
    return {"levels": level_returns, "anchors": anchors, "episodes": len(episodes) // 2}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path("/tmp/speaker-listener"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/speaker_listener.json"))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--algorithms", default="bc,iql")
    args = p.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    data = args.work / "data"
    t0 = time.time()
    made = build(data)
    random, expert = made["anchors"]["random"], made["anchors"]["expert"]
    score = lambda r: 100 * (r - random) / (expert - random)  # noqa: E731
    print(f"dataset: {made['episodes']} team episodes in {time.time() - t0:.0f} s; levels {made['levels']}; "
          f"anchors random {random:.2f}, expert {expert:.2f}", flush=True)
    runs = []
    for algorithm in args.algorithms.split(","):
        for seed in map(int, args.seeds.split(",")):
            run = args.work / f"{algorithm}-{seed}"
            shutil.rmtree(run, ignore_errors=True)  # ours, from an earlier invocation
            t1 = time.time()
            cmd = [sys.executable, "-m", "offlinerl.cli", "train", f"jobs/spread-{algorithm}.yaml", "--set",
                   f"dataset={data}", "--set", f"config.seed={seed}", "-o", str(run), "-q",
                   "--env-package", "mpe2"]
            subprocess.run(cmd, check=True)
            result = json.loads((run / "result.json").read_text())
            final = result.get("final_eval_return", result.get("eval/return_mean"))
            runs.append({"algorithm": algorithm, "seed": seed, "team_return": final, "score": score(final),
                         "seconds": round(time.time() - t1, 1)})
            print(json.dumps(runs[-1]), flush=True)
    summary = {a: {"mean": float(np.mean([r["score"] for r in runs if r["algorithm"] == a])),
                   "std": float(np.std([r["score"] for r in runs if r["algorithm"] == a]))}
               for a in args.algorithms.split(",")}
    summary["data_levels_normalised"] = {k: score(v) for k, v in made["levels"].items()}
    out = {"env": ENV_ID, "env_kwargs": ENV_KWARGS, **made, "runs": runs, "summary": summary,
           "wall_s": round(time.time() - t0, 1)}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
