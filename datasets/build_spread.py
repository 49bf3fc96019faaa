"""Build the shipped multi-agent dataset ``spread-mixed``: MPE ``simple_spread`` (3 agents, 3 landmarks, from the
``mpe2`` package) with scripted joint policies at three levels.

    PYTHONPATH=. python datasets/build_spread.py                          # into datasets/spread-mixed
    PYTHONPATH=. python datasets/build_spread.py --out /tmp/ds --overwrite --episodes-scale 0.05 --anchor-episodes 5

The task: each agent sees its velocity, its position, the landmarks' and the other agents' positions relative to
its own (18 numbers) and picks one of 5 discrete moves (none, left, right, down, up); every agent is rewarded
with the team's coverage (minus the sum over landmarks of the nearest agent's distance, half weight) and
penalised for its collisions (half weight); 25 steps per episode. The team return (every agent's rewards
summed) is what the card, ``offlinerl train`` and ``offlinerl evaluate`` report.

Levels (each agent acts for itself from its own observation; ``SpreadController``):
- ``expert``: the agents agree on the assignment of agents to landmarks with the least total distance (every
  agent computes it from the same positions) and each steers to its landmark with a PD rule, ε = 0.1;
- ``medium``: each agent steers to its *nearest* landmark (agents often share one and leave another
  uncovered), ε = 0.1;
- ``random``: uniform moves.

Everything is seeded: level ``i``'s episode ``k`` resets the env with ``SEED + 10000 * i + k`` and draws its
ε-noise from ``default_rng([SEED, i, k])``. Episode ids are ``<level>-<k>``, one row per agent (``agent_id``
``agent_0`` ... ``agent_2``); per-step extras ``action_logp`` (exact: ``log((1 - ε)[a = controller's] + ε / 5)``)
and ``behavior_level`` (int8). ``card.json`` and ``README.md`` are written with the data, atomically.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE.parent / "src") not in sys.path:
    sys.path.insert(0, str(HERE.parent / "src"))

from offlinerl.env.multi_agent import env_spaces, run_team_episodes  # noqa: E402
from offlinerl.episodes.atomic import atomic_directory  # noqa: E402
from offlinerl.episodes.episode import SingleAgentEpisode  # noqa: E402
from offlinerl.episodes.io import write_dataset  # noqa: E402
from offlinerl.scoring import normalized_score  # noqa: E402
from offlinerl.trusted import make_parallel_env  # noqa: E402

ENV_ID = "pettingzoo:mpe2.simple_spread_v3"
ENV_KWARGS = {"N": 3, "max_cycles": 25, "local_ratio": 0.5, "continuous_actions": False}
NAME = "spread-mixed"
SEED = 4000
#: Reset seeds of anchor episodes start here (never used by dataset episodes).
ANCHOR_SEED_OFFSET = 1_000_000
ANCHOR_EPISODES = 500
NUM_ACTIONS = 5


class SpreadController:
    """One agent's scripted move in ``simple_spread`` from its own observation.

    Observation layout (N agents): velocity (2), position (2), landmarks relative to the agent (2N), the other
    agents relative to the agent in agent order (2(N-1)), communication (ignored). ``assign=True``: the target is
    the agent's landmark in the assignment with the least total distance (ties: the first permutation in
    lexicographic order, so every agent computes the same assignment); else the nearest landmark. The move: the
    axis with the larger PD error ``kp (target - position) - kd velocity``, toward its sign; none within
    ``dead``."""

    def __init__(self, n: int, assign: bool | str, kp: float = 1.0, kd: float = 0.2, dead: float = 0.02) -> None:
        self.n, self.assign, self.kp, self.kd, self.dead = n, assign, kp, kd, dead
        self._perms = list(itertools.permutations(range(n)))

    def target(self, obs: np.ndarray, index: int) -> np.ndarray:
        n, pos = self.n, obs[2:4]
        landmarks = pos + obs[4:4 + 2 * n].reshape(n, 2)
        if self.assign == "role":
            return landmarks[index]
        if not self.assign:
            return landmarks[int(np.argmin(np.linalg.norm(landmarks - pos, axis=1)))]
        others = pos + obs[4 + 2 * n:4 + 2 * n + 2 * (n - 1)].reshape(n - 1, 2)
        agents = np.insert(others, index, pos, axis=0)
        dist = np.linalg.norm(agents[:, None, :] - landmarks[None, :, :], axis=2)  # [agent, landmark]
        costs = [sum(dist[a, p[a]] for a in range(n)) for p in self._perms]
        return landmarks[self._perms[int(np.argmin(costs))][index]]

    def move(self, obs: np.ndarray, index: int) -> int:
        error = self.kp * (self.target(obs, index) - obs[2:4]) - self.kd * obs[0:2]
        axis = int(np.argmax(np.abs(error)))
        if abs(error[axis]) < self.dead:
            return 0
        return (2 if error[0] > 0 else 1) if axis == 0 else (4 if error[1] > 0 else 3)

    def describe(self) -> dict[str, Any]:
        return {"controller": "assignment_pd" if self.assign else "nearest_landmark_pd", "kp": self.kp,
                "kd": self.kd, "dead_zone": self.dead}


class JointScripted:
    """Every agent moves by ``controller`` (None: uniformly at random), replaced by a uniform move with
    probability ``epsilon``; ``action_logp`` exact."""

    def __init__(self, controller: SpreadController | None, epsilon: float, rng: np.random.Generator) -> None:
        self.controller, self.epsilon, self.rng = controller, epsilon if controller else 1.0, rng

    def __call__(self, observations: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        actions, extras = {}, {}
        for agent in sorted(observations):
            greedy = None if self.controller is None else self.controller.move(np.asarray(observations[agent]),
                                                                               int(agent.rsplit("_", 1)[1]))
            action = int(self.rng.integers(NUM_ACTIONS)) if self.rng.random() < self.epsilon else greedy
            p = self.epsilon / NUM_ACTIONS + (1.0 - self.epsilon) * (action == greedy)
            actions[agent] = np.int64(action)
            extras[agent] = {"action_logp": np.float32(math.log(p))}
        return actions, extras


@dataclass(frozen=True)
class Level:
    name: str
    episodes: int
    assign: bool | None
    """True: the assignment controller; False: nearest landmark; None: random."""
    epsilon: float
    note: str

    def policy(self, rng: np.random.Generator, noise_free: bool = False) -> JointScripted:
        controller = None if self.assign is None else SpreadController(ENV_KWARGS["N"], self.assign)
        return JointScripted(controller, 0.0 if noise_free and controller else self.epsilon, rng)


LEVELS = (
    Level("expert", 250, "role", 0.1, "agent i steers to landmark i (a fixed role: no two share one), PD, ε = 0.1"),
    Level("medium", 150, "role", 0.5, "the expert's roles with half the moves uniformly random, ε = 0.5"),
    Level("miscoordinated", 50, False, 0.1, "each agent steers to its nearest landmark (shared ones, gaps), ε = 0.1"),
    Level("random", 150, None, 1.0, "uniform moves"),
)
BEST_LEVEL = "expert"


def generate(env: Any, episodes_scale: float = 1.0) -> list[SingleAgentEpisode]:
    """Every level's episodes, one row per agent, levels interleaved in a seeded order of env episodes."""
    groups: list[list[SingleAgentEpisode]] = []
    for i, level in enumerate(LEVELS):
        for k in range(max(1, round(level.episodes * episodes_scale))):
            played = run_team_episodes(env, level.policy(np.random.default_rng([SEED, i, k])),
                                       [SEED + 10_000 * i + k], record=True)
            tag = {"behavior_level": np.int8(i)}
            groups.append([replace(e, id=f"{level.name}-{k}",
                                   extras={**e.extras, **{c: np.full(len(e), v) for c, v in tag.items()}})
                           for e in played.episodes])
    order = np.random.default_rng(SEED).permutation(len(groups))
    return [e for j in order for e in groups[j]]


