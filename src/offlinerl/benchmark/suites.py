"""Benchmark suites: datasets of one family each, where to get them, how to score them, which recipe trains them.

A suite is a list of :class:`SuiteDataset`. Each knows

- how to get its data: a dataset shipped in this checkout (``datasets/``), or a seeded generator run on
  demand (the maze family: :func:`offlinerl.benchmark.maze.generate_maze`; locomotion:
  :func:`offlinerl.benchmark.locomotion.generate_locomotion`) at a named size;
- its normalisation anchors: 0 = a uniformly random policy, 100 = the expert (the dataset card's
  ``random_return`` / ``best_return``, or the generator's reference returns);
- its recipe per algorithm: a job file with the family's published hyper-parameters
  (``src/offlinerl/benchmark/recipes/<family>-<algorithm>.yaml``) or, for the shipped classic datasets, the
  tuned job files of ``jobs/``;
- the env package its env needs (``--env-package``), and the name of the published dataset it mirrors
  (``maze2d-umaze-v1``) so the table can show the published numbers beside ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offlinerl.scoring import load_card

__all__ = ["SuiteDataset", "Suite", "SUITES", "get_suite", "REPO", "RECIPES", "published_scores", "published_family"]

#: The checkout this package lives in (the classic suite's datasets and job files are files of it).
REPO = Path(__file__).resolve().parents[3]
#: The family recipes shipped with the package.
RECIPES = Path(__file__).resolve().parent / "recipes"
_PUBLISHED = Path(__file__).resolve().parent / "published.json"


@dataclass(frozen=True, kw_only=True)
class SuiteDataset:
    """One dataset of a suite."""

    name: str
    """Short name, also the directory name of generated data (``pointmaze-umaze``)."""
    family: str
    """Family (``maze2d``, ``classic``): recipes and published numbers are per family."""
    shipped: str | None = None
    """Path of a dataset in this checkout (relative to it); None: generated."""
    generator: str | None = None
    """``module:function`` of our generator (``generate(name, out, *, steps, seed)``); None: shipped."""
    steps: dict[str, int] = field(default_factory=dict)
    """Generated sizes: size name (one of ``offlinerl.benchmark.SIZES``: ``tiny`` for CI, ``small``, ``full`` =
    the published size) -> env steps."""
    recipe_prefix: str | None = None
    """Recipes ``jobs/<prefix>-<algorithm>.yaml`` (the classic datasets); None: the family's recipes."""
    env_package: str | None = None
    """Package to import before its env is made (``gymnasium_robotics``)."""
    published_name: str | None = None
    """The published dataset this one mirrors (``maze2d-umaze-v1``), for the comparison columns."""
    generator_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Further keyword arguments of the generator per size (the locomotion family: which SAC agent)."""
    recipe_overrides: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per algorithm, ``--set`` overrides of the family's recipe for this dataset: the published per-dataset
    settings (e.g. ReBRAC's β1 / β2, tuned per D4RL dataset in the paper's configs)."""

    def recipe(self, algorithm: str) -> Path:
        """The job file that trains ``algorithm`` on this dataset; ``FileNotFoundError`` if there is none."""
        path = (REPO / "jobs" / f"{self.recipe_prefix}-{algorithm}.yaml" if self.recipe_prefix
                else RECIPES / f"{self.family}-{algorithm}.yaml")
        if not path.is_file():
            raise FileNotFoundError(f"no {algorithm} recipe for {self.name} (looked for {path})")
        return path

    def materialize(self, data_dir: Path, size: str, *, log: Any = print) -> Path:
        """The dataset's directory: the shipped one, or ``data_dir/<name>-<size>`` (generated if missing)."""
        if self.shipped is not None:
            return REPO / self.shipped
        if size not in self.steps:
            raise ValueError(f"{self.name}: no size {size!r} (sizes: {', '.join(self.steps)})")
        out = Path(data_dir) / f"{self.name}-{size}"
        if not (out / "dataset.json").is_file():
            import importlib

            module, func = self.generator.split(":")
            log(f"generating {self.name} ({self.steps[size]:,} steps) into {out}")
            getattr(importlib.import_module(module), func)(self.name, out, steps=self.steps[size], seed=0,
                                                           **self.generator_kwargs.get(size, {}))
        return out

    def anchors(self, path: Path) -> tuple[float, float]:
        """``(random, expert)`` returns: the dataset card's ``random_return`` and ``best_return`` (shipped datasets
        and our generators write both; :func:`offlinerl.scoring.load_card` checks them)."""
        card = load_card(path)
        if card is None:
            raise ValueError(f"{path}: no card.json, so no normalisation anchors (random_return / best_return)")
        return float(card["random_return"]), float(card["best_return"])


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A named list of datasets, with the algorithms it is meant to compare."""

    name: str
    description: str
    datasets: tuple[SuiteDataset, ...]
    algorithms: tuple[str, ...]
    """The default ``--algorithms``."""

    def dataset(self, name: str) -> SuiteDataset:
        for d in self.datasets:
            if d.name == name:
                return d
        raise KeyError(f"suite {self.name} has no dataset {name!r} (datasets: {', '.join(d.name for d in self.datasets)})")


_MAZE = "offlinerl.benchmark.maze:generate_maze"

SUITES: dict[str, Suite] = {
    "classic": Suite(
        name="classic", description="the three shipped classic-control / MuJoCo mixes (datasets/), tuned job files",
        algorithms=("bc", "cql", "iql"),
        datasets=tuple(SuiteDataset(name=n, family="classic", shipped=f"datasets/{n}-mixed", recipe_prefix=n)
                       for n in ("cartpole", "pendulum", "double-pendulum")),
    ),
    "maze2d": Suite(
        name="maze2d", description="PointMaze stitching (gymnasium-robotics) made with the D4RL maze2d recipe",
        algorithms=("bc", "td3bc", "cql", "iql", "rebrac"),
        datasets=tuple(
            SuiteDataset(name=f"pointmaze-{m}", family="maze2d", generator=_MAZE, env_package="gymnasium_robotics",
                         published_name=f"maze2d-{m}-v1",
                         steps={"tiny": 5_000, "small": 100_000, "full": full})
            for m, full in (("umaze", 1_000_000), ("medium", 2_000_000), ("large", 4_000_000))),
    ),
}


_LOCOMOTION = "offlinerl.benchmark.locomotion:generate_locomotion"
#: ReBRAC's per-dataset BC coefficients (actor β1, critic β2) in CORL's D4RL configs
#: (configs/offline/rebrac/<env>/<level>_v2.yaml), which the paper's table uses.
REBRAC_LOCOMOTION_BC = {
    ("halfcheetah", "medium"): (0.001, 0.01), ("halfcheetah", "medium-replay"): (0.01, 0.001),
    ("halfcheetah", "medium-expert"): (0.01, 0.1),
    ("hopper", "medium"): (0.01, 0.01), ("hopper", "medium-replay"): (0.05, 0.5), ("hopper", "medium-expert"): (0.1, 0.01),
    ("walker2d", "medium"): (0.05, 0.1), ("walker2d", "medium-replay"): (0.05, 0.01),
    ("walker2d", "medium-expert"): (0.01, 0.01),
}


def _rebrac_bc(env: str, level: str) -> tuple[str, ...]:
    actor, critic = REBRAC_LOCOMOTION_BC[(env, level)]
    return (f"config.actor_bc_coef={actor}", f"config.critic_bc_coef={critic}")


#: EDAC's per-dataset settings where CORL's D4RL configs (configs/offline/edac/<env>/<level>_v2.yaml) differ from
#: the family's recipe (10 critics, eta 1): hopper's ensemble, the medium-expert sets' eta.
EDAC_LOCOMOTION = {"hopper": ("config.num_critics=50",), ("halfcheetah", "medium-expert"): ("config.eta=5.0",),
                   ("walker2d", "medium-expert"): ("config.eta=5.0",)}


def _edac(env: str, level: str) -> tuple[str, ...]:
    return (*EDAC_LOCOMOTION.get(env, ()), *EDAC_LOCOMOTION.get((env, level), ()))


SUITES["locomotion"] = Suite(
    name="locomotion", description="hopper / halfcheetah / walker2d (gymnasium MuJoCo v5) at the D4RL levels, made "
    "with our SAC agents (src/offlinerl/benchmark/locomotion.py)",
    algorithms=("bc", "td3bc", "cql", "iql", "rebrac"),
    datasets=tuple(
        SuiteDataset(name=f"{env}-{level}", family="locomotion", generator=_LOCOMOTION,
                     published_name=f"{env}-{level}-v2",
                     # env steps per policy level; tiny trains a tiny SAC agent first, the others use the shipped ones
                     steps={"tiny": 1_000, "small": 100_000, "full": 1_000_000},
                     generator_kwargs={"tiny": {"agent": "tiny"}},
                     recipe_overrides={"rebrac": _rebrac_bc(env, level), "edac": _edac(env, level)})
        for env in ("hopper", "halfcheetah", "walker2d") for level in ("medium", "medium-replay", "medium-expert")),
)


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r} (suites: {', '.join(SUITES)})")
    return SUITES[name]


def published_scores(published_name: str | None) -> dict[str, float]:
    """Published normalised scores (algorithm -> score) of the dataset ``published_name`` mirrors."""
    if published_name is None:
        return {}
    table = json.loads(_PUBLISHED.read_text())["datasets"]
    return {k: float(v) for k, v in table.get(published_name, {}).items()}


def published_family(family: str) -> dict[str, float]:
    """Published mean normalised scores (algorithm -> score) over the family's datasets."""
    return {k: float(v) for k, v in json.loads(_PUBLISHED.read_text())["families"].get(family, {}).items()}
