"""``config.num_seeds: N`` (issue 28, vectorised seeds): one ``offlinerl train`` job trains N seeds as one stacked
learner and writes a run directory per seed, laid out as a single run and equal to it: the losses of every
iteration, the final weights (to float tolerance) and what ``--resume`` makes of it. Everything runs in this
process, without Ray (``offlinerl.jobs.vectorized``)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml

from offlinerl.cli.summary import vectorized_summary
from offlinerl.core import metrics as M
from offlinerl.jobs.spec import load_job_run, load_job_spec
from offlinerl.jobs.train import RUN_FILES, run_train
from tests.datagen import make_dataset

JOB = """algorithm: {algorithm}
dataset: {dataset}
config:
  seed: 4
  train_batch_size: 32
  updates_per_iteration: 6
  grad_clip: 1.0
  normalize_observations: true
  model: {{hidden: [16, 16]}}
  evaluation: {{episodes: 1, interval: 0}}
stop: {{updates: 12}}
"""


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "pendulum", env_id="Pendulum-v1", episodes=6, max_steps=40)


def _job(tmp_path, dataset, algorithm="td3bc", sets=()):
    path = tmp_path / f"{algorithm}.yaml"
    path.write_text(JOB.format(algorithm=algorithm, dataset=dataset))
    return load_job_spec(path, list(sets))


def _losses(run: Path) -> list[dict[str, float]]:
    return [{k: v for k, v in json.loads(line).items() if M.is_loss(k)}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algorithm", ["td3bc", "iql"])
def test_each_seed_is_a_single_run_of_its_seed(tmp_path, pendulum, algorithm):
    spec, config = _job(tmp_path, pendulum, algorithm, ["config.num_seeds=3"])
    threads = torch.get_num_threads()
    result = run_train(spec, config, run_dir=tmp_path / "vec", progress=False, log=lambda _: None)
    assert torch.get_num_threads() == threads  # the stacked update's threads are the job's, not the process's after
    assert result["num_seeds"] == 3 and result["seeds"] == [4, 5, 6] and result["vectorized"]
    assert len(result["updates_per_s_per_replica"]) == 3 and all(x > 0 for x in result["updates_per_s_per_replica"])
    assert result["updates"] == 36
    text = vectorized_summary(result)  # what offlinerl train prints
    assert "3 seeds as one vectorised learner: 36 updates" in text and "seed 6: final return" in text
    on_disk = json.loads((tmp_path / "vec" / "result.json").read_text())
    assert on_disk["num_seeds"] == 3 and [r["seed"] for r in on_disk["replicas"]] == [4, 5, 6]
    assert yaml.safe_load((tmp_path / "vec" / "config.yaml").read_text())["config"]["num_seeds"] == 3
    for seed in (4, 5, 6):
        run = tmp_path / "vec" / f"seed-{seed}"
        assert all((run / f).is_file() for f in RUN_FILES) and (run / "checkpoints" / "final").is_dir()
        own = yaml.safe_load((run / "config.yaml").read_text())["config"]
        assert (own["seed"], own["num_seeds"]) == (seed, 1)
        seed_result = json.loads((run / "result.json").read_text())
        assert seed_result["num_seeds"] == 3 and seed_result["updates"] == 12 and seed_result["updates_per_s"] > 0
    # seed 5 trained alone
    spec, config = _job(tmp_path, pendulum, algorithm, ["config.seed=5"])
    single = run_train(spec, config, run_dir=tmp_path / "single", progress=False, log=lambda _: None)
    vec_run = tmp_path / "vec" / "seed-5"
    a, b = _losses(tmp_path / "single"), _losses(vec_run)
    assert len(a) == len(b) == 3 and a[0]  # two iterations, then the final evaluation's record
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            assert y[k] == pytest.approx(x[k], rel=1e-4, abs=1e-6), k
    w_single = torch.load(Path(single["checkpoint"]) / "learner_group.pt", weights_only=True)
    w_vec = torch.load(vec_run / "checkpoints" / "final" / "learner_group.pt", weights_only=True)
    module = w_single["learners"][0]["learner"]["module"]
    for name, value in module.items():
        torch.testing.assert_close(w_vec["learners"][0]["learner"]["module"][name], value, rtol=1e-4, atol=1e-5, msg=name)
    # the seeds differ
    other = torch.load(tmp_path / "vec" / "seed-4" / "checkpoints" / "final" / "learner_group.pt", weights_only=True)
    name = next(iter(module))
    assert not torch.equal(other["learners"][0]["learner"]["module"][name], w_vec["learners"][0]["learner"]["module"][name])


def test_a_seed_run_resumes_as_a_single_run(tmp_path, pendulum):
    spec, config = _job(tmp_path, pendulum, "iql", ["config.num_seeds=2"])
    run_train(spec, config, run_dir=tmp_path / "vec", progress=False, log=lambda _: None)
    seed_run = tmp_path / "vec" / "seed-5"
    spec, config, checkpoint = load_job_run(seed_run, ["stop.updates=18"])
    assert config.num_seeds == 1
    result = run_train(spec, config, run_dir=seed_run, resume_from=checkpoint, progress=False, log=lambda _: None)
    assert result["updates"] == 18
    # fine-tuning takes one seed's checkpoint, not several seeds
    from offlinerl.jobs.finetune import run_finetune
    from offlinerl.jobs.spec import FinetuneSpec, StopConfig

    spec = FinetuneSpec(checkpoint=str(seed_run / "checkpoints" / "final"), config={"num_seeds": 2},
                        stop=StopConfig(iterations=1))
    with pytest.raises(ValueError, match="vectorised seeds train offline"):
        run_finetune(spec, run_dir=tmp_path / "ft", progress=False, log=lambda _: None)
    # the vectorised run itself is not a job to resume: its seeds are
    with pytest.raises(ValueError, match="vectorised run of 2 seeds.*seed-4"):
        load_job_run(tmp_path / "vec")


def test_what_cannot_be_vectorised_is_refused_before_a_run_directory_exists(tmp_path, pendulum):
    spec, config = _job(tmp_path, pendulum, "marwil", ["config.num_seeds=2"])
    with pytest.raises(ValueError, match="running statistics outside its module"):
        run_train(spec, config, run_dir=tmp_path / "m", progress=False, log=lambda _: None)
    spec, config = _job(tmp_path, pendulum, "iql", ["config.num_seeds=2", "config.data.mode=streaming"])
    with pytest.raises(ValueError, match="needs Ray for streaming data"):
        run_train(spec, config, run_dir=tmp_path / "s", progress=False, log=lambda _: None)
    spec, config = _job(tmp_path, pendulum, "edac", ["config.num_seeds=2"])
    with pytest.raises(ValueError, match="edac's loss takes gradients inside itself"):
        run_train(spec, config, run_dir=tmp_path / "e", progress=False, log=lambda _: None)
    assert not (tmp_path / "m").exists() and not (tmp_path / "s").exists() and not (tmp_path / "e").exists()
    with pytest.raises(Exception, match="num_seeds"):
        _job(tmp_path, pendulum, "iql", ["config.num_seeds=0"])


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow not installed (offlinerl[tracking])")
def test_each_seed_logs_its_own_mlflow_run_in_one_experiment(tmp_path, pendulum, monkeypatch):
    """The seeds open their trackers from threads: one experiment of the name, one run per seed."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sets = ["config.num_seeds=3", f"logging.mlflow.tracking_uri=file:{tmp_path / 'ml'}", "logging.mlflow.experiment=seeds"]
    spec, config = _job(tmp_path, pendulum, "iql", sets)
    run_train(spec, config, run_dir=tmp_path / "vec", progress=False, log=lambda _: None)
    experiments = [yaml.safe_load(p.read_text()) for p in (tmp_path / "ml").glob("*/meta.yaml")]
    named = [e for e in experiments if e["name"] == "seeds"]
    assert len(named) == 1
    runs = {json.loads((tmp_path / "vec" / f"seed-{s}" / "tracking.json").read_text())["mlflow"]["run_id"]
            for s in (4, 5, 6)}
    assert len(runs) == 3 and all((tmp_path / "ml" / named[0]["experiment_id"] / r).is_dir() for r in runs)
