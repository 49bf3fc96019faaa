"""Dataset cards: the anchors of the normalised score, per-level statistics, and the README text.

``card.json`` keys: env_id, num_episodes, num_steps, return_mean / _std / _min / _max (over all
episodes), levels {name: {index, episodes, steps, return_mean, ..., policy, note}},
random_return, best_return (the anchors: a uniformly random policy = 0, the best level's
noise-free policy = 100), their standard deviations, best_level, anchor_episodes,
anchor_reset_seeds, and return_mean_normalized (for the whole mix and per level).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from offlinerl.episodes import SingleAgentEpisode
from offlinerl.scoring import normalized_score
from scripted_policies import UniformRandom

__all__ = ["ANCHOR_EPISODES", "ANCHOR_SEED_OFFSET", "evaluate", "make_card", "measure_anchors", "render_readme"]

#: Episodes per anchor measurement (random policy, noise-free best policy).
ANCHOR_EPISODES = 100
#: Reset seeds of anchor episodes start here (never used by dataset episodes).
ANCHOR_SEED_OFFSET = 1_000_000


def evaluate(
    env: gym.Env, act: Callable[[np.ndarray, np.random.Generator], Any], episodes: int, seed: int
) -> list[float]:
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


def _stats(returns: Sequence[float]) -> dict[str, float]:
    r = np.asarray(returns, dtype=np.float64)
    return {"return_mean": float(r.mean()), "return_std": float(r.std()), "return_min": float(r.min()),
            "return_max": float(r.max())}


def make_card(recipe: Any, episodes: Sequence[SingleAgentEpisode], anchors: dict[str, Any]) -> dict[str, Any]:
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
    anchor_values = (anchors["random_return"], anchors["best_return"])
    card["return_mean_normalized"] = normalized_score(card["return_mean"], *anchor_values)
    for stats in levels.values():
        stats["return_mean_normalized"] = normalized_score(stats["return_mean"], *anchor_values)
    return card


def measure_anchors(recipe: Any, episodes: int = ANCHOR_EPISODES) -> dict[str, Any]:
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


def render_readme(recipe: Any, card: dict[str, Any], command: str) -> str:
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
            f"{100 * lv['steps'] / card['num_steps']:.0f}% | {lv['return_mean']:.1f} | "
            f"{lv['return_mean_normalized']:.1f} |"
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
        "extra files that readers ignore. What BC, MARWIL and IQL reach on this data in a small reference "
        "loop: `datasets/README.md` (learnability check).",
        "",
    ]
    return "\n".join(lines)