def _stats(values: Sequence[float]) -> dict[str, float]:
    r = np.asarray(values, dtype=np.float64)
    return {"return_mean": float(r.mean()), "return_std": float(r.std()), "return_min": float(r.min()),
            "return_max": float(r.max())}


def team_returns(episodes: Sequence[SingleAgentEpisode]) -> dict[str, float]:
    """Team return of each env episode (its agents' returns summed), by episode id."""
    out: dict[str, float] = {}
    for e in episodes:
        out[e.id] = out.get(e.id, 0.0) + e.episode_return
    return out


def measure_anchors(env: Any, episodes: int = ANCHOR_EPISODES) -> dict[str, Any]:
    """Mean team return of uniformly random moves (0) and of the noise-free expert controller (100)."""
    seed = SEED + ANCHOR_SEED_OFFSET
    seeds = [seed + j for j in range(episodes)]
    rand = run_team_episodes(env, LEVELS[-1].policy(np.random.default_rng([seed])), seeds).returns
    best_level = next(lv for lv in LEVELS if lv.name == BEST_LEVEL)
    best = run_team_episodes(env, best_level.policy(np.random.default_rng([seed]), noise_free=True), seeds).returns
    return {"random_return": float(np.mean(rand)), "random_return_std": float(np.std(rand)),
            "best_return": float(np.mean(best)), "best_return_std": float(np.std(best)), "best_level": BEST_LEVEL,
            "anchor_episodes": episodes, "anchor_reset_seeds": f"{seed}..{seed + episodes - 1}"}


