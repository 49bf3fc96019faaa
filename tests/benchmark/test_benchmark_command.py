"""``offlinerl benchmark``: a suite's (dataset, algorithm, seed) runs as sweep trials, one table of normalised
scores computed from the runs' own results, resumable; bad requests are refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from offlinerl.benchmark.suites import SUITES, get_suite, published_family, published_scores
from offlinerl.cli import main
from offlinerl.scoring import iqm, normalized_score


def test_every_suite_dataset_has_its_recipes_and_published_numbers():
    for suite in SUITES.values():
        for d in suite.datasets:
            for algorithm in suite.algorithms:  # the suite's default algorithms all have a recipe
                assert d.recipe(algorithm).is_file()
    with pytest.raises(FileNotFoundError, match="no td3bc recipe for cartpole"):
        get_suite("classic").dataset("cartpole").recipe("td3bc")  # discrete actions: none
    assert published_scores("maze2d-umaze-v1")["iql"] == 42.11
    assert published_family("maze2d")["rebrac"] == 96.8 and published_scores(None) == {}


@pytest.mark.usefixtures("ray_session")
def test_a_tiny_benchmark_scores_every_run_vectorises_where_it_can_and_resumes(tmp_path, capsys):
    """One run of two pairs: BC's seeds as one vectorised job, MARWIL's (its running advantage norm cannot be
    stacked) as separate trials; a --set reaches every run; scores are the runs' own; resuming changes nothing."""
    out = tmp_path / "bench"
    code = main(["benchmark", "classic", "--algorithms", "bc,marwil", "--seeds", "0-1", "--vectorize",
                 "--datasets", "pendulum", "--updates", "40", "--eval-episodes", "2", "--set", "config.lr=5e-4",
                 "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| pendulum |" in captured.out and "IQM [95% CI]" in captured.out
    assert "40 updates, `--set config.lr=5e-4`, seeds 0, 1" in captured.out  # the table says what was changed
    assert "pendulum × bc: 2 seed(s) with pendulum-bc.yaml (config.lr=5e-4) as one vectorised job" in captured.out
    assert "pendulum × marwil: seeds run as separate trials (" in captured.out
    scores = json.loads((out / "scores.json").read_text())
    bc, marwil = scores["cells"]["pendulum/bc"], scores["cells"]["pendulum/marwil"]
    assert [r["trial"] for r in bc["runs"]] == ["000/seed-0", "000/seed-1"]
    assert [r["group"] for r in marwil["runs"]] == [None, None] and len(marwil["runs"]) == 2
    assert bc["updates"] == marwil["updates"] == 40
    sweeps = out / "sweeps"
    for pair, cell in (("pendulum-bc", bc), ("pendulum-marwil", marwil)):
        for seed, run in enumerate(cell["runs"]):  # --set reached every run, over the recipe's own value
            trial = yaml.safe_load((sweeps / pair / "trials" / run["trial"] / "config.yaml").read_text())
            assert trial["config"]["lr"] == 5e-4 and trial["config"]["seed"] == seed
    random, best = marwil["anchors"]
    card = json.loads((Path(json.loads((out / "benchmark.json").read_text())["datasets"]["pendulum"]) / "card.json").read_text())
    assert (random, best) == (card["random_return"], card["best_return"])
    for run in marwil["runs"]:  # each score is the run's own final return, normalised with the card's anchors
        result = json.loads((sweeps / "pendulum-marwil" / "trials" / run["trial"] / "result.json").read_text())
        assert run["final"] == pytest.approx(normalized_score(result["final_eval_return"], random, best))
    assert scores["algorithms"]["marwil"]["iqm"] == pytest.approx(iqm([r["final"] for r in marwil["runs"]]))
    group = json.loads((sweeps / "pendulum-bc" / "trials" / "000" / "result.json").read_text())
    assert group["num_seeds"] == 2 and group["seeds"] == [0, 1]
    for run, replica in zip(bc["runs"], group["replicas"]):  # each seed's score is its own run's final return
        assert run["final"] == pytest.approx(normalized_score(replica["final_eval_return"], random, best))
    # the seeds trained together: the pair's training time is the joint job's, not the sum of its seeds'
    times = [json.loads((sweeps / "pendulum-bc" / "trials" / r["trial"] / "result.json").read_text())
             ["train_time_s"] for r in bc["runs"]]
    assert bc["train_time_s"] == pytest.approx(max(times))
    spec = json.loads((out / "benchmark.json").read_text())["spec"]
    assert spec["vectorize"] is True and spec["overrides"] == ["config.lr=5e-4"]
    assert (out / "curves.png").stat().st_size > 0 and (out / "scores.csv").is_file()
    # resuming a finished benchmark runs nothing and writes the same table
    before = (out / "scores.md").read_text().split("\n\n")[1]
    assert main(["benchmark", "--resume", str(out), "--no-progress"]) == 0
    assert (out / "scores.md").read_text().split("\n\n")[1] == before


def test_bad_requests_are_refused_before_anything_runs(tmp_path, capsys):
    for argv, expected in [(["nosuch"], "unknown suite 'nosuch'"),
                           (["classic", "--algorithms", "bc,nope"], "unknown 'nope'"),
                           (["classic", "--seeds", "a"], "give integers"),
                           (["classic", "--datasets", "moon"], "has no dataset 'moon'"),
                           (["classic", "--updates", "0"], "--updates must be >= 1"),
                           (["classic", "--seeds", "0,2", "--vectorize"], "consecutive seeds"),
                           (["classic", "--set", "dataset=/tmp/x"], "the benchmark sets dataset of every run"),
                           (["classic", "--set", "config.seed=3"], "the benchmark sets config.seed of every run"),
                           (["classic", "--set", "lr"], "--set expects KEY=VALUE"),
                           (["--resume", str(tmp_path / "b"), "--set", "config.lr=1"], "keeps its settings"),
                           ([], "give a SUITE")]:
        assert main(["benchmark", *argv, "-o", str(tmp_path / "b")]) == 2, argv
        assert expected in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["benchmark", "classic", "-o", str(tmp_path / "full")]) == 1
    assert "exists and is not empty" in capsys.readouterr().err


@pytest.mark.usefixtures("ray_session")
def test_the_maze_suite_runs_at_tiny_size_on_its_recorded_task(tmp_path, capsys, monkeypatch):
    from offlinerl.trusted import ENV_PACKAGES_VAR

    monkeypatch.setenv(ENV_PACKAGES_VAR, "")  # the suite allows gymnasium_robotics itself; restored afterwards
    out = tmp_path / "maze"
    code = main(["benchmark", "maze2d", "--datasets", "pointmaze-umaze", "--size", "tiny", "--algorithms", "bc",
                 "--seeds", "0", "--updates", "20", "--eval-episodes", "1", "-o", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| pointmaze-umaze |" in captured.out and "[0.4]" in captured.out  # CORL's maze2d-umaze BC: 0.36
    assert "| published family mean | 1.1 |" in captured.out
    cell = json.loads((out / "scores.json").read_text())["cells"]["pointmaze-umaze/bc"]
    assert len(cell["runs"]) == 1 and cell["anchors"][1] > cell["anchors"][0]
    run = out / "sweeps" / "pointmaze-umaze-bc" / "trials" / cell["runs"][0]["trial"]
    meta = json.loads((run / "checkpoints" / "final" / "algorithm.json").read_text())
    assert meta["env_id"] == "PointMaze_UMaze-v3"
    assert meta["env_kwargs"]["max_episode_steps"] == 300 and meta["env_kwargs"]["reset_target"] is False
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["eval/length_mean"] == 300  # the evaluation task's time limit, from the recorded spec
