"""Build the shipped reference datasets from real gymnasium envs and scripted policies.

    PYTHONPATH=. python datasets/build.py                       # every dataset, into datasets/
    PYTHONPATH=. python datasets/build.py --only pendulum-mixed --out /tmp/ds --overwrite
    PYTHONPATH=. python datasets/build.py --episodes-scale 0.05 --out /tmp/tiny

Each dataset mixes behaviour levels of different quality (see RECIPES), the
way D4RL's medium-replay / medium-expert sets do: most steps come from weaker
levels, the best level is present. Everything is seeded: level ``i``'s episode
``k`` resets the env with ``seed = recipe.seed + 10_000 * i + k`` and draws its
action noise from ``np.random.default_rng([recipe.seed, i, k])``, so a build is
bit-for-bit reproducible and any episode can be replayed on its own.

Per-step extra columns:
- ``action_logp`` (float32): log-probability of the behaviour policy's choice
  (exact for ε-greedy; for Gaussian noise the density of the action *before*
  clipping to the bounds, see ``scripted_policies.py``);
- ``behavior_level`` (int8): index of the episode's level in
  ``provenance["levels"]`` (constant within an episode).
Episode ids are ``<level name>-<k>``.

Besides ``dataset.json`` + ``part-*.parquet`` each dataset directory holds
``card.json`` (machine-readable counts, per-level returns and the two anchors
of the normalised score) and ``README.md`` (the same for people). Both are
written inside the same atomic directory as the data.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from tqdm import tqdm

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # run as a script from anywhere
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from scripted_policies import (  # noqa: E402
    BehaviorPolicy,
    EnergySwingUp,
    EpsilonGreedy,
    GaussianNoise,
    LinearStateFeedback,
    LinearSwitch,
    UniformRandom,
    double_pendulum_lqr_gains,
)

from offlinerl.episodes import SingleAgentEpisode, atomic_directory, write_dataset  # noqa: E402

__all__ = ["Level", "Recipe", "RECIPES", "build", "collect_episode", "level_seeds", "evaluate", "make_card"]

#: Episodes per anchor measurement (random policy, noise-free best policy).
ANCHOR_EPISODES = 100
#: Reset seeds of anchor episodes start here (never used by dataset episodes).
ANCHOR_SEED_OFFSET = 1_000_000


@dataclass(frozen=True)
class Level:
    """One behaviour level: a policy and how many episodes of it to record."""

    name: str
    """Short name, used in episode ids and in the card."""
    episodes: int
    """Number of episodes at scale 1."""
    make_policy: Callable[[gym.Env], BehaviorPolicy]
    """Builds the behaviour policy for an env (reads its action space)."""
    note: str = ""
    """One line for the card: what this level is."""


@dataclass(frozen=True)
class Recipe:
    """How one dataset is made."""

    name: str
    """Directory name under datasets/."""
    env_id: str
    """Gymnasium id (default kwargs and time limit)."""
    seed: int
    """Base seed of every reset and noise stream."""
    levels: tuple[Level, ...]
    """Behaviour levels, in order of ``behavior_level`` index; the best one is named in ``best_level``."""
    best_level: str
    """Level whose noise-free policy defines the 100 anchor."""
    summary: str
    """A paragraph for the card."""


def _cartpole_levels() -> tuple[Level, ...]:
    tuned = LinearSwitch(gains=(0.1, 0.5, 10.0, 2.0))
    drifting = LinearSwitch(gains=(0.0, 0.0, 1.0, 0.3), bias=0.035)
    return (
        Level("expert", 20, lambda env: EpsilonGreedy(tuned, 0.05, 2),
              "full-state linear feedback, ε = 0.05"),
        Level("medium", 110, lambda env: EpsilonGreedy(drifting, 0.1, 2),
              "pole angle + angular velocity feedback only, with a rightward bias (the cart drifts off the track), ε = 0.1"),
        Level("poor", 60, lambda env: EpsilonGreedy(drifting, 0.5, 2),
              "the same biased controller, ε = 0.5"),
        Level("random", 60, lambda env: UniformRandom(env.action_space), "uniformly random actions"),
    )


def _pendulum_levels() -> tuple[Level, ...]:
    def noisy(controller, sigma):
        return lambda env: GaussianNoise(controller, sigma, env.action_space.low, env.action_space.high)

    expert = EnergySwingUp(k_energy=2.0, kp=10.0, kd=2.0)
    soft = EnergySwingUp(k_energy=2.0, kp=2.0, kd=0.5)
    balance_only = EnergySwingUp(k_energy=0.0, kp=10.0, kd=2.0, switch_cos=-2.0)
    return (
        Level("expert", 40, noisy(expert, 0.2), "energy swing-up + PD balance (kp 10, kd 2), σ = 0.2"),
        Level("medium", 110, noisy(soft, 0.3),
              "the same swing-up with a too-soft balance (kp 2, kd 0.5): falls back and re-pumps, σ = 0.3"),
        Level("poor", 70, noisy(balance_only, 1.0), "PD balance only, no swing-up (rarely gets up), σ = 1.0"),
        Level("random", 40, lambda env: UniformRandom(env.action_space), "uniformly random torques"),
    )


@functools.lru_cache(maxsize=1)
def _double_pendulum_gains() -> tuple[float, ...]:
    return double_pendulum_lqr_gains()


def _double_pendulum_levels() -> tuple[Level, ...]:
    def noisy(bias, drop_cart_position, sigma):
        def make(env):
            gains = _double_pendulum_gains()
            if drop_cart_position:
                gains = (0.0, *gains[1:])
            return GaussianNoise(LinearStateFeedback(gains, bias), sigma, env.action_space.low, env.action_space.high)
        return make

    return (
        Level("expert", 20, noisy(0.0, False, 0.1), "LQR state feedback, σ = 0.1"),
        Level("medium", 120, noisy(0.015, True, 0.1),
              "LQR without the cart-position gain, force bias 0.015: the cart drifts into the rail "
              "and the poles fall, σ = 0.1"),
        Level("poor", 50, noisy(0.015, True, 0.3), "the same drifting controller, σ = 0.3"),
        Level("random", 20, lambda env: UniformRandom(env.action_space), "uniformly random forces"),
    )


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "cartpole-mixed", "CartPole-v1", 1000, _cartpole_levels(), "expert",
            "CartPole-v1 (time limit 500 → truncated; the pole falling or the cart leaving the track → "
            "terminated). The expert balances for the full 500 steps; the medium and poor levels keep the "
            "pole up but drift off the track, so imitation of the whole mix follows the drifting majority "
            "while the expert's actions are there to be found.",
        ),
        Recipe(
            "pendulum-mixed", "Pendulum-v1", 2000, _pendulum_levels(), "expert",
            "Pendulum-v1 (200 steps, always truncated). The expert pumps energy then balances; the medium "
            "level switches to balance too late and often spins through the top; the poor level never "
            "pumps energy; random torques set the 0 anchor.",
        ),
        Recipe(
            "double-pendulum-mixed", "InvertedDoublePendulum-v5", 3000, _double_pendulum_levels(), "expert",
            "InvertedDoublePendulum-v5 (MuJoCo; 1000 steps → truncated; the tip dropping below y = 1 → "
            "terminated; observations stored as float32, the env emits float64). Reward ≈ 9.36 per step "
            "alive, so returns measure survival. The expert is an LQR controller computed from the MuJoCo "
            "model itself; the medium level balances the poles but ignores the cart position and pushes "
            "with a small constant bias, so the cart drifts into the end of the rail and the poles fall "
            "after a few hundred steps; imitation of the whole mix follows that majority.",
        ),
    )
}


# ------------------------------------------------------------------ collection


def level_seeds(recipe: Recipe, level_index: int, k: int) -> tuple[int, np.random.Generator]:
    """Reset seed and noise generator of episode ``k`` of level ``level_index``."""
    return recipe.seed + 10_000 * level_index + k, np.random.default_rng([recipe.seed, level_index, k])


def _obs_space(env: gym.Env) -> gym.spaces.Box:
    """The env's observation space, stored as float32."""
    space = env.observation_space
    return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), space.shape, np.float32)


