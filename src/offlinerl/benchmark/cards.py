"""Dataset cards and checksums of generated benchmark datasets.

A generated dataset directory holds, beside the episode dataset (``dataset.json`` + ``part-*.parquet``):

- ``card.json``: recipe, seed, size, the evaluation task and the reference returns (``random_return`` /
  ``best_return``, the anchors of the normalised score, as the shipped datasets' cards name them), and
  ``data_sha256``, a digest of the parquet files alone: the same recipe, size and seed give the same digest
  under the same software and CPU, which ``made_with`` records (``offlinerl.episodes.software``);
- ``README.md``: the same for people;
- ``SHA256SUMS``: one ``<sha256>  <file>`` line per other file (``sha256sum -c SHA256SUMS`` checks them).
  ``dataset.json`` records its creation time, so its line differs between two otherwise equal runs.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from offlinerl.episodes import DatasetInfo, parquet_files
from offlinerl.episodes.software import made_with, made_with_text

__all__ = ["CARD_FILE", "CHECKSUM_FILE", "data_digest", "make_card", "render_readme", "sha256_file",
           "verify_checksums", "write_checksums"]

CARD_FILE = "card.json"
CHECKSUM_FILE = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_digest(directory: Path) -> str:
    """sha256 over the names and sha256 of the dataset's parquet files, in order."""
    digest = hashlib.sha256()
    for f in parquet_files(directory):
        digest.update(f"{sha256_file(f)}  {f.name}\n".encode())
    return digest.hexdigest()


def write_checksums(directory: Path) -> Path:
    """Write ``SHA256SUMS`` for every file of ``directory`` but itself and hidden ones (a writer's marker)."""
    directory = Path(directory)
    lines = [f"{sha256_file(f)}  {f.name}\n" for f in sorted(directory.iterdir())
             if f.is_file() and f.name != CHECKSUM_FILE and not f.name.startswith(".")]
    path = directory / CHECKSUM_FILE
    path.write_text("".join(lines))
    return path


def verify_checksums(directory: Path) -> list[str]:
    """The files whose sha256 differs from ``SHA256SUMS`` (or are missing); empty when all match."""
    directory = Path(directory)
    problems = []
    for line in (directory / CHECKSUM_FILE).read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name}: sha256 differs")
    return problems


def make_card(task: Any, info: DatasetInfo, stats: dict[str, Any], references: dict[str, Any], *, seed: int,
              recipe: Any, recipe_version: int, dataset_dir: Path) -> dict[str, Any]:
    """The machine-readable card of a generated maze dataset (deterministic for a recipe, size and seed)."""
    return {
        "name": task.name,
        "env_id": task.env_id,
        "published_name": task.published_name,
        "num_episodes": info.num_episodes,
        "num_steps": info.num_steps,
        "seed": seed,
        "recipe_version": recipe_version,
        "recipe": asdict(recipe),
        "evaluation": {"goal_cell": list(task.goal_cell), "reset_cell": list(task.reset_cell),
                       "max_episode_steps": task.max_episode_steps, "reward_type": "sparse",
                       "continuing_task": True, "reset_target": False},
        "goals_reached": stats["goals_reached"],
        "reward_steps": stats["reward_steps"],
        "reference_returns": dict(references),
        "random_return": references["random"],
        "best_return": references["expert"],
        "data_sha256": data_digest(dataset_dir),
        "made_with": made_with(),
    }


def render_readme(card: dict[str, Any]) -> str:
    """``README.md`` of a generated maze dataset."""
    r, ev, refs = card["recipe"], card["evaluation"], card["reference_returns"]
    return f"""# {card['name']}

{card['env_id']} (gymnasium-robotics) made with the D4RL maze2d recipe, mirroring `{card['published_name']}`;
`offlinerl.benchmark.maze.generate_maze("{card['name']}", OUT, steps={card['num_steps']}, seed={card['seed']})`
(recipe version {card['recipe_version']}) writes exactly these parquet files (`data_sha256` in `card.json`) with
{made_with_text(card.get('made_with'))} (`made_with`).

- **Data**: one env reset (seed {card['seed']}), then one continuous trajectory of {card['num_steps']:,} steps. A
  waypoint controller (shortest path over the maze cells, PD control `a = clip({r['p_gain']}·(w − x) + ({r['d_gain']})·v, −1, 1)`
  towards the next cell centre, jittered by ±{r['waypoint_jitter']}) drives to a random goal (a uniform free cell ±{r['goal_noise']});
  within {r['goal_tolerance']} of it, or after {ev['max_episode_steps']} steps, a new goal is drawn. Each action gets
  N(0, {r['action_noise']}²) noise and is clipped to [-1, 1]. {card['num_episodes']:,} episodes, one per goal, all truncated
  ({card['goals_reached']:,} reached their goal); the next starts where the last ended.
- **Rewards** are the evaluation task's, as D4RL relabels maze2d: `1` when the ball ends the step within 0.45 of
  `desired_goal`, the evaluation goal (cell {tuple(ev['goal_cell'])} ± {r['goal_noise']}, drawn per episode), else `0`
  ({card['reward_steps']:,} rewarded steps). The controller's own goals are not in the data.
- **Evaluation task** (the recorded env spec): goal cell {tuple(ev['goal_cell'])}, reset cell {tuple(ev['reset_cell'])},
  sparse reward, `continuing_task=True, reset_target=False` (the goal stays; the return counts the steps spent
  at it), {ev['max_episode_steps']} steps.
- **Reference returns** ({refs['episodes']} episodes, reset seeds {refs['seed']}…): uniformly random actions
  {refs['random']:.2f} ± {refs['random_std']:.2f} (= 0), the noise-free controller {refs['expert']:.2f} ± {refs['expert_std']:.2f} (= 100).

Files: `dataset.json` + `part-*.parquet` (the episode dataset), `card.json`, this README, `SHA256SUMS`.
"""
