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
of the normalised score) and ``README.md`` (the same for people), both made by
``dataset_cards.py`` and written inside the same atomic directory as the data.
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
    HoldBeyond,
    Latched,
    LinearStateFeedback,
    LinearSwitch,
    UniformRandom,
    double_pendulum_lqr_gains,
)

from offlinerl.episodes import SingleAgentEpisode, atomic_directory, write_dataset  # noqa: E402
from offlinerl.scoring import CARD_FILE  # noqa: E402

from dataset_cards import ANCHOR_EPISODES, make_card, measure_anchors, render_readme  # noqa: E402

__all__ = ["Level", "Recipe", "RECIPES", "build", "collect_episode", "level_seeds", "generate", "main"]


@dataclass(frozen=True)
class Level:
    """One behaviour level: a policy and how many episodes of it to record."""

    name: str
    """Short name, used in episode ids and in the card."""
    episodes: int
    """Number of episodes at scale 1."""
    make_policy: Callable[[gym.Env], BehaviorPolicy]
    """Builds the behaviour policy for an env (reads its action space); called once per episode."""
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
    drifting = LinearSwitch(gains=(0.0, 0.0, 1.0, 0.3), bias=0.1)
    return (
        Level("expert", 10, lambda env: EpsilonGreedy(tuned, 0.05, 2),
              "full-state linear feedback, ε = 0.05"),
        Level("medium", 250, lambda env: EpsilonGreedy(drifting, 0.1, 2),
              "pole angle + angular velocity feedback only, with a bias: the pole stays up but the cart "
              "drifts off the track after ~120 steps, ε = 0.1"),
        Level("recovering", 12, lambda env: EpsilonGreedy(Latched(drifting, tuned, 0.3), 0.1, 2),
              "the biased controller until the cart is 0.3 from the centre, then the full-state one for good, ε = 0.1"),
        Level("poor", 80, lambda env: EpsilonGreedy(drifting, 0.5, 2), "the same biased controller, ε = 0.5"),
        Level("random", 150, lambda env: UniformRandom(env.action_space), "uniformly random actions"),
    )


def _pendulum_levels() -> tuple[Level, ...]:
    def noisy(controller, sigma):
        return lambda env: GaussianNoise(controller, sigma, env.action_space.low, env.action_space.high)

    expert = EnergySwingUp(k_energy=2.0, kp=10.0, kd=2.0)
    slow = EnergySwingUp(k_energy=2.0, kp=10.0, kd=2.0, pump_torque=0.2)
    slower = EnergySwingUp(k_energy=2.0, kp=10.0, kd=2.0, pump_torque=0.1)
    return (
        Level("expert", 25, noisy(expert, 0.2),
              "energy swing-up at full torque (±2) + PD balance (kp 10, kd 2), σ = 0.2"),
        Level("medium", 75, noisy(slow, 0.3),
              "the same controller pumping with at most ±0.2: many swings before the top, σ = 0.3"),
        Level("poor", 110, noisy(slower, 1.0),
              "the same controller pumping with at most ±0.1, σ = 1.0"),
        Level("random", 40, lambda env: UniformRandom(env.action_space), "uniformly random torques"),
    )


@functools.lru_cache(maxsize=1)
def _double_pendulum_gains() -> tuple[float, ...]:
    return double_pendulum_lqr_gains()


# double-pendulum-mixed: the medium controller's wrong-signed cart-position gain, the |x| beyond which
# the recovering level's full LQR takes over, the |x| at which it then holds the cart, episodes per level.
DP_RUNAWAY_GAIN, DP_LIMIT, DP_HOLD = 0.3, 0.4, 0.5
DP_EPISODES = {"expert": 6, "medium": 400, "recovering": 20, "poor": 60, "random": 20}