def collect_episode(
    env: gym.Env, policy: BehaviorPolicy, reset_seed: int, rng: np.random.Generator, episode_id: str, level: int
) -> SingleAgentEpisode:
    """Run one whole episode with plain ``reset``/``step`` (no vector env, so no autoreset step)."""
    obs, _ = env.reset(seed=reset_seed)
    observations, actions, rewards, logps = [np.asarray(obs, dtype=np.float32)], [], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        action, logp = policy.act(obs, rng)
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(np.asarray(obs, dtype=np.float32))
        actions.append(action)
        rewards.append(reward)
        logps.append(logp)
    if terminated and truncated:  # the time limit hit on a terminal step: the episode terminated
        truncated = False
    return SingleAgentEpisode(
        id=episode_id,
        obs=np.stack(observations),
        actions=np.asarray(actions, dtype=np.int64 if isinstance(actions[0], int) else np.float32),
        rewards=np.asarray(rewards, dtype=np.float32),
        terminated=terminated,
        truncated=truncated,
        extras={
            "action_logp": np.asarray(logps, dtype=np.float32),
            "behavior_level": np.full(len(rewards), level, dtype=np.int8),
        },
    )


def evaluate(env: gym.Env, act: Callable[[np.ndarray, np.random.Generator], Any], episodes: int, seed: int) -> list[float]:
    """Returns of ``episodes`` episodes of ``act`` (reset seeds ``seed``, ``seed + 1``, …)."""
    returns = []
    for i in range(episodes):
        rng = np.random.default_rng([seed, i])
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs, rng))
            total += float(np.float32(reward))
            done = terminated or truncated
        returns.append(total)
    return returns


