"""``offlinerl benchmark``: a suite's (dataset, algorithm, seed) runs as sweep trials, one table of normalised
scores computed from the runs' own results, resumable; bad requests are refused before anything runs."""

from __future__ import annotations

import csv
import dataclasses
import importlib.metadata
import json
from pathlib import Path

import pytest
import yaml

from offlinerl.benchmark import SIZES
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
    code = main(["benchmark", "classic", "--algorithms", "bc,marwil,bc", "--seeds", "0-1", "--vectorize",
                 "--datasets", "pendulum,pendulum", "--updates", "40", "--eval-episodes", "2", "--set", "config.lr=5e-4",
                 "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| pendulum |" in captured.out and "IQM [95% CI]" in captured.out
    # the table says what was changed (no size: the classic suite's datasets are shipped)
    assert "Suite `classic` (40 updates, 2 evaluation episodes, `--set config.lr=5e-4`, seeds 0, 1)" in captured.out
    assert "pendulum × bc: 2 seed(s) with pendulum-bc.yaml (config.lr=5e-4) as one vectorised job" in captured.out
    assert "pendulum × marwil: seeds run as separate trials (" in captured.out
    assert captured.out.count("pendulum × bc: 2 seed(s)") == 1 and "resuming" not in captured.out  # named twice: once
    assert "| dataset | bc | marwil |" in captured.out and captured.out.count("| pendulum |") == 1
    # the wall time reported includes making the datasets; none was made here (pendulum is shipped): not said
    assert "s of wall time" in captured.out and "making the datasets" not in captured.out
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
            # one run at a time on the session's 2 CPUs: each run's learner trains on both (the recipes ask for 1)
            assert trial["config"]["num_cpus_per_learner"] == 2
    assert "1 run(s) at a time on 2 CPUs: runs started now train on 2 torch thread(s)" in captured.out
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
    assert spec["algorithms"] == ["bc", "marwil"] and spec["datasets"] == ["pendulum"]
    assert scores["wall_time_s"] >= scores["data_time_s"] >= 0
    assert bc["final_std"] is not None and " ± " in captured.out.split("| pendulum |")[1].splitlines()[0]
    assert (out / "curves.png").stat().st_size > 0 and (out / "scores.csv").is_file()
    # resuming a finished benchmark runs nothing and writes the same table
    before = (out / "scores.md").read_text().split("\n\n")[1]
    assert main(["benchmark", "--resume", str(out), "--no-progress"]) == 0
    assert (out / "scores.md").read_text().split("\n\n")[1] == before


def test_the_runs_at_once_share_the_machines_cpus_unless_told():
    """One run at a time on 2 CPUs trains on both; 4 at once on 16 on 4 each; the sweep's default concurrency (one
    per two CPUs) where none is given; a --set of the learners' CPUs is left alone."""
    from offlinerl.benchmark.run import learner_threads

    assert learner_threads([], None, 2) == (1, 2) and learner_threads([], 1, 2) == (1, 2)
    assert learner_threads([], 2, 2) == (2, 1) and learner_threads([], 4, 16) == (4, 4)
    assert learner_threads(["config.lr=1e-3"], None, 16) == (8, 2) and learner_threads([], 3, 2) == (3, 1)
    assert learner_threads(["config.num_cpus_per_learner=1"], None, 2) is None
    assert learner_threads(["config.num_learners=2"], 1, 8) is None


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
                           (["classic", "--size", "tiny"], "--size: the classic suite's datasets are shipped in this "
                                                           "checkout, none is generated; drop --size"),
                           (["classic", "--data-dir", str(tmp_path / "d")], "--data-dir: the classic suite's datasets "
                                                                           "are shipped"),
                           (["classic", "--max-concurrent", "0"], "--max-concurrent must be >= 1, got 0"),
                           (["maze2d", "--seeds", "0-1000000"], "--seeds '0-1000000': 1,000,001 seeds, one run each "
                                                                "per grid point or pair; give at most 1,000"),
                           # a --set no recipe takes: refused before benchmark.json was written (it was left behind,
                           # and neither -o nor --resume could use the directory again)
                           (["classic", "--datasets", "cartpole", "--algorithms", "bc", "--set", "config.evaluation=7"],
                            "cartpole × bc (cartpole-bc.yaml): config.evaluation: expected a mapping"),
                           (["classic", "--datasets", "cartpole", "--algorithms", "bc", "--set", "config.nope=1"],
                            "cartpole × bc (cartpole-bc.yaml): "),
                           # every pair skipped (no recipe): 0 runs and exit 0 before
                           (["classic", "--datasets", "cartpole", "--algorithms", "td3bc"],
                            "no recipe for td3bc on cartpole in the classic suite: nothing would run"),
                           ([], "give a SUITE")]:
        assert main(["benchmark", *argv, "-o", str(tmp_path / "b")]) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "b").exists() and not (tmp_path / "d").exists()
    # a resumed benchmark keeps what benchmark.json says: any option that would describe another run is refused
    assert main(["benchmark", "--resume", str(tmp_path / "b"), "--size", "tiny", "--seeds", "1"]) == 2
    assert "a resumed benchmark keeps its settings; drop --seeds/--size" in capsys.readouterr().err
    # --size is checked when the command line is read: only the generators' sizes, for any suite
    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "maze2d", "--size", "huge", "-o", str(tmp_path / "b")])
    assert exc.value.code == 2
    assert "argument --size: invalid choice: 'huge' (choose from 'tiny', 'small', 'full')" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["benchmark", "classic", "-o", str(tmp_path / "full")]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    # an output under a file: one line (a NotADirectoryError traceback before)
    assert main(["benchmark", "classic", "--datasets", "cartpole", "-o", str(tmp_path / "full" / "x" / "b")]) == 1
    err = capsys.readouterr().err
    assert "Not a directory" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    # a damaged benchmark.json to resume: one line naming it
    for text, expected in (("[]", "not a benchmark description (TypeError"), ("{}", "not a benchmark description "
                           "(KeyError: 'spec')"), ("nonsense", "not a benchmark description (JSONDecodeError")):
        (tmp_path / "full" / "benchmark.json").write_text(text)
        assert main(["benchmark", "--resume", str(tmp_path / "full")]) == 2, text
        err = capsys.readouterr().err
        assert f"{tmp_path / 'full' / 'benchmark.json'}: {expected}" in err and len(err.strip().splitlines()) == 1, err