def make_card(episodes: Sequence[SingleAgentEpisode], anchors: dict[str, Any]) -> dict[str, Any]:
    team = team_returns(episodes)
    anchor_values = (anchors["random_return"], anchors["best_return"])
    levels = {}
    for i, level in enumerate(LEVELS):
        ids = sorted({e.id for e in episodes if int(e.extras["behavior_level"][0]) == i})
        if not ids:
            continue
        stats = _stats([team[j] for j in ids])
        levels[level.name] = {
            "index": i, "episodes": len(ids),
            "steps": int(sum(len(e) for e in episodes if e.id in set(ids))), **stats,
            "policy": {**(SpreadController(ENV_KWARGS["N"], level.assign).describe() if level.assign is not None
                          else {"controller": "uniform"}), "epsilon": level.epsilon},
            "note": level.note, "return_mean_normalized": normalized_score(stats["return_mean"], *anchor_values),
        }
    card = {"env_id": ENV_ID, "env_kwargs": ENV_KWARGS, "agents": sorted({e.agent_id for e in episodes}),
            "num_episodes": len(team), "num_rows": len(episodes), "num_steps": int(sum(len(e) for e in episodes)),
            "return": "team return: every agent's rewards summed", **_stats(list(team.values())),
            "levels": levels, **anchors}
    card["return_mean_normalized"] = normalized_score(card["return_mean"], *anchor_values)
    return card