# ------------------------------------------------------------------------ card


def _stats(returns: Sequence[float]) -> dict[str, float]:
    r = np.asarray(returns, dtype=np.float64)
    return {"return_mean": float(r.mean()), "return_std": float(r.std()), "return_min": float(r.min()),
            "return_max": float(r.max())}


def normalized(value: float, random_return: float, best_return: float) -> float:
    return 100.0 * (value - random_return) / (best_return - random_return)


def make_card(recipe: Recipe, episodes: Sequence[SingleAgentEpisode], anchors: dict[str, Any]) -> dict[str, Any]:
    """Card numbers, computed from the episodes exactly as they are stored."""
    returns = [ep.episode_return for ep in episodes]
    levels: dict[str, Any] = {}
    for i, level in enumerate(recipe.levels):
        eps = [ep for ep in episodes if int(ep.extras["behavior_level"][0]) == i]
        if not eps:
            continue
        levels[level.name] = {
            "index": i,
            "episodes": len(eps),
            "steps": int(sum(len(ep) for ep in eps)),
            **_stats([ep.episode_return for ep in eps]),
            "terminated": sum(ep.terminated for ep in eps),
            "truncated": sum(ep.truncated for ep in eps),
            "policy": recipe.levels[i].make_policy(gym.make(recipe.env_id)).describe(),
            "note": level.note,
        }
    card = {
        "env_id": recipe.env_id,
        "num_episodes": len(episodes),
        "num_steps": int(sum(len(ep) for ep in episodes)),
        **_stats(returns),
        "levels": levels,
        **anchors,
    }
    card["return_mean_normalized"] = normalized(card["return_mean"], anchors["random_return"], anchors["best_return"])
    for stats in levels.values():
        stats["return_mean_normalized"] = normalized(stats["return_mean"], anchors["random_return"],
                                                     anchors["best_return"])
    return card


