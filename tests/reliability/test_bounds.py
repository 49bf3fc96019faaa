"""What a checkpoint or a Minari HDF5 file declares is checked before it is allocated or used.

Each hostile input is made from a real one: a Minari dataset written with minari's own API whose
HDF5 file then gets an episode declaring a 12 GB dataset (chunks never written, so the file stays
a few KiB) and one whose infos nest 40 groups deep; a BC checkpoint trained here whose
``algorithm.json`` then declares a 60,000-wide hidden layer, or observation statistics that
would normalise to NaN. Each goes through the real CLI: exit code, a one-line message naming
the file and the problem, no traceback, and for the bombs a peak memory that stays bounded.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.algorithms.bc import BCConfig
from offlinerl.cli import main
from offlinerl.convert.minari import MAX_GROUP_DEPTH
from offlinerl.episodes import load_episodes, read_info
from offlinerl.training.algorithm import Algorithm
from offlinerl.training.checkpoint import file_sha256 as _sha256
from offlinerl.training.checkpoint_bounds import MAX_HIDDEN_WIDTH, MAX_MODULE_PARAMETERS
from tests.convert.helpers import run_cli
from tests.datagen import make_dataset
from tests.reliability.hostile_inputs import GiB, MiB, TreePeak

REPO = Path(__file__).resolve().parents[2]
LENGTHS = (3, 4, 5, 6, 7)


# ---------------------------------------------------------------- Minari HDF5


def _minari_dataset(dataset_id: str) -> Path:
    """A real hdf5 Minari dataset of ``LENGTHS`` episodes (under ``$MINARI_DATASETS_PATH``); its data/ folder."""
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer

    buffers = [EpisodeBuffer(observations=np.full((T + 1, 3), k, np.float32), actions=np.arange(T) % 2,
                             rewards=[1.0] * T, terminations=[False] * (T - 1) + [True], truncations=[False] * T,
                             infos={"step": list(range(T + 1))})
               for k, T in enumerate(LENGTHS)]
    mds = minari.create_dataset_from_buffers(dataset_id, buffers, data_format="hdf5",
                                             observation_space=gym.spaces.Box(-9, 9, (3,), np.float32),
                                             action_space=gym.spaces.Discrete(2))
    return Path(mds.storage.data_path)


def test_minari_hdf5_bombs_are_quarantined_and_the_rest_converts(ray_session, tmp_path, monkeypatch, capsys):
    import h5py

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    clean = _minari_dataset("bounds/clean-v0")
    hostile = _minari_dataset("bounds/hostile-v0")
    h5_file = hostile / "main_data.hdf5"
    with h5py.File(h5_file, "a") as h5:
        del h5["episode_1/observations"]  # 12 GB declared, no chunk written: read back as the fill value
        h5["episode_1"].create_dataset("observations", shape=(1_000_000_000, 3), dtype="f4", chunks=(4096, 3))
        group = h5["episode_3/infos"]
        for level in range(40):
            group = group.create_group(f"level_{level}")
    assert h5_file.stat().st_size < 256 * 1024

    with TreePeak() as clean_mem:
        assert run_cli(["convert", "minari", str(clean.parent), "-o", str(tmp_path / "clean-ds")]) == 0
    capsys.readouterr()
    with TreePeak() as bomb_mem:
        code = run_cli(["convert", "minari", str(hostile.parent), "-o", str(tmp_path / "ds")])
    print(f"\npeak PSS of the process tree: clean {clean_mem.peak / MiB:.0f} MiB, bombs {bomb_mem.peak / MiB:.0f} MiB",
          file=sys.__stderr__)
    assert bomb_mem.rise <= clean_mem.rise + 300 * 10**6 and bomb_mem.peak < 3 * GiB

    assert code == 1  # quarantined, the dataset written
    err = capsys.readouterr().err
    assert "Traceback" not in err and "2 episode(s) quarantined" in err and "--allow-quarantine" in err
    lines = [line for line in err.splitlines() if "quarantined " in line and "episode 1 " in line]
    assert len(lines) == 1 and str(h5_file) in lines[0] and "12,000,000,000 bytes" in lines[0]
    assert "--max-value-bytes" in lines[0]
    out = tmp_path / "ds"
    assert sorted(int(e.id) for e in load_episodes(out)) == [0, 2, 4]
    assert read_info(out).provenance["quarantine"] == {"episodes": 2, "file": "_quarantine/records.jsonl",
                                                       "reasons": {"too_deep": 1, "too_large": 1}}
    records = [json.loads(x) for x in (out / "_quarantine" / "records.jsonl").read_text().splitlines()]
    assert [(r["file"], r["episode"], r["group"], r["level"], r["reason"]) for r in records] == [
        (str(h5_file), 1, "/episode_1", "episode", "too_large"), (str(h5_file), 3, "/episode_3", "episode", "too_deep")]
    assert records[0]["message"].startswith("dataset /episode_1/observations of shape (1000000000, 3) and dtype <f4 "
                                            "is 12,000,000,000 bytes, over the cap of 268,435,456 bytes")
    assert f"groups nest more than {MAX_GROUP_DEPTH} levels deep" in records[1]["message"]
    # the same cap, lowered: every episode is now too large, and that is one error naming the file
    code = run_cli(["convert", "minari", str(clean.parent), "-o", str(tmp_path / "none"), "--max-value-bytes", "16"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(clean / "main_data.hdf5") in err and "--max-value-bytes" in err


# ---------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def trained(ray_session, tmp_path_factory):
    """A real BC checkpoint (CartPole, normalised observations, hidden [8])."""
    data = make_dataset(tmp_path_factory.mktemp("d") / "cartpole", episodes=4)
    config = BCConfig.from_dict({"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                                 "normalize_observations": True, "evaluation": {"episodes": 1, "interval": 0}})
    algo = Algorithm("bc", config, data)
    algo.train()
    path = algo.save_checkpoint(tmp_path_factory.mktemp("c") / "ckpt")
    algo.stop()
    return path


@pytest.fixture
def ckpt(trained, tmp_path):
    return Path(shutil.copytree(trained, tmp_path / "ckpt"))


def _edit(path: Path, edit) -> None:
    meta = json.loads((path / "algorithm.json").read_text())
    edit(meta)
    (path / "algorithm.json").write_text(json.dumps(meta))


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.err


def _cli_subprocess(*argv) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in bytes) of ``offlinerl ARGV`` in its own process, its address space capped
    at 6 GiB so that a regression fails there instead of taking the machine's memory."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (6 * GiB, 6 * GiB))

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with open(os.devnull, "wb") as devnull, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "offlinerl.cli", *map(str, argv)], cwd=REPO, env=env,
                                stdout=devnull, stderr=err, preexec_fn=cap)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, err.read().decode(), usage.ru_maxrss * 1024


def test_a_checkpoint_declaring_a_huge_module_is_refused_before_building_it(trained, ckpt, tmp_path, capsys):
    """60,000-wide layers would be 14 GB of weights from a 23 KB tensors file: refused by the width cap before
    anything is built; under the width cap, by the parameter cap or by the size of the weights file."""
    _edit(ckpt, lambda m: m["config"]["model"].update(hidden=[60_000, 60_000]))
    code, err, peak = _cli_subprocess("evaluate", ckpt, "--episodes", "1")
    print(f"\npeak RSS of evaluate: {peak / MiB:.0f} MiB", file=sys.__stderr__)
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert str(ckpt / "algorithm.json") in err
    assert f"config.model.hidden[0] is 60,000, over the cap of {MAX_HIDDEN_WIDTH:,}" in err
    assert peak < 1 * GiB

    for hidden, expected in (([16384] * 3, f"over the cap of {MAX_MODULE_PARAMETERS:,}"),
                             ([4096, 4096], "more than " + str(ckpt / "learner_group.pt") + " holds")):
        _edit(ckpt, lambda m, hidden=hidden: m["config"]["model"].update(hidden=hidden))
        code, err = _cli(capsys, "evaluate", ckpt, "--episodes", "1")
        assert code == 1 and str(ckpt / "algorithm.json") in err and expected in err, err
        assert "config.model and the spaces describe a module of" in err

    # the tensors file: a compressed zip entry would be inflated to whatever it declares
    fresh = Path(shutil.copytree(trained, tmp_path / "zipped"))
    state = fresh / "learner_group.pt"
    with zipfile.ZipFile(state) as src:
        entries = [(info.filename, src.read(info)) for info in src.infolist()]
    with zipfile.ZipFile(state, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in entries:
            out.writestr(name, data)
    _edit(fresh, lambda m: m["files"].update({"learner_group.pt": {"bytes": state.stat().st_size,
                                                                   "sha256": _sha256(state)}}))
    code, err = _cli(capsys, "evaluate", fresh, "--episodes", "1")
    assert code == 1 and str(state) in err and "is compressed" in err, err


STATISTICS = {
    "negative variance": ({"var": [1.0, -0.5, 1.0, 1.0]}, "NormalizeObservations.var[1] is -0.5; a variance is never"),
    "NaN variance": ({"var": [1.0, 1.0, float("nan"), 1.0]}, "NormalizeObservations.var must be 4 finite numbers"),
    "inf mean": ({"mean": [0.0, float("inf"), 0.0, 0.0]}, "NormalizeObservations.mean must be 4 finite numbers"),
    "wrong shape": ({"mean": [0.0, 0.0, 0.0]}, "NormalizeObservations.mean must be 4 finite numbers (one per "
                                               "dimension of the flattened observation space), got 3 values"),
    "negative count": ({"count": -3}, "NormalizeObservations.count must be a non-negative integer, got -3"),
}


@pytest.mark.parametrize("case", sorted(STATISTICS))
def test_nonsense_observation_statistics_are_refused_by_evaluate_and_export(ckpt, tmp_path, capsys, case):
    assert _cli(capsys, "evaluate", ckpt, "--episodes", "1")[0] == 0  # the checkpoint as trained: fine
    change, expected = STATISTICS[case]
    _edit(ckpt, lambda m: m["connector_state"]["NormalizeObservations"].update(change))
    code, err = _cli(capsys, "evaluate", ckpt, "--episodes", "1")
    assert code == 1 and err.count("\n") == 1 and str(ckpt / "algorithm.json") in err and expected in err, err
    target = tmp_path / "policy.pt"
    code, err = _cli(capsys, "export", "policy", ckpt, "--format", "torchscript", "-o", target)
    assert code == 1 and str(ckpt / "algorithm.json") in err and expected in err, err
    assert not target.exists()
