"""Sweeps: the grid, the trials, the summary (no Ray here), and a real sweep on the test session's Ray that is
killed mid-trial and resumed: the resumed trial ends exactly like an uninterrupted one."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from offlinerl.cli import main
from offlinerl.config_io import ConfigError
from offlinerl.jobs.sweep import SweepSpec, parse_grid, plan_trials, summarize
from offlinerl.jobs.sweep import trials as trials_module
from offlinerl.jobs.sweep.trials import progress_line
from tests.datagen import make_dataset
from tests.processes import interrupt_once_written, kill_once_written


def test_grid_values_parse_like_set_and_keep_commas_inside_brackets():
    grid = parse_grid(["config.beta=1,3.5,10", "config.model.hidden=[64,64],[256, 256]", "stop.updates=100"])
    assert grid == {"config.beta": [1, 3.5, 10], "config.model.hidden": [[64, 64], [256, 256]], "stop.updates": [100]}
    for bad, why in [("config.beta", "KEY=V1,V2"), ("config.beta=", "at least one value"),
                     ("config.seed=1,2", "--seeds")]:
        with pytest.raises(ConfigError, match=why):
            parse_grid([bad])
    with pytest.raises(ConfigError, match="given twice"):
        parse_grid(["config.beta=1", "config.beta=2"])


def test_trials_are_the_product_of_the_grid_times_the_seeds_in_order():
    trials = plan_trials({"config.beta": [1, 10], "config.model.hidden": [[64, 64]]}, [0, 1], ["stop.updates=50"])
    assert [t.name for t in trials] == ["000_beta-1_model.hidden-64-64_seed-0", "001_beta-1_model.hidden-64-64_seed-1",
                                        "002_beta-10_model.hidden-64-64_seed-0", "003_beta-10_model.hidden-64-64_seed-1"]
    assert trials[3].overrides == ["stop.updates=50", "config.beta=10", "config.model.hidden=[64, 64]", "config.seed=1"]
    assert trials[3].point == {"config.beta": 10, "config.model.hidden": [64, 64]} and trials[3].seed == 1
    only = plan_trials({}, [])
    assert [(t.name, t.overrides) for t in only] == [("000", [])]


def test_a_running_trials_progress_line_gives_updates_rate_time_left_and_last_evaluation():
    record = {"learner/updates": 10000.0, "perf/updates_per_s": 20.0, "eval/return_mean": 1234.56}
    assert progress_line("000_seed-0", record, 30000) == (
        "  000_seed-0: 10,000 / 30,000 updates, 20.0 upd/s, ~17 min left, eval return 1234.6")
    assert progress_line("t", {"learner/updates": 500.0, "perf/updates_per_s": 99.5}) == "  t: 500 updates, 99.5 upd/s"
    assert progress_line("t", {"iteration": 1}) is None


def _fake_trial(root: Path, name: str, final: float | None, best: float, curve: list[float],
                extra: dict | None = None) -> None:
    run = root / "trials" / name
    run.mkdir(parents=True)
    lines = [{"iteration": i + 1, "learner/updates": 100 * (i + 1), "eval/return_mean": r, **(extra or {})}
             for i, r in enumerate(curve)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run / "result.json").write_text(json.dumps({"final_eval_return": final, "best_eval_return": best,
                                                 "updates": 100 * len(curve), "train_time_s": 2.0}))


def test_summary_gives_mean_and_std_over_finished_seeds_per_grid_point(tmp_path):
    trials = plan_trials({"config.beta": [1, 10]}, [0, 1])
    spec = SweepSpec(job="p.yaml", workdir=str(tmp_path), overrides=[], grid={"config.beta": [1, 10]},
                     seeds=[0, 1], trials=trials)
    _fake_trial(tmp_path, trials[0].name, 10.0, 12.0, [5.0, 10.0])
    _fake_trial(tmp_path, trials[1].name, 20.0, 20.0, [15.0, 20.0])
    _fake_trial(tmp_path, trials[2].name, 7.0, 9.0, [9.0, 7.0],  # trials[3] did not finish
                extra={"rebrac/actor_at_bounds": 0.99, "rebrac/data_at_bounds": 0.05})
    out = summarize(tmp_path, spec)
    a, b = out["rows"]
    assert (a["config.beta"], a["trials"], a["finished"]) == (1, 2, 2)
    assert a["final_eval_return_mean"] == 15.0 and a["final_eval_return_std"] == 5.0  # population std of 10, 20
    assert a["best_eval_return_mean"] == 16.0 and a["best_eval_return_std"] == 4.0
    assert (b["finished"], b["final_eval_return_mean"], b["final_eval_return_std"]) == (1, 7.0, 0.0)
    assert out["best"]["config.beta"] == 1 and out["keys"] == ["config.beta"]
    with (tmp_path / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["config.beta"] for r in rows] == ["1", "10"] and math.isclose(float(rows[0]["final_eval_return_mean"]), 15)
    md = (tmp_path / "summary.md").read_text()
    assert "| 1 | 2/2 | 15.0 ± 5.0 | 16.0 ± 4.0 |" in md and "| 10 | 1/2 | 7.0 ± 0.0 | 9.0 ± 0.0 |" in md
    said = md.split("What the jobs said:\n\n")[1].splitlines()  # the loop's notice, from the first line it fits
    assert len(said) == 1 and said[0].startswith(f"- {trials[2].name}: the actor is at the action bounds after 100 "
                                                 "updates: 99% of its action components") and out["notices"] == said
    assert (tmp_path / "sweep.png").stat().st_size > 5000


def test_a_sweep_json_written_before_the_job_key_still_reads(tmp_path):
    """Sweeps written before 2026-12-03 name their job file ``pipeline``: --resume still reads them."""
    trials = plan_trials({}, [0])
    fields = {"workdir": str(tmp_path), "overrides": [], "grid": {}, "seeds": [0], "trials": [vars(t) for t in trials]}
    (tmp_path / "sweep.json").write_text(json.dumps({"pipeline": "/jobs/bc.yaml", **fields}))
    spec = SweepSpec.from_file(tmp_path / "sweep.json")
    assert spec.job == "/jobs/bc.yaml" and [t.name for t in spec.trials] == ["000_seed-0"]
    assert json.loads(spec.to_json())["job"] == "/jobs/bc.yaml" and "pipeline" not in spec.to_json()


def test_sweep_command_refuses_bad_requests_before_anything_runs(tmp_path, capsys):
    job = tmp_path / "p.yaml"
    job.write_text(yaml.safe_dump({"algorithm": "bc", "dataset": str(tmp_path / "none"), "stop": {"updates": 1}}))
    for argv, message in [
        ([], "give a JOB_FILE"),
        ([str(job), "--resume", str(tmp_path)], "not both"),
        (["--resume", str(tmp_path), "--grid", "config.lr=1"], "keeps its grid"),
        ([str(job), "--grid", "config.no_such_key=1,2"], "no_such_key"),
        ([str(job), "--seeds", "a,b"], "give integers"),
        ([str(job), "--max-concurrent", "0"], "--max-concurrent must be >= 1, got 0"),
        ([str(job), "--cpus-per-trial", "0"], "--cpus-per-trial must be a positive number, got 0"),
        ([str(job), "--cpus-per-trial", "-2"], "--cpus-per-trial must be a positive number, got -2"),
        ([str(job), "--cpus-per-trial", "nan"], "--cpus-per-trial must be a positive number, got nan"),
        ([str(job), "--seeds", "0-1000000"], "1,000,001 seeds"),
        (["--resume", str(tmp_path)], "not a sweep directory"),
    ]:
        assert main(["sweep", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "sweeps").exists()

    # A sweep.json someone handed over cannot make --resume delete or write outside its trials/ directory.
    sweep = tmp_path / "handed"
    sweep.mkdir()
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "data.txt").write_text("keep")
    spec = {"job": str(job), "workdir": str(tmp_path), "overrides": [], "grid": {}, "seeds": [],
            "trials": [{"name": "../../precious", "point": {}, "seed": None, "overrides": []}]}
    (sweep / "sweep.json").write_text(json.dumps(spec))
    assert main(["sweep", "--resume", str(sweep)]) == 2
    assert "trial names must be unique plain file names" in capsys.readouterr().err
    assert (victim / "data.txt").read_text() == "keep"


def test_a_trial_waits_until_no_earlier_process_of_it_is_left(tmp_path, monkeypatch):
    """A killed sweep's trial process lives on until Ray reaps its Tune worker: the trial's lock passes to its train
    process, and a resumed trial waits for it rather than start a second job in the same run directory."""
    from offlinerl.jobs.sweep import trials

    run = tmp_path / "trials" / "000"
    run.parent.mkdir()
    with trials._trial_lock(run) as fd:  # a trial starts its train process, then its worker dies
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(fd,))
    try:
        monkeypatch.setattr(trials, "LOCK_WAIT_S", 0.5)
        with pytest.raises(RuntimeError, match=r"trial 000: an earlier process of it still holds .*000\.lock"):
            with trials._trial_lock(run):
                pass
    finally:
        child.kill()
        child.wait()
    started = time.monotonic()
    with trials._trial_lock(run):  # gone: the resumed trial goes ahead at once
        assert time.monotonic() - started < 0.5


@pytest.mark.slow
def test_ctrl_c_stops_the_sweep_and_resume_finishes_it(ray_session, tmp_path, capsys):
    """Ctrl-C ends the sweep (exit 130, how to resume), not only Tune's run: Tune's own handler stopped its run and
    returned, so the sweep printed a summary with exit 0, and a benchmark went on to its next sweep."""
    data = make_dataset(tmp_path / "cartpole", episodes=6)
    job = tmp_path / "bc.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data),
        "config": {"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [16]},
                   "evaluation": {"interval": 0}},
        "stop": {"iterations": 30}, "checkpoint_interval": 1}))
    sweep = tmp_path / "sweep"
    argv = ["sweep", str(job), "--seeds", "0-1", "--max-concurrent", "1", "-o", str(sweep)]
    code, err = interrupt_once_written(argv, sweep / "trials" / "000_seed-0" / "checkpoints" / "iter-000002")
    assert code == 130, err
    assert "offlinerl sweep: interrupted; continue with  offlinerl sweep --resume SWEEP_DIR" in err
    assert "Traceback" not in err and not (sweep / "summary.md").exists()
    assert not (sweep / "trials" / "001_seed-1" / "result.json").exists()
    assert main(["sweep", "--resume", str(sweep), "--address", ray_session.get_runtime_context().gcs_address]) == 0
    assert "| 2/2 |" in capsys.readouterr().out


def test_a_killed_sweep_resumes_and_its_resumed_trial_equals_an_uninterrupted_one(ray_session, tmp_path, capsys):
    data = make_dataset(tmp_path / "cartpole", episodes=6)
    job = tmp_path / "bc.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data),
        "config": {"seed": 0, "updates_per_iteration": 400, "train_batch_size": 32, "model": {"hidden": [16]},
                   "evaluation": {"episodes": 2, "interval": 2}},
        "stop": {"iterations": 10}, "checkpoint_interval": 1}))
    sweep = tmp_path / "sweep"
    # Two spellings of the same learning rate (a quoted string the config reads as a number, and the number):
    # the two trials are the same job, so the one killed and resumed must end exactly like the one that ran through.
    argv = ["sweep", str(job), "--grid", "config.lr='1e-3',0.001", "--max-concurrent", "1", "-o", str(sweep)]
    first = sweep / "trials" / "000_lr-1e-3"
    # Killed after its 2nd of 10 iterations: the trial's train process dies only once Ray has seen the sweep die
    # (PR_SET_PDEATHSIG on its worker), so the job must have seconds of work left then, not the tenths that
    # 20 updates an iteration left on an idle machine (it had finished: "killed too late").
    kill_once_written(argv, first / "checkpoints" / "iter-000002")
    assert not (first / "result.json").exists()

    assert main(["sweep", "--resume", str(sweep), "--address", ray_session.get_runtime_context().gcs_address]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 trials to run" in out and "| 1e-3 | 1/1 |" in out and "| 0.001 | 1/1 |" in out
    attempts = json.loads((sweep / "trials" / "000_lr-1e-3.json").read_text())["attempts"]
    assert [a["exit"] for a in attempts] == [None, 0]  # killed (never finished), then resumed to the end
    assert "--resume" not in attempts[0]["command"] and attempts[1]["command"][-2:] == ["--resume", str(first)]
    assert all(a["node"] == ray_session.get_runtime_context().get_node_id() for a in attempts)

    def metrics(run):
        return [{k: v for k, v in json.loads(line).items() if not k.startswith(("perf/", "time/"))}
                for line in (run / "metrics.jsonl").read_text().splitlines()]

    second = sweep / "trials" / "001_lr-0.001"
    assert [m["iteration"] for m in metrics(first)] == list(range(1, 11))
    assert metrics(first) == metrics(second)
    results = [json.loads((run / "result.json").read_text()) for run in (first, second)]
    assert results[0]["final_eval_return"] == results[1]["final_eval_return"] is not None
    spec = json.loads((sweep / "sweep.json").read_text())
    assert spec["grid"] == {"config.lr": ["1e-3", 0.001]} and len(spec["trials"]) == 2
    assert (sweep / "summary.csv").is_file() and (sweep / "sweep.png").is_file()
    summary = json.loads((sweep / "summary.json").read_text())
    assert len(summary["trial_nodes"]["000_lr-1e-3"]) == 2 and len(summary["trial_nodes"]["001_lr-0.001"]) == 1

    assert main(["sweep", "--resume", str(sweep), "--address", ray_session.get_runtime_context().gcs_address]) == 0
    assert "trials to run" not in capsys.readouterr().out  # nothing left: the summary is written again


def test_seeds_parse_as_lists_and_ranges():
    from offlinerl.jobs.sweep import parse_seeds

    assert parse_seeds("0-3,10") == [0, 1, 2, 3, 10] and parse_seeds("5") == [5] and parse_seeds(None) == []
    for bad, why in [("3-1", "runs backwards"), ("1,1", "given twice"), ("a", "give integers"), ("0-", "give integers")]:
        with pytest.raises(ConfigError, match=why):
            parse_seeds(bad)
    assert parse_seeds("0-999") == list(range(1000))  # MAX_SEEDS
    for bad, count in [("0-1000", "1,001"), ("0-999,5000", "1,001"), ("0-99999999999999999", "100,000,000,000,000,000")]:
        with pytest.raises(ConfigError, match=f"{count} seeds, .*give at most 1,000"):  # counted, never expanded
            parse_seeds(bad)


# -- refused before anything runs: trial reservations no node can hold, a job file that is not YAML ------------------
# Each case below names a dataset that does not exist: were a check missing, the sweep would find that dataset invalid
# in its validation pass and run no trial (exit 1), so no case can wait on a trial that is never scheduled.


def _missing_dataset_job(tmp_path: Path) -> Path:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"algorithm": "bc", "dataset": str(tmp_path / "no-dataset"), "stop": {"updates": 1}}))
    return job


def _sweep_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, "-m", "offlinerl", "sweep", *args, "--no-progress"], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_more_cpus_per_trial_than_the_local_ray_starts_with_is_refused_before_ray_starts(tmp_path):
    """Used to wait forever: Tune cannot place a 1000-CPU trial on a local Ray of this machine's CPUs."""
    from offlinerl.ray_utils import local_cpus

    out = tmp_path / "sweep"
    proc = _sweep_process(str(_missing_dataset_job(tmp_path)), "--cpus-per-trial", "1000", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (f"offlinerl sweep: --cpus-per-trial 1000: the local Ray starts with {local_cpus(None)} "
                                   f"CPUs (this machine's), so no trial could ever be scheduled; give at most "
                                   f"{local_cpus(None)}"), proc.stderr
    assert "starting Ray" not in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_more_cpus_per_trial_than_the_joined_cluster_has_is_refused_before_anything_is_written(ray_session, tmp_path,
                                                                                               capsys):
    """In this process (Ray running: the test session's 2 CPUs) and in a process that joins it with --address, where
    the check can only come after joining: both before the sweep directory exists and before any trial."""
    job = _missing_dataset_job(tmp_path)
    out = tmp_path / "sweep"
    assert main(["sweep", str(job), "--cpus-per-trial", "3", "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("offlinerl sweep: --cpus-per-trial 3: the Ray cluster has 2 CPUs, so no trial could ever be "
                           "scheduled; give at most 2"), err
    assert not out.exists()
    address = ray_session.get_runtime_context().gcs_address
    proc = _sweep_process(str(job), "--cpus-per-trial", "3", "--address", address, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "offlinerl sweep: --cpus-per-trial 3: the Ray cluster has 2 CPUs, so no trial could ever be scheduled; " \
           "give at most 2" in proc.stderr.splitlines(), proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_a_job_file_that_is_not_yaml_is_named_with_its_line_in_one_line(tmp_path, capsys):
    job = tmp_path / "broken.yaml"
    job.write_text(f"algorithm: bc\ndataset: {tmp_path / 'no-dataset'}\nconfig:\n  lr: [1, 2\n  gamma: 0.9\n")
    out = tmp_path / "sweep"
    assert main(["sweep", str(job), "--grid", "config.lr=1,2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"offlinerl sweep: {job}: line 5, column 8: not valid YAML: expected ',' or ']', but got ':' "
                   "(while parsing a flow sequence at line 4, column 7)\n"), err
    assert not out.exists()
    from offlinerl.config_io import load_file

    job.write_text("algorithm: bc\n\tdataset: x\n")  # a tab: a scanner error, with no context mark
    with pytest.raises(ConfigError, match=r"broken\.yaml: line 2, column 1: not valid YAML: found character '\\t'"):
        load_file(job)
    job.write_text("algorithm: bc\ndataset: x\n")
    assert load_file(job) == {"algorithm": "bc", "dataset": "x"}
    # every command reads its files through the same loader: train says it the same way
    job.write_text("algorithm: bc\nconfig: {lr: [1, 2}\n")
    assert main(["train", str(job), "-o", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"offlinerl train: {job}: line 2, column ") and "not valid YAML" in err and len(
        err.splitlines()) == 1, err


def test_a_vectorised_sweep_plans_one_group_per_grid_point_and_reads_back_safely(tmp_path):
    trials = plan_trials({"config.beta": [1, 10]}, [3, 4, 5], ["stop.updates=50"], vectorize=True)
    assert [t.name for t in trials] == ["000_beta-1/seed-3", "000_beta-1/seed-4", "000_beta-1/seed-5",
                                        "001_beta-10/seed-3", "001_beta-10/seed-4", "001_beta-10/seed-5"]
    assert {t.group for t in trials} == {"000_beta-1", "001_beta-10"}
    assert trials[4].overrides == ["stop.updates=50", "config.beta=10", "config.seed=4"]
    for seeds, overrides in [([0, 2], []), ([1], []), ([], []), ([0, 1], ["config.seed=3"])]:
        with pytest.raises(ConfigError, match="--vectorize"):
            plan_trials({}, seeds, overrides, vectorize=True)
    spec = SweepSpec(job="p.yaml", workdir=str(tmp_path), overrides=[], grid={"config.beta": [1, 10]},
                     seeds=[3, 4, 5], trials=trials, vectorize=True)
    (tmp_path / "sweep.json").write_text(spec.to_json())
    assert SweepSpec.from_file(tmp_path / "sweep.json") == spec
    # a handed-over sweep.json: a seed name or group leading out of trials/ is refused, as are slashes elsewhere
    for name, group, vectorize in [("../x/seed-1", "000", True), ("000/seed-1", "..", True),
                                   ("000/seed-1", "000", False), ("000/../../x", "000", True)]:
        bad = {**json.loads(spec.to_json()), "vectorize": vectorize,
               "trials": [{"name": name, "point": {}, "seed": 1, "overrides": [], "group": group}]}
        (tmp_path / "sweep.json").write_text(json.dumps(bad))
        with pytest.raises(ConfigError, match="plain file names"):
            SweepSpec.from_file(tmp_path / "sweep.json")


@pytest.mark.slow
def test_a_vectorised_sweep_trains_each_grid_points_seeds_as_one_job(ray_session, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trials_module, "PROGRESS_EVERY_S", 0.0)  # every running trial's record as a progress line
    data = make_dataset(tmp_path / "cartpole", episodes=6)
    job = tmp_path / "bc.yaml"
    job.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(data),
        "config": {"updates_per_iteration": 20, "train_batch_size": 32, "model": {"hidden": [16]},
                   "evaluation": {"episodes": 2, "interval": 2}},
        "stop": {"iterations": 2}}))
    sweep = tmp_path / "sweep"
    address = ray_session.get_runtime_context().gcs_address
    argv = ["sweep", str(job), "--grid", "config.lr=1e-3,3e-3", "--seeds", "0-1", "--vectorize", "-o", str(sweep),
            "--address", address]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "4 of 4 trials to run as 2 vectorised job(s)" in out and "| 0.001 | 2/2 |" in out and "| 0.003 | 2/2 |" in out
    assert "[2/2] " in out and "/4] " not in out  # the progress counts the jobs that run (it stopped at [2/4])
    assert "  000_lr-0.001: 20 updates, " in out  # a running job's progress line, from its first seed's records
    for point in ("000_lr-0.001", "001_lr-0.003"):
        top = json.loads((sweep / "trials" / point / "result.json").read_text())
        assert top["num_seeds"] == 2 and top["seeds"] == [0, 1]
        for seed in (0, 1):
            run = sweep / "trials" / point / f"seed-{seed}"
            assert json.loads((run / "result.json").read_text())["updates"] == 40
            assert yaml.safe_load((run / "config.yaml").read_text())["config"]["seed"] == seed
    attempts = json.loads((sweep / "trials" / "000_lr-0.001.json").read_text())["attempts"]
    assert attempts[-1]["exit"] == 0 and "config.num_seeds=2" in attempts[-1]["command"]
    # a sweep that cannot vectorise is refused before anything is written
    marwil = tmp_path / "marwil.yaml"
    marwil.write_text(job.read_text().replace("algorithm: bc", "algorithm: marwil"))
    assert main(["sweep", str(marwil), "--seeds", "0-1", "--vectorize", "-o", str(tmp_path / "no")]) == 2
    assert "running statistics" in capsys.readouterr().err and not (tmp_path / "no").exists()