def measure_anchors(recipe: Recipe, episodes: int = ANCHOR_EPISODES) -> dict[str, Any]:
    """Mean return of a uniformly random policy and of the best level's noise-free policy."""
    env = gym.make(recipe.env_id)
    seed = recipe.seed + ANCHOR_SEED_OFFSET
    random_policy = UniformRandom(env.action_space)
    best = next(lv for lv in recipe.levels if lv.name == recipe.best_level).make_policy(env)
    random_returns = evaluate(env, lambda o, rng: random_policy.act(o, rng)[0], episodes, seed)
    best_returns = evaluate(env, lambda o, rng: best.mean_action(o), episodes, seed)
    env.close()
    return {
        "random_return": float(np.mean(random_returns)),
        "random_return_std": float(np.std(random_returns)),
        "best_return": float(np.mean(best_returns)),
        "best_return_std": float(np.std(best_returns)),
        "best_level": recipe.best_level,
        "anchor_episodes": episodes,
        "anchor_reset_seeds": f"{seed}..{seed + episodes - 1}",
    }


def render_readme(recipe: Recipe, card: dict[str, Any], command: str) -> str:
    """The human-readable card."""
    lines = [
        f"# {recipe.name}",
        "",
        recipe.summary,
        "",
        f"Made by `{command}` (seed {recipe.seed}; level i's episode k resets with seed "
        f"{recipe.seed} + 10000·i + k and draws noise from `default_rng([{recipe.seed}, i, k])`).",
        "",
        f"- env: `{recipe.env_id}`; episodes: {card['num_episodes']}; steps: {card['num_steps']}",
        f"- return over all episodes: mean {card['return_mean']:.1f}, min {card['return_min']:.1f}, "
        f"max {card['return_max']:.1f} (normalised mean {card['return_mean_normalized']:.1f})",
        f"- anchors ({card['anchor_episodes']} episodes each, reset seeds {card['anchor_reset_seeds']}): "
        f"uniformly random policy {card['random_return']:.1f} ± {card['random_return_std']:.1f} (= 0), "
        f"noise-free `{card['best_level']}` policy {card['best_return']:.1f} ± {card['best_return_std']:.1f} (= 100)",
        "",
        "| level | policy | episodes | steps | share of steps | mean return | normalised |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, lv in card["levels"].items():
        lines.append(
            f"| {name} | {lv['note']} | {lv['episodes']} | {lv['steps']} | "
            f"{100 * lv['steps'] / card['num_steps']:.0f}% | {lv['return_mean']:.1f} | {lv['return_mean_normalized']:.1f} |"
        )
    lines += [
        "",
        "Normalised score: 100 · (R − random_return) / (best_return − random_return) "
        "(`offlinerl.scoring.normalized_score`; `card.json` holds the numbers).",
        "",
        "Extra per-step columns: `action_logp` (float32; log-probability of the behaviour policy's action — "
        "exact for ε-greedy, for Gaussian noise the density of the action before clipping to the bounds) and "
        "`behavior_level` (int8, index of the level in the table above / `provenance.levels`). "
        "Episode ids are `<level>-<k>`.",
        "",
        "Files: `dataset.json` + `part-*.parquet` are the episode dataset; `card.json` and this README are "
        "extra files that readers ignore.",
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------- build


def generate(recipe: Recipe, episodes_scale: float = 1.0, progress: bool = True) -> list[SingleAgentEpisode]:
    """Every episode of a dataset, levels interleaved in a seeded random order."""
    env = gym.make(recipe.env_id)
    counts = [max(1, round(lv.episodes * episodes_scale)) for lv in recipe.levels]
    bar = tqdm(total=sum(counts), desc=recipe.name, unit="ep", disable=not progress)
    episodes = []
    for i, (level, n) in enumerate(zip(recipe.levels, counts)):
        policy = level.make_policy(env)
        for k in range(n):
            reset_seed, rng = level_seeds(recipe, i, k)
            episodes.append(collect_episode(env, policy, reset_seed, rng, f"{level.name}-{k:05d}", i))
            bar.update()
    bar.close()
    env.close()
    order = np.random.default_rng([recipe.seed, 999]).permutation(len(episodes))
    return [episodes[j] for j in order]


def build(
    name: str,
    out_dir: str | Path,
    *,
    episodes_scale: float = 1.0,
    anchor_episodes: int = ANCHOR_EPISODES,
    overwrite: bool = False,
    progress: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Generate dataset ``name`` into ``out_dir/name`` (data, card.json, README.md); returns the card."""
    recipe = RECIPES[name]
    target = Path(out_dir) / name
    episodes = generate(recipe, episodes_scale, progress)
    anchors = measure_anchors(recipe, anchor_episodes)
    card = make_card(recipe, episodes, anchors)
    env = gym.make(recipe.env_id)
    command = command or f"python datasets/build.py --only {name}" + (
        f" --episodes-scale {episodes_scale}" if episodes_scale != 1.0 else "")
    provenance = {
        "collector": "datasets/build.py",
        "command": command,
        "seed": recipe.seed,
        "episodes_scale": episodes_scale,
        "seeding": "level i, episode k: env.reset(seed=seed + 10000*i + k); noise rng = "
                   "numpy.random.default_rng([seed, i, k]); episode id '<level>-<k:05d>'",
        "levels": [
            {"index": i, "name": lv.name, "note": lv.note, "policy": lv.make_policy(env).describe(),
             "episodes": card["levels"][lv.name]["episodes"]}
            for i, lv in enumerate(recipe.levels)
        ],
        "extra_columns": {
            "action_logp": "log-probability of the behaviour action (ε-greedy: exact; Gaussian noise: "
                           "density of the action before clipping to the bounds)",
            "behavior_level": "index into provenance.levels",
        },
        "observations": "stored as float32",
    }
    with atomic_directory(target, overwrite=overwrite) as tmp:
        write_dataset(
            episodes, tmp, observation_space=_obs_space(env), action_space=env.action_space,
            env_id=recipe.env_id, env_spec=json.loads(env.spec.to_json()), provenance=provenance, overwrite=True,
        )
        (tmp / "card.json").write_text(json.dumps(card, indent=2, allow_nan=False) + "\n")
        (tmp / "README.md").write_text(render_readme(recipe, card, command))
    env.close()
    return card


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build the reference episode datasets (deterministic; see each dataset's README.md).")
    parser.add_argument("--only", action="append", choices=sorted(RECIPES),
                        help="build only this dataset (repeatable); default: all")
    parser.add_argument("--out", default=str(HERE), help="parent directory of the datasets (default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset directory")
    parser.add_argument("--episodes-scale", type=float, default=1.0,
                        help="multiply every level's episode count (tiny test builds); default 1")
    parser.add_argument("--anchor-episodes", type=int, default=ANCHOR_EPISODES,
                        help="episodes per anchor measurement (random / best noise-free policy); default %(default)s")
    args = parser.parse_args(argv)
    if args.episodes_scale <= 0 or not math.isfinite(args.episodes_scale):
        parser.error("--episodes-scale must be a positive number")
    for name in args.only or sorted(RECIPES):
        try:
            card = build(name, args.out, episodes_scale=args.episodes_scale, anchor_episodes=args.anchor_episodes,
                         overwrite=args.overwrite)
        except FileExistsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {card['num_episodes']} episodes, {card['num_steps']} steps, mean return "
              f"{card['return_mean']:.1f} ({card['return_mean_normalized']:.0f} normalised; random "
              f"{card['random_return']:.1f}, best {card['best_return']:.1f})")
        for level, lv in card["levels"].items():
            print(f"  {level:>8}: {lv['episodes']:5d} ep {lv['steps']:7d} steps  return {lv['return_mean']:9.2f} "
                  f"({lv['return_mean_normalized']:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