def render_readme(card: dict[str, Any], command: str) -> str:
    lines = [
        f"# {NAME}", "",
        "Multi-agent: MPE `simple_spread` (3 agents cover 3 landmarks; `mpe2`, PettingZoo parallel API) with "
        "scripted joint policies at three levels; one parquet row per agent episode (`agent_id`). Scores are "
        "**team returns** (every agent's rewards summed).", "",
        f"Made by `{command}` (seed {SEED}; level i's episode k resets with seed {SEED} + 10000·i + k and draws "
        f"noise from `default_rng([{SEED}, i, k])`); the script's docstring describes the controllers.", "",
        f"- env: `{ENV_ID}` with `{json.dumps(ENV_KWARGS)}`; agents: {', '.join(card['agents'])}",
        f"- env episodes: {card['num_episodes']}; rows (agent episodes): {card['num_rows']}; agent steps: "
        f"{card['num_steps']}",
        f"- team return over all episodes: mean {card['return_mean']:.1f}, min {card['return_min']:.1f}, max "
        f"{card['return_max']:.1f} (normalised mean {card['return_mean_normalized']:.1f})",
        f"- anchors ({card['anchor_episodes']} episodes each, reset seeds {card['anchor_reset_seeds']}): uniformly "
        f"random moves {card['random_return']:.1f} ± {card['random_return_std']:.1f} (= 0), noise-free "
        f"`{card['best_level']}` controller {card['best_return']:.1f} ± {card['best_return_std']:.1f} (= 100)", "",
        "| level | policy | env episodes | agent steps | mean team return | normalised |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, lv in card["levels"].items():
        lines.append(f"| {name} | {lv['note']} | {lv['episodes']} | {lv['steps']} | {lv['return_mean']:.1f} | "
                     f"{lv['return_mean_normalized']:.1f} |")
    lines += ["", "Normalised score: 100 · (R − random_return) / (best_return − random_return) "
              "(`offlinerl.scoring.normalized_score`; `card.json` holds the numbers).", "",
              "Extra per-step columns: `action_logp` (float32, exact for ε-random moves) and `behavior_level` "
              "(int8, the level's index above). Episode ids are `<level>-<k>`, shared by the agents of one env "
              "episode.", "",
              "Train and evaluate in the env: `offlinerl train jobs/spread-bc.yaml` / `jobs/spread-iql.yaml` "
              "(docs/multi-agent.md).", ""]
    return "\n".join(lines)


def build(out: Path, *, episodes_scale: float = 1.0, anchor_episodes: int = ANCHOR_EPISODES,
          overwrite: bool = False, command: str = "PYTHONPATH=. python datasets/build_spread.py") -> dict[str, Any]:
    env = make_parallel_env(ENV_ID, ENV_KWARGS, explicit=True)
    try:
        obs_spaces, act_spaces = env_spaces(env)
        episodes = generate(env, episodes_scale)
        anchors = measure_anchors(env, anchor_episodes)
    finally:
        env.close()
    card = make_card(episodes, anchors)
    agent = sorted(obs_spaces)[0]
    provenance = {"collector": "datasets/build_spread.py", "command": command, "seed": SEED,
                  "episodes_scale": episodes_scale,
                  "seeding": "level i, episode k: env.reset(seed=seed + 10000*i + k); noise rng = "
                             "numpy.random.default_rng([seed, i, k]); episode id '<level>-<k>', one row per agent",
                  "levels": [{"index": i, "name": lv.name, "note": lv.note} for i, lv in enumerate(LEVELS)],
                  "return": "team return: every agent's rewards summed"}
    with atomic_directory(out, overwrite=overwrite, kind="dataset") as tmp:
        write_dataset(  # into a fresh directory inside the temporary one, then moved up beside the card
            episodes, tmp / "data", observation_space=obs_spaces[agent], action_space=act_spaces[agent],
            env_id=ENV_ID, env_spec={"id": ENV_ID, "kwargs": ENV_KWARGS}, provenance=provenance)
        for f in (tmp / "data").iterdir():
            f.rename(tmp / f.name)
        (tmp / "data").rmdir()
        (tmp / "card.json").write_text(json.dumps(card, indent=2, allow_nan=False) + "\n")
        (tmp / "README.md").write_text(render_readme(card, command))
    return card


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / NAME, help="dataset directory (default datasets/spread-mixed)")
    parser.add_argument("--episodes-scale", type=float, default=1.0, help="scale every level's episode count")
    parser.add_argument("--anchor-episodes", type=int, default=ANCHOR_EPISODES)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    args = parser.parse_args(argv)
    card = build(args.out, episodes_scale=args.episodes_scale, anchor_episodes=args.anchor_episodes,
                 overwrite=args.overwrite)
    print(f"wrote {args.out}: {card['num_episodes']} env episodes, {card['num_rows']} rows, {card['num_steps']} agent "
          f"steps; team return {card['return_mean']:.1f} (normalised {card['return_mean_normalized']:.1f}); anchors "
          f"random {card['random_return']:.1f}, expert {card['best_return']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