def _double_pendulum_levels() -> tuple[Level, ...]:
    def runaway(env_gains: tuple[float, ...]) -> LinearStateFeedback:
        return LinearStateFeedback((-DP_RUNAWAY_GAIN, *env_gains[1:]))

    def noisy(make_controller, sigma):
        def make(env):
            return GaussianNoise(make_controller(_double_pendulum_gains()), sigma,
                                 env.action_space.low, env.action_space.high)
        return make

    return (
        Level("expert", DP_EPISODES["expert"], noisy(LinearStateFeedback, 0.1), "LQR state feedback, σ = 0.1"),
        Level("medium", DP_EPISODES["medium"], noisy(runaway, 0.1),
              f"LQR with a wrong-signed cart-position gain (+{DP_RUNAWAY_GAIN}·x): the cart runs away "
              "from the centre into the end of the rail and the poles fall within ~100 steps, σ = 0.1"),
        Level("recovering", DP_EPISODES["recovering"],
              noisy(lambda k: HoldBeyond(runaway(k), k, DP_LIMIT, DP_HOLD), 0.1),
              f"the medium controller until |x| > {DP_LIMIT}, then the full LQR stops the cart and holds it "
              f"at |x| = {DP_HOLD}, σ = 0.1"),
        Level("poor", DP_EPISODES["poor"], noisy(runaway, 0.3), "the medium controller, σ = 0.3"),
        Level("random", DP_EPISODES["random"], lambda env: UniformRandom(env.action_space),
              "uniformly random forces"),
    )


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "cartpole-mixed", "CartPole-v1", 1000, _cartpole_levels(), "expert",
            "CartPole-v1 (time limit 500 → truncated; the pole falling or the cart leaving the track → "
            "terminated). The expert balances for the full 500 steps. The medium and poor levels (most of "
            "the steps) keep the pole up but steer with a bias, so the cart drifts off the track after about "
            "120 steps. The small recovering level drifts the same way until the cart first passes |x| = 0.3, "
            "then switches to the expert's controller for good and survives all 500 steps. In drifted states "
            "the data that keeps drifting outnumbers the recovery several times, so imitation of the whole "
            "mix drifts off like the majority; recovery is followed by hundreds of surviving steps and "
            "continued drift by termination within tens, which value-based methods can use.",
        ),
        Recipe(
            "pendulum-mixed", "Pendulum-v1", 2000, _pendulum_levels(), "expert",
            "Pendulum-v1 (200 steps, always truncated). Every scripted level is the same energy-pumping swing-up "
            "with the same PD balance near the top; they differ in how hard they pump. The expert pumps at full "
            "torque and is upright within ~60 steps even from hanging at rest; the medium and poor levels pump "
            "with at most ±0.2 and ±0.1, so they need many swings (from hanging, more than the whole episode) "
            "and spend most of their steps "
            "swinging far from upright. Behaviour cloning of the whole mix follows the slow pumping of the "
            "majority; in the same swinging states the data also shows harder pushes (the expert's, and the "
            "noise of the weaker levels) followed within tens of steps by the pendulum reaching the top.",
        ),
        Recipe(
            "double-pendulum-mixed", "InvertedDoublePendulum-v5", 3000, _double_pendulum_levels(), "expert",
            "InvertedDoublePendulum-v5 (MuJoCo; 1000 steps → truncated; the tip dropping below y = 1 → "
            "terminated; observations stored as float32, the env emits float64). Reward ≈ 9.36 per step "
            "alive, so returns measure survival. The expert is an LQR controller computed from the MuJoCo "
            "model itself. The medium majority balances the poles with the same gains except a wrong-signed "
            "cart-position gain, so the cart runs away from the centre to either side, hits the end of the "
            "rail and the poles fall, within tens of steps of passing |x| = 0.4. The small recovering level "
            "runs away the same way, but beyond |x| > 0.4 the full LQR stops the cart and holds it at "
            "|x| = 0.5 to the time limit. Most steps come from the medium level; where the cart runs out past "
            "|x| = 0.4 the run-away and the stopping actions are about equally common, and imitation of the "
            "whole mix (their average) still runs into the rail; the recovering episodes show what to do "
            "there, with returns that say it pays within tens of steps.",
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


# ----------------------------------------------------------------------- build


def generate(recipe: Recipe, episodes_scale: float = 1.0, progress: bool = True) -> list[SingleAgentEpisode]:
    """Every episode of a dataset, levels interleaved in a seeded random order."""
    env = gym.make(recipe.env_id)
    counts = [max(1, round(lv.episodes * episodes_scale)) for lv in recipe.levels]
    bar = tqdm(total=sum(counts), desc=recipe.name, unit="ep", disable=not progress)
    episodes = []
    for i, (level, n) in enumerate(zip(recipe.levels, counts)):
        for k in range(n):
            policy = level.make_policy(env)  # fresh per episode: some controllers keep state (Latched)
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
    with atomic_directory(target, overwrite=overwrite, kind="dataset") as tmp:
        write_dataset(  # into a fresh directory inside the temporary one, then moved up beside the card
            episodes, tmp / "data", observation_space=_obs_space(env), action_space=env.action_space,
            env_id=recipe.env_id, env_spec=json.loads(env.spec.to_json()), provenance=provenance,
        )
        for f in (tmp / "data").iterdir():
            f.rename(tmp / f.name)
        (tmp / "data").rmdir()
        (tmp / CARD_FILE).write_text(json.dumps(card, indent=2, allow_nan=False) + "\n")
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