def test_the_ci_sized_example_in_the_docs_sets_a_short_budget():
    """docs/benchmark.md's CI-sized example used to run the recipes' 100k-update budgets; it runs in ~45 s now."""
    from offlinerl.benchmark.suites import REPO

    text = (REPO / "docs" / "benchmark.md").read_text().replace("\\\n", " ")
    examples = [line for line in text.splitlines() if line.startswith("offlinerl benchmark") and "CI-sized" in line]
    assert examples
    for line in examples:
        assert "--size tiny" in line and "--algorithms bc" in line and "--updates 500" in line and \
            "--eval-episodes 2" in line, line


def test_the_sizes_offered_are_the_generators_sizes():
    for suite in SUITES.values():
        for d in suite.datasets:
            assert d.shipped is not None or set(d.steps) == set(SIZES), (suite.name, d.name, d.steps)


def _fake_benchmark(root: Path, seeds: list[int], finished: dict[str, list[float]],
                    metrics: dict[str, dict] | None = None) -> None:
    """A benchmark directory of the classic suite on pendulum whose sweeps hold ``finished``: algorithm -> the final
    returns of its first seeds (the others did not finish); ``metrics``: algorithm -> more metrics of its runs."""
    from offlinerl.benchmark.run import BENCHMARK_FILE, BenchmarkSpec, _sweep
    from offlinerl.benchmark.suites import REPO

    spec = BenchmarkSpec(suite="classic", algorithms=list(finished), seeds=seeds, datasets=["pendulum"])
    dataset = get_suite("classic").dataset("pendulum")
    root.mkdir()
    (root / BENCHMARK_FILE).write_text(json.dumps({"spec": dataclasses.asdict(spec),
                                                   "datasets": {"pendulum": str(REPO / dataset.shipped)}}))
    for algorithm, returns in finished.items():
        sweep = _sweep(dataset.recipe(algorithm), [], seeds, False)
        (root / "sweeps" / f"pendulum-{algorithm}").mkdir(parents=True)
        (root / "sweeps" / f"pendulum-{algorithm}" / "sweep.json").write_text(sweep.to_json())
        for trial, ret in zip(sweep.trials, returns):
            run = root / "sweeps" / f"pendulum-{algorithm}" / "trials" / trial.name
            run.mkdir(parents=True)
            (run / "metrics.jsonl").write_text(json.dumps({"learner/updates": 40, "eval/return_mean": ret,
                                                           **(metrics or {}).get(algorithm, {})}) + "\n")
            (run / "result.json").write_text(json.dumps({"final_eval_return": ret, "best_eval_return": ret,
                                                         "updates": 40, "train_time_s": 1.0}))


