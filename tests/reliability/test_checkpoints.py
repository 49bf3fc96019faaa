"""Checkpoints never run code, and every broken or foreign checkpoint is one clear message with exit 1.

Each case goes through the real CLI (``evaluate``, ``collect --policy``, ``finetune --from``)
and asserts the exit code, the message, that no traceback was printed and that nothing
named in the checkpoint was executed or imported.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml

from offlinerl.algorithms.bc import BCConfig
from offlinerl.cli import main
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import allow_class, load_checkpoint
from tests.datagen import make_dataset

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


class _Payload:
    """Unpickling this would create the file ``marker`` (what a hostile checkpoint would do)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=4)


@pytest.fixture(scope="module")
def good(ray_session, dataset, tmp_path_factory):
    config = BCConfig.from_dict({"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                                 "evaluation": {"episodes": 1, "interval": 0}})
    algo = Algorithm("bc", config, dataset)
    algo.train()
    path = algo.save_checkpoint(tmp_path_factory.mktemp("c") / "ckpt")
    algo.stop()
    return path


@pytest.fixture
def ckpt(good, tmp_path):
    return Path(shutil.copytree(good, tmp_path / "ckpt"))


def _meta(path: Path) -> dict:
    return json.loads((path / "algorithm.json").read_text())


def _edit_meta(path: Path, **changes) -> None:
    (path / "algorithm.json").write_text(json.dumps({**_meta(path), **changes}))


def _evaluate(capsys, path, *args) -> tuple[int, str]:
    code = main(["evaluate", str(path), "--episodes", "1", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.err


def _restamp(path: Path) -> None:
    """Record the tensors file's new size and hash, as a writer would (so the content checks are what fails)."""
    from offlinerl.training.checkpoint import file_sha256 as _sha256

    state = path / "learner_group.pt"
    _edit_meta(path, files={"learner_group.pt": {"bytes": state.stat().st_size, "sha256": _sha256(state)}})


def test_a_pickle_payload_is_refused_and_never_runs(ckpt, tmp_path, capsys):
    marker = tmp_path / "executed"
    state = torch.load(ckpt / "learner_group.pt", weights_only=True)
    state["learners"][0]["learner"]["extra"] = {"x": _Payload(str(marker))}
    torch.save(state, ckpt / "learner_group.pt")
    _restamp(ckpt)
    code, err = _evaluate(capsys, ckpt)
    assert code == 1 and "other than tensors" in err and "learner_group.pt" in err
    assert not marker.exists()


def test_a_class_name_is_looked_up_never_imported(ckpt, capsys):
    for field, name in (("module_class", "os:system"), ("learner_class", "subprocess:call"),
                        ("module_class", "antigravity:fly")):
        shutil.copy(ckpt / "algorithm.json", ckpt / "orig.json")
        _edit_meta(ckpt, **{field: name})
        sys.modules.pop("antigravity", None)
        code, err = _evaluate(capsys, ckpt)
        assert code == 1 and "not a registered offlinerl class" in err and name in err and "allow_class" in err
        assert "antigravity" not in sys.modules
        os.replace(ckpt / "orig.json", ckpt / "algorithm.json")


def test_a_custom_class_loads_once_the_user_allows_it(ckpt, capsys):
    from offlinerl.algorithms.registry import get_algorithm

    class MyModule(get_algorithm("bc").module_cls):
        pass

    _edit_meta(ckpt, module_class=f"{MyModule.__module__}:{MyModule.__qualname__}")
    assert _evaluate(capsys, ckpt)[0] == 1
    allow_class(MyModule)
    assert load_checkpoint(ckpt).module_class is MyModule
    assert _evaluate(capsys, ckpt)[0] == 0


@pytest.mark.parametrize("case,expected", [
    ("truncated", "truncated"),
    ("truncated-small", "1,000 bytes, but algorithm.json records"),  # smaller than the weights: still "truncated"
    ("truncated-v1", "truncated, corrupted"),
    ("empty-state", "empty file"),
    ("missing-state", "missing"),
    ("empty-json", "empty file"),
    ("truncated-json", "not valid JSON"),
    ("modified", "sha256"),
    ("newer", "upgrade offlinerl"),
    ("foreign-json", "not an offlinerl checkpoint"),
    ("foreign-state", "not a LearnerGroup state"),
    ("wrong-shape", "do not fit"),
    ("nan-weights", "NaN or inf"),
    ("bad-space", "space"),
    ("unknown-algorithm", "unknown algorithm"),
    ("bad-config", "config"),
    ("missing-field", "'learner_class' is missing"),
    ("bad-normalizer", "NormalizeObservations"),
    ("deep-json", "nested more than 64 levels deep"),
    ("huge-integer", "more than 40 digits"),
])
def test_a_broken_checkpoint_is_one_clear_message(ckpt, capsys, case, expected):
    state_file = ckpt / "learner_group.pt"
    data = state_file.read_bytes()
    if case == "truncated":
        state_file.write_bytes(data[: len(data) // 2])
    elif case == "truncated-small":
        state_file.write_bytes(data[:1000])
    elif case == "truncated-v1":
        state_file.write_bytes(data[: len(data) // 2])
        meta = _meta(ckpt)
        meta.pop("files")
        (ckpt / "algorithm.json").write_text(json.dumps({**meta, "format_version": 1}))
    elif case == "empty-state":
        state_file.write_bytes(b"")
    elif case == "missing-state":
        state_file.unlink()
    elif case == "empty-json":
        (ckpt / "algorithm.json").write_text("")
    elif case == "truncated-json":
        text = (ckpt / "algorithm.json").read_text()
        (ckpt / "algorithm.json").write_text(text[: len(text) // 2])
    elif case == "modified":
        state_file.write_bytes(data[:-8] + bytes(8))
    elif case == "newer":
        _edit_meta(ckpt, format_version=99)
    elif case == "foreign-json":
        (ckpt / "algorithm.json").write_text(json.dumps({"format": "something-else", "weights": "model.bin"}))
    elif case == "foreign-state":
        torch.save({"linear.weight": torch.zeros(3, 3)}, state_file)
        _restamp(ckpt)
    elif case == "wrong-shape":
        meta = _meta(ckpt)
        meta["config"]["model"]["hidden"] = [32, 32]
        (ckpt / "algorithm.json").write_text(json.dumps(meta))
    elif case == "nan-weights":
        state = torch.load(state_file, weights_only=True)
        weights = state["learners"][0]["learner"]["module"]
        first = next(k for k, v in weights.items() if v.is_floating_point())
        weights[first][0] = float("nan")
        torch.save(state, state_file)
        _restamp(ckpt)
    elif case == "bad-space":
        _edit_meta(ckpt, observation_space={"type": "Box", "shape": [4], "low": "x", "high": 1})
    elif case == "unknown-algorithm":
        _edit_meta(ckpt, algorithm="nope")
    elif case == "bad-config":
        meta = _meta(ckpt)
        meta["config"]["lr"] = "fast"
        (ckpt / "algorithm.json").write_text(json.dumps(meta))
    elif case == "missing-field":
        meta = _meta(ckpt)
        meta.pop("learner_class")
        (ckpt / "algorithm.json").write_text(json.dumps(meta))
    elif case == "bad-normalizer":
        meta = _meta(ckpt)
        meta["config"]["normalize_observations"] = True
        meta["connector_state"] = {"NormalizeObservations": {"count": 3, "mean": [0.0], "var": [1.0]}}
        (ckpt / "algorithm.json").write_text(json.dumps(meta))
    elif case == "deep-json":
        text = (ckpt / "algorithm.json").read_text()
        (ckpt / "algorithm.json").write_text(text[:-2] + ', "x": ' + "[" * 50000 + "]" * 50000 + "}")
    elif case == "huge-integer":
        text = (ckpt / "algorithm.json").read_text()
        (ckpt / "algorithm.json").write_text(text[:-2] + ', "x": ' + "9" * 5000 + "}")
    code, err = _evaluate(capsys, ckpt)
    assert code == 1, err
    assert expected in err and str(ckpt) in err and "Traceback" not in err


def test_not_a_directory_and_a_run_directory_get_a_hint(good, tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("x")
    assert _evaluate(capsys, file)[0] == 1
    run = tmp_path / "run"
    shutil.copytree(good, run / "checkpoints" / "final")
    code, err = _evaluate(capsys, run)
    assert code == 1 and "did you mean" in err and str(run / "checkpoints" / "final") in err


def test_evaluate_checks_the_env_before_acting(ckpt, capsys):
    code, err = _evaluate(capsys, ckpt, "--env", "Pendulum-v1")
    assert code == 1 and "does not fit" in err and "observation space: shape (4,) expected, the env has (3,)" in err
    code, err = _evaluate(capsys, ckpt, "--env", "NoSuchEnv-v9")
    assert code == 1 and "cannot make the env 'NoSuchEnv-v9'" in err
    # An env id read from the checkpoint is never an import
    _edit_meta(ckpt, env_id="antigravity:Fly-v0")
    sys.modules.pop("antigravity", None)
    code, err = _evaluate(capsys, ckpt)
    assert code == 1 and "would import the module 'antigravity'" in err and "antigravity" not in sys.modules


def test_collect_refuses_a_hostile_checkpoint(ckpt, tmp_path, capsys):
    marker = tmp_path / "executed"
    torch.save({"learners": [_Payload(str(marker))]}, ckpt / "learner_group.pt")
    _restamp(ckpt)
    out = tmp_path / "out"
    code = main(["collect", "--env", "CartPole-v1", "--policy", str(ckpt), "--episodes", "1", "-o", str(out),
                 "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "other than tensors" in captured.out + captured.err
    assert not marker.exists() and not out.exists()


def test_collect_checks_the_env_spaces(ckpt, tmp_path, capsys):
    code = main(["collect", "--env", "Pendulum-v1", "--policy", str(ckpt), "--episodes", "1",
                 "-o", str(tmp_path / "out"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "does not fit" in captured.out + captured.err and "Traceback" not in captured.err


def test_finetune_refuses_a_hostile_checkpoint(ray_session, ckpt, dataset, tmp_path, capsys):
    marker = tmp_path / "executed"
    state = torch.load(ckpt / "learner_group.pt", weights_only=True)
    state["learners"][0]["learner"]["timestep"] = _Payload(str(marker))
    torch.save(state, ckpt / "learner_group.pt")
    _restamp(ckpt)
    job = tmp_path / "ft.yaml"
    job.write_text(yaml.safe_dump({"checkpoint": str(ckpt), "dataset": str(dataset), "stop": {"iterations": 1},
                                   "online": {"algorithm": "bc"}}))
    code = main(["finetune", str(job), "-o", str(tmp_path / "run"), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1 and "other than tensors" in captured.err and "Traceback" not in captured.err
    assert not marker.exists()


@pytest.mark.parametrize("name,env", [("v1-bc-cartpole", "CartPole-v1"), ("v1-cql-pendulum", "Pendulum-v1")])
def test_checkpoints_written_before_format_2_still_load(name, env, capsys):
    """Written by main of 2026-11-30 (format version 1, no file hashes); see fixtures/checkpoints/README.md."""
    expected = json.loads((FIXTURES / "expected.json").read_text())[name]
    code = main(["evaluate", str(FIXTURES / name), "--episodes", "2", "--seed", "0", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["env"] == env
    assert result["eval/return_mean"] == pytest.approx(expected["eval/return_mean"], rel=1e-9)


def test_kill_9_during_a_checkpoint_write_leaves_the_old_checkpoint_and_the_next_writer_cleans_up(good, tmp_path):
    """A writer killed while torch.save is still writing: the target keeps the previous checkpoint, and the
    next write of that checkpoint removes the dead writer's temporary directory."""
    import signal
    import subprocess
    import time

    target = Path(shutil.copytree(good, tmp_path / "ckpt"))
    before = (target / "learner_group.pt").read_bytes()
    script = (
        "import sys, torch\n"
        "from offlinerl.training.checkpoint import write_checkpoint\n"
        "big = {'learners': [{'learner': {'module': {'w': torch.zeros(100_000_000)}}}]}\n"
        "write_checkpoint(sys.argv[1], big, {}, overwrite=True)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", script, str(target)], cwd=repo,
                            env={**os.environ, "PYTHONPATH": str(repo)}, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not any((p / "learner_group.pt").exists() for p in tmp_path.glob(".ckpt.tmp-*")):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (target / "learner_group.pt").read_bytes() == before  # the old checkpoint, whole
    assert list(tmp_path.glob(".ckpt.tmp-*")), "the kill should have left the writer's temporary directory"
    load_checkpoint(target).build_module()

    from offlinerl.training.checkpoint import write_checkpoint

    ckpt = load_checkpoint(target)
    write_checkpoint(target, ckpt.state, {k: v for k, v in ckpt.meta.to_json().items() if k != "files"}, overwrite=True)
    assert not list(tmp_path.glob(".ckpt.*")), "the next writer removes the dead writer's temporary directory"
    load_checkpoint(target).build_module()


def test_resume_checks_the_connector_state_before_the_data_uses_it(ckpt, dataset):
    from offlinerl.training.checkpoint import CheckpointError

    meta = _meta(ckpt)
    meta["config"]["normalize_observations"] = True
    meta["connector_state"] = {"NormalizeObservations": {"count": 3, "mean": [0.0], "var": [1.0]}}
    (ckpt / "algorithm.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="NormalizeObservations.mean must be 4 finite numbers"):
        Algorithm.from_checkpoint(ckpt, dataset=dataset)
