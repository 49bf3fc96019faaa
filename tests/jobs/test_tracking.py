"""Tracking sinks (src/offlinerl/jobs/tracking.py): one real training job logs to TensorBoard (with hparams), W&B in
offline mode and MLflow with a ``file:`` store, none of which touch the network; every sink must hold exactly
the numbers of metrics.jsonl. W&B and MLflow tests skip when their package (``offlinerl[tracking]``) is absent."""

from __future__ import annotations

import importlib.util
import json
import math
import struct
import sys
from pathlib import Path

import pytest

from offlinerl.config_io import ConfigError
from offlinerl.jobs.run_dir import resolve_resumed
from offlinerl.jobs.spec import load_job_spec
from offlinerl.jobs.tracking import TRACKING_FILE, flat_hparams

REPO = Path(__file__).resolve().parents[2]
HAVE_WANDB = importlib.util.find_spec("wandb") is not None
HAVE_MLFLOW = importlib.util.find_spec("mlflow") is not None


def _expected(run: Path) -> list[dict[str, float]]:
    """metrics.jsonl's finite numbers, record by record."""
    out = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        out.append({k: float(v) for k, v in record.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)})
    return out


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, ray_session):
    """A 3-iteration BC job on the shipped CartPole data with every installed sink, in offline modes."""
    import os

    from offlinerl.jobs.train import run_train

    tmp = tmp_path_factory.mktemp("tracking")
    sets = ["config.updates_per_iteration=20", "config.train_batch_size=64", "config.evaluation.episodes=2",
            "config.evaluation.interval=2", "stop.updates=60", "logging.group=test-group"]
    if HAVE_WANDB:
        sets += ["logging.wandb.project=offlinerl-tests", "logging.wandb.mode=offline", "logging.wandb.tags=[t1]"]
    if HAVE_MLFLOW:
        sets += [f"logging.mlflow.tracking_uri=file:{tmp / 'mlruns'}", "logging.mlflow.experiment=tests"]
    old = {k: os.environ.get(k) for k in ("MLFLOW_ALLOW_FILE_STORE", "WANDB_SILENT")}
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 refuses file stores without it
    os.environ["WANDB_SILENT"] = "true"
    try:
        spec, config = load_job_spec(REPO / "jobs" / "cartpole-bc.yaml", sets)
        result = run_train(spec, config, run_dir=tmp / "run", progress=False, log=lambda _: None)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Path(result["run_dir"]), tmp, config