def test_one_seed_gives_a_score_without_a_spread_or_an_interval(tmp_path):
    """One finished seed has no standard deviation (not 0) and resamples to no interval: the table shows the score
    alone and the IQM with [n/a]; two seeds keep their ± std and interval."""
    from offlinerl.benchmark.run import summarize_benchmark

    _fake_benchmark(tmp_path / "two", [0, 1], {"bc": [-800.0, -400.0], "iql": [-600.0]})  # iql: seed 1 unfinished
    summary = summarize_benchmark(tmp_path / "two", wall_time_s=30.0, data_time_s=12.0)
    bc, iql = summary["cells"]["pendulum/bc"], summary["cells"]["pendulum/iql"]
    assert bc["final_std"] > 0 and iql["final_std"] is None
    assert summary["algorithms"]["bc"]["iqm_ci"] is not None and summary["algorithms"]["iql"]["iqm_ci"] is None
    table = (tmp_path / "two" / "scores.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| pendulum |")).split(" | ")
    assert "±" in row[1] and "±" not in row[2], row
    iqm_row = next(line for line in table.splitlines() if line.startswith("| **IQM")).split(" | ")
    assert iqm_row[1].count(",") == 1 and iqm_row[2].endswith(" [n/a] |"), iqm_row
    assert "mean ± std over seeds" in table
    assert "this invocation took 30 s of wall time, 12 s of it making the datasets." in table
    with (tmp_path / "two" / "scores.csv").open() as f:
        rows = {r["algorithm"]: r for r in csv.DictReader(f)}
    assert float(rows["bc"]["final_std"]) > 0 and rows["iql"]["final_std"] == "" and rows["iql"]["runs"] == "1"
    _fake_benchmark(tmp_path / "one", [0], {"bc": [-500.0]})
    summarize_benchmark(tmp_path / "one")
    table = (tmp_path / "one" / "scores.md").read_text()
    assert "±" not in table.split("\n\n")[1] and "| **IQM [95% CI]** | " in table and " [n/a] |" in table, table
    assert "mean over seeds (one seed: no ± std, no interval)" in table


def test_the_table_names_a_run_whose_actor_sat_at_the_action_bounds(tmp_path):
    from offlinerl.benchmark.run import summarize_benchmark

    saturated = {"td3bc/actor_at_bounds": 1.0, "td3bc/data_at_bounds": 0.04}
    _fake_benchmark(tmp_path / "b", [0, 1], {"bc": [-500.0, -400.0], "td3bc": [-1200.0, -300.0]},
                    metrics={"td3bc": saturated})
    table = (summarize_benchmark(tmp_path / "b"), (tmp_path / "b" / "scores.md").read_text())[1]
    said = table.split("What the jobs said:\n\n")[1].splitlines()
    assert [line.split(":")[0] for line in said] == ["- td3bc on pendulum, 000_seed-0", "- td3bc on pendulum, 001_seed-1"]
    assert "at the action bounds after 40 updates: 100% of its action components" in said[0]
    assert "lower config.alpha" in said[0]
    _fake_benchmark(tmp_path / "c", [0], {"bc": [-500.0]})
    assert "What the jobs said" not in (summarize_benchmark(tmp_path / "c"), (tmp_path / "c" / "scores.md").read_text())[1]


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
    # the table names the data it ran on: its digest and the software that made it
    data_dir = Path(json.loads((out / "benchmark.json").read_text())["datasets"]["pointmaze-umaze"])
    card = json.loads((data_dir / "card.json").read_text())
    data = json.loads((out / "scores.json").read_text())["data"]["pointmaze-umaze"]
    assert data["data_sha256"] == card["data_sha256"] and data["made_with"] == card["made_with"]
    assert data["simulator_mismatch"] == [] and "made with another" not in captured.out
    line = next(x for x in (out / "scores.md").read_text().splitlines() if x.startswith("- pointmaze-umaze: "))
    assert card["data_sha256"][:16] in line and f"MuJoCo {card['made_with']['packages']['mujoco']}" in line
    # data made under another MuJoCo: said before the runs and in the table
    card["made_with"]["packages"]["mujoco"] = "4.0.1"
    (data_dir / "card.json").write_text(json.dumps(card))
    code = main(["benchmark", "maze2d", "--datasets", "pointmaze-umaze", "--size", "tiny", "--algorithms", "bc",
                 "--seeds", "0", "--updates", "20", "--eval-episodes", "1", "-o", str(tmp_path / "again"),
                 "--data-dir", str(data_dir.parent), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    installed = importlib.metadata.version("mujoco")
    assert f"note: pointmaze-umaze was made with mujoco 4.0.1 (this machine: {installed})" in captured.err
    table = (tmp_path / "again" / "scores.md").read_text()
    assert f"**not this machine's: mujoco 4.0.1 (this machine: {installed})**" in table
