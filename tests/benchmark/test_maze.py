"""The maze-stitching family: the waypoint controller solves the mazes, generation is seeded and honest
(rewards are the evaluation task's), the recorded env spec is the evaluation task, and a Dict-observation
dataset trains and evaluates end to end."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import yaml

pytest.importorskip("gymnasium_robotics")

from offlinerl.benchmark import maze  # noqa: E402
from offlinerl.benchmark.cards import verify_checksums  # noqa: E402
from offlinerl.episodes import load_episodes, parquet_files, read_info  # noqa: E402
from offlinerl.episodes.validate import validate_dataset  # noqa: E402
from offlinerl.trusted import ENV_PACKAGES_VAR  # noqa: E402

UMAZE = maze.MAZES["pointmaze-umaze"]
STEPS = 3_000


@pytest.fixture(scope="module")
def umaze(tmp_path_factory):
    """The same small umaze dataset generated twice (seed 0), and once with seed 1."""
    root = tmp_path_factory.mktemp("maze")
    return [maze.generate_maze("pointmaze-umaze", root / name, steps=STEPS, seed=seed)
            for name, seed in (("a", 0), ("b", 0), ("c", 1))]


@pytest.mark.parametrize("name", sorted(maze.MAZES))
def test_the_grid_places_cells_where_the_env_does(name):
    env = maze.make_env(maze.MAZES[name])
    m, grid = env.unwrapped.maze, maze.MazeGrid(env.unwrapped.maze.maze_map)
    for cell in grid.free:
        np.testing.assert_allclose(grid.xy(cell), m.cell_rowcol_to_xy(np.array(cell)))
        for offset in ((0.45, 0.45), (-0.45, -0.45)):
            assert grid.cell(grid.xy(cell) + offset) == cell == tuple(m.cell_xy_to_rowcol(grid.xy(cell) + offset))
    env.close()


def test_paths_are_shortest_and_run_through_free_adjacent_cells():
    grid = maze.MazeGrid(maze.evaluation_kwargs(UMAZE)["maze_map"])
    path = grid.path(UMAZE.reset_cell, UMAZE.goal_cell)
    assert path == [(3, 2), (3, 3), (2, 3), (1, 3), (1, 2), (1, 1)]
    assert grid.path((1, 1), (1, 1)) == []
    for a, b in zip([UMAZE.reset_cell] + path, path):
        assert abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 and b in grid.free


def test_the_controller_solves_the_evaluation_task_and_random_actions_do_not():
    refs = maze.measure_reference_returns("pointmaze-umaze", episodes=3, seed=5)
    assert refs["expert"] > 120 and refs["random"] < 20  # 300 steps; the path takes ~140 of them


def test_shipped_references_are_of_this_recipe_for_every_maze():
    shipped = json.loads(maze.REFERENCES.read_text())["mazes"]
    assert set(shipped) == set(maze.MAZES)
    for name, refs in shipped.items():
        assert refs["recipe_version"] == maze.RECIPE_VERSION and refs["expert"] > refs["random"] + 100, name
        assert maze.reference_returns(name) == refs  # read from the cache, not measured


def test_generation_is_deterministic_for_a_seed(umaze):
    a, b, c = umaze
    cards = [json.loads((p / "card.json").read_text()) for p in umaze]
    assert cards[0] == cards[1] and cards[0]["data_sha256"] != cards[2]["data_sha256"]
    assert [f.read_bytes() for f in parquet_files(a)] == [f.read_bytes() for f in parquet_files(b)]
    sums = [dict(line.split("  ")[::-1] for line in (p / "SHA256SUMS").read_text().splitlines()) for p in (a, b)]
    assert {k: v for k, v in sums[0].items() if k != "dataset.json"} == \
           {k: v for k, v in sums[1].items() if k != "dataset.json"}  # dataset.json records its creation time
    assert verify_checksums(a) == []
    assert set(sums[0]) == {"card.json", "README.md", "dataset.json", *(f.name for f in parquet_files(a))}


def test_the_dataset_validates_and_its_rewards_are_the_evaluation_tasks(umaze):
    path = umaze[0]
    assert validate_dataset(path).ok
    info = read_info(path)
    assert info.num_steps == STEPS and isinstance(info.observation_space, gym.spaces.Dict)
    episodes = load_episodes(path)
    centre = maze.MazeGrid(info.env_kwargs["maze_map"]).xy(UMAZE.goal_cell)
    for prev, ep in zip([None] + episodes[:-1], episodes):
        assert ep.truncated and not ep.terminated
        goal = ep.obs["desired_goal"]
        assert np.all(goal == goal[0]) and np.all(np.abs(goal[0] - centre) <= 0.25 + 1e-6)
        np.testing.assert_array_equal(ep.obs["achieved_goal"], ep.obs["observation"][:, :2])
        dist = np.linalg.norm(ep.obs["achieved_goal"][1:] - goal[1:], axis=1)
        sure = np.abs(dist - 0.45) > 1e-4  # float32 storage may flip a step exactly on the radius
        np.testing.assert_array_equal(ep.rewards[sure], (dist <= 0.45)[sure].astype(np.float32))
        assert np.all(np.abs(ep.actions) <= 1.0)
        if prev is not None:  # one continuous trajectory: each goal's stretch starts where the last ended
            np.testing.assert_array_equal(ep.obs["observation"][0], prev.obs["observation"][-1])
    card = json.loads((path / "card.json").read_text())
    assert card["goals_reached"] >= len(episodes) - 1 and card["reward_steps"] == sum(e.rewards.sum() for e in episodes)
    assert (card["random_return"], card["best_return"]) == (card["reference_returns"]["random"],
                                                            card["reference_returns"]["expert"])


def test_the_recorded_env_spec_rebuilds_the_evaluation_task(umaze):
    info = read_info(umaze[0])
    assert info.env_id == UMAZE.env_id and info.env_spec["max_episode_steps"] == 300
    kwargs = info.env_kwargs
    assert kwargs["maze_map"][1][1] == "g" and kwargs["maze_map"][3][1] == "r"
    env = gym.make(info.env_id, **kwargs)
    grid = maze.MazeGrid(kwargs["maze_map"])
    assert env.spec.max_episode_steps == 300
    assert env.unwrapped.continuing_task and not env.unwrapped.reset_target
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        assert grid.cell(obs["desired_goal"]) == UMAZE.goal_cell and grid.cell(obs["achieved_goal"]) == UMAZE.reset_cell
    env.close()


@pytest.mark.usefixtures("ray_session")
def test_bc_trains_and_evaluates_on_the_recorded_task_with_dict_observations(umaze, tmp_path, capsys, monkeypatch):
    from offlinerl.cli import main

    monkeypatch.setenv(ENV_PACKAGES_VAR, "")
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(umaze[0]), "stop": {"iterations": 1},
        "config": {"updates_per_iteration": 20, "train_batch_size": 64, "normalize_observations": True,
                   "model": {"hidden": [32]}, "evaluation": {"episodes": 1, "interval": 1}}}))
    code = main(["train", str(job), "--no-progress", "-o", str(tmp_path / "run"), "--env-package", "gymnasium_robotics"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    meta = json.loads((tmp_path / "run" / "checkpoints" / "final" / "algorithm.json").read_text())
    assert meta["env_kwargs"] == read_info(umaze[0]).env_kwargs
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["eval/length_mean"] == 300 and metrics[-1]["eval/episodes"] == 1
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert "final_eval_normalized_score" in result  # the card's anchors