def test_tensorboard_holds_metrics_jsonl_and_the_hparams(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run, _, config = tracked_run
    expected = _expected(run)
    assert [r["learner/updates"] for r in expected] == [20.0, 40.0, 60.0, 60.0]  # 3 iterations, the final evaluation
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    for key in ("losses/actor", "perf/updates_per_s", "eval/return_mean"):
        logged = [(e.step, e.value) for e in acc.Scalars(key)]
        want = [(int(r["learner/updates"]), r[key]) for r in expected if key in r]
        assert [s for s, _ in logged] == [s for s, _ in want]
        assert [v for _, v in logged] == pytest.approx([v for _, v in want], rel=1e-6)  # float32 in the event file
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind")) for k, v in start.session_start_info.hparams.items()}
    assert hparams["algorithm"] == "bc"
    assert hparams["config.lr"] == pytest.approx(config.lr)
    assert hparams["config.model.hidden"] == "[256, 256]"
    assert "_hparams_/session_end_info" in content


def _wandb_records(path: Path):
    """The records of a W&B offline run file (``run-<id>.wandb``: W&B's header, then LevelDB-log blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, parts, block = 7, b"", 32768
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # full, or last of several
            record = pb.Record()
            record.ParseFromString(parts + chunk if kind == 4 else chunk)
            parts = b""
            yield record
        elif kind in (2, 3):  # first, middle
            parts += chunk


@pytest.mark.skipif(not HAVE_WANDB, reason="wandb not installed (pip install 'offlinerl[tracking]')")
def test_wandb_offline_run_holds_metrics_jsonl(tracked_run):
    run, _, _ = tracked_run
    files = list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    records = list(_wandb_records(files[0]))
    header = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (header.project, header.run_group, header.display_name) == ("offlinerl-tests", "test-group", run.name)
    assert list(header.tags) == ["t1"]
    config = {u.key: json.loads(u.value_json) for u in header.config.update}
    assert config["algorithm"] == "bc" and config["config"]["updates_per_iteration"] == 20
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    logged = [{k: float(v) for k, v in h.items() if not k.startswith("_")} for h in history]
    assert logged == _expected(run)  # every record, every number, exactly
    ids = json.loads((run / TRACKING_FILE).read_text())
    assert files[0].name == f"run-{ids['wandb']['id']}.wandb"
    assert resolve_resumed(run) == run.resolve()  # W&B's link to ~/.cache/wandb is gone: --resume accepts the run


@pytest.mark.skipif(not HAVE_MLFLOW, reason="mlflow not installed (pip install 'offlinerl[tracking]')")
def test_mlflow_file_store_holds_metrics_jsonl(tracked_run):
    run, tmp, config = tracked_run
    ids = json.loads((run / TRACKING_FILE).read_text())
    experiments = [p for p in (tmp / "mlruns").iterdir() if (p / ids["mlflow"]["run_id"]).is_dir()]
    assert len(experiments) == 1
    store = experiments[0] / ids["mlflow"]["run_id"]
    expected = _expected(run)
    for key in ("losses/actor", "perf/updates_per_s", "eval/return_mean", "learner/updates"):
        lines = (store / "metrics" / key).read_text().split("\n")  # "<timestamp> <value> <step>" per record
        logged = [(int(step), float(value)) for _, value, step in (line.split() for line in lines if line)]
        assert logged == [(int(r["learner/updates"]), r[key]) for r in expected if key in r]
    assert (store / "params" / "config.lr").read_text() == str(config.lr)
    assert (store / "tags" / "offlinerl.group").read_text() == "test-group"
    assert (store / "tags" / "mlflow.runName").read_text() == run.name
    assert "status: 3" in (store / "meta.yaml").read_text()  # RunStatus.FINISHED


def test_a_missing_tracking_package_is_one_line_before_anything_starts(monkeypatch, capsys):
    from offlinerl.cli import main

    monkeypatch.setitem(sys.modules, "wandb", None)  # what Python records for a module that cannot be imported
    code = main(["train", str(REPO / "jobs" / "cartpole-bc.yaml"), "--set", "logging.wandb.project=p"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == ("offlinerl train: logging.wandb: the wandb package is not installed; "
                   "pip install 'offlinerl[tracking]'")
    with pytest.raises(ConfigError, match=r"^logging\.mlflow: the mlflow package is not installed"):
        monkeypatch.setitem(sys.modules, "mlflow", None)
        load_job_spec(REPO / "jobs" / "cartpole-bc.yaml", ["logging.mlflow.experiment=e"])


def test_sweep_trials_are_grouped_by_the_sweep(tmp_path):
    from offlinerl.jobs.sweep.trials import _trial_command

    job_file = str(REPO / "jobs" / "cartpole-bc.yaml")
    spec = {"overrides": ["config.lr=0.001"], "job": job_file, "pipeline": job_file, "group": "2026"}
    command = _trial_command(spec, tmp_path / "trials" / "000")
    assert command[-4:] == ["--set", "config.lr=0.001", "--set", 'logging.group="2026"']
    job, _ = load_job_spec(job_file, [command[-3], command[-1]])
    assert job.logging.group == "2026"  # a string, even where the sweep's name reads as a number


def test_flat_hparams():
    assert flat_hparams({"algorithm": "cql", "config": {"lr": 3e-4, "grad_clip": None,
                                                        "model": {"hidden": [64, 64], "extra": {}}}}) == {
        "algorithm": "cql", "config.lr": 3e-4, "config.grad_clip": "null", "config.model.hidden": "[64, 64]"}


@pytest.mark.skipif(not HAVE_MLFLOW, reason="mlflow not installed (pip install 'offlinerl[tracking]')")
def test_resume_continues_the_same_tracking_runs(tracked_run, monkeypatch):
    """Runs after the tests that read the module's run as the first job left it: it resumes that run."""
    from offlinerl.jobs.spec import load_job_run
    from offlinerl.jobs.train import run_train

    run, tmp, _ = tracked_run
    ids = json.loads((run / TRACKING_FILE).read_text())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    spec, config, checkpoint = load_job_run(run, ["stop.updates=80"])
    run_train(spec, config, run_dir=run, resume_from=checkpoint, progress=False, log=lambda _: None)
    assert json.loads((run / TRACKING_FILE).read_text()) == ids  # the same W&B and MLflow runs
    store = next(p for p in (tmp / "mlruns").iterdir() if (p / ids["mlflow"]["run_id"]).is_dir()) / ids["mlflow"]["run_id"]
    steps = [int(line.split()[2]) for line in (store / "metrics" / "learner" / "updates").read_text().splitlines()]
    assert steps == [20, 40, 60, 60, 80]  # the first job's records, then the resumed iteration (it evaluated)
    assert "status: 3" in (store / "meta.yaml").read_text()
    if HAVE_WANDB:
        assert len(list((run / "wandb").glob(f"offline-run-*/run-{ids['wandb']['id']}.wandb"))) == 2


@pytest.mark.skipif(not HAVE_MLFLOW, reason="mlflow not installed (pip install 'offlinerl[tracking]')")
def test_a_tracking_store_that_cannot_start_is_one_line(tmp_path):
    from offlinerl.jobs.tracking import LoggingConfig, MlflowConfig, TrackingError, open_trackers

    with pytest.raises(TrackingError) as caught:
        open_trackers(LoggingConfig(mlflow=MlflowConfig(tracking_uri="nosuchscheme://x")), tmp_path, {})
    text = str(caught.value)
    assert text.startswith("logging.mlflow: MLflow could not start a run at nosuchscheme://x (") and "\n" not in text
    assert text.endswith("or a folder (file:./mlruns, with MLFLOW_ALLOW_FILE_STORE=true)")
    assert not (tmp_path / TRACKING_FILE).exists()
