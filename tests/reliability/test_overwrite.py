"""What ``--overwrite`` may replace, through the real CLI: never an input, a directory holding or inside one,
a file, another kind of directory or the current directory; a conversion with quarantined records keeps an
existing dataset unless ``--allow-quarantine``; a writer killed with SIGKILL leaves the old output intact and
the next writer cleans up after it (docs/safety.md, "Writers: what --overwrite may replace")."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from offlinerl.cli import main
from offlinerl.episodes import load_episodes, read_info, write_dataset
from offlinerl.episodes.stale import OWNER_FILE, STALE_AFTER_S, clean_stale_siblings
from tests.conftest import REPO
from tests.convert.samplebatch_recordings import batch, sample_batch_line, write_lines
from tests.episodes.builders import make_episode

OBS, ACT = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), gym.spaces.Discrete(3)
SPACE_ARGS = ["--observation-space", json.dumps({"type": "Box", "dtype": "float32", "shape": [2], "low": "-inf",
                                                 "high": "inf"}), "--action-space", '{"type": "Discrete", "n": 3}']
RECORDING = "output-2026-01-01_00-00-00_worker-0_0.json"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under ``root``, hidden ones included."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def old_dataset(path: Path, n: int = 20) -> None:
    write_dataset((make_episode(i, OBS, ACT, steps=3, terminated=True) for i in range(n)), path,
                  observation_space=OBS, action_space=ACT)


def recording(work: Path, *, broken: bool = False) -> Path:
    """``work/rec/output-….json`` (two clean episodes, or only unreadable lines) and an unrelated ``work/notes.txt``."""
    lines = ["{oops", "not json at all"] if broken else [
        sample_batch_line(batch(1, 0, 3, end="terminated")), sample_batch_line(batch(2, 0, 4, end="truncated"))]
    write_lines(work / "rec" / RECORDING, lines)
    (work / "notes.txt").write_text("unrelated notes beside the recordings\n")
    return work / "rec"


def convert(rec: Path, out: Path, *flags: str) -> int:
    return main(["convert", "samplebatch", str(rec), "-o", str(out), *SPACE_ARGS, *flags])


def refused(capsys, tmp_path: Path, before: dict, rc: int, *words: str) -> None:
    err = capsys.readouterr().err
    assert rc == 2, err
    message = [line for line in err.splitlines() if line.startswith("offlinerl convert samplebatch: error: ")]
    assert len(message) == 1, err  # (main returned: no exception escaped)
    for word in words:
        assert word in message[0], err
    assert snapshot(tmp_path) == before  # every input and unrelated file byte for byte, nothing new either


def test_output_is_the_inputs_parent(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    before = snapshot(tmp_path)
    rc = convert(rec, tmp_path / "work", "--overwrite")
    refused(capsys, tmp_path, before, rc, str((tmp_path / "work").resolve()), "holds the input")


def test_output_is_the_input_directory(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    before = snapshot(tmp_path)
    rc = convert(rec, rec, "--overwrite")
    refused(capsys, tmp_path, before, rc, str(rec.resolve()), "is an input of this command")


def test_output_inside_the_input_directory(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    before = snapshot(tmp_path)
    rc = convert(rec, rec / "ds")
    refused(capsys, tmp_path, before, rc, "lies inside the input directory", str(rec.resolve()))


def test_output_through_a_symlink_to_the_input(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    (tmp_path / "link").symlink_to(rec, target_is_directory=True)
    before = snapshot(tmp_path)
    rc = convert(rec, tmp_path / "link", "--overwrite")
    refused(capsys, tmp_path, before, rc, "is an input of this command")


def test_output_is_an_unrelated_non_empty_directory(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8 not really a cat")
    before = snapshot(tmp_path)
    rc = convert(rec, tmp_path / "photos", "--overwrite")
    refused(capsys, tmp_path, before, rc, "is a non-empty directory that is not a dataset (no dataset.json)")


def test_output_is_a_file(tmp_path, capsys):
    rec = recording(tmp_path / "work")
    (tmp_path / "report.txt").write_text("keep me\n")
    before = snapshot(tmp_path)
    rc = convert(rec, tmp_path / "report.txt", "--overwrite")
    refused(capsys, tmp_path, before, rc, "exists and is not a directory")


def test_output_is_the_current_directory(tmp_path, capsys, monkeypatch):
    rec = recording(tmp_path / "work")
    old_dataset(tmp_path / "here")
    monkeypatch.chdir(tmp_path / "here")
    before = snapshot(tmp_path)
    rc = convert(rec, Path("."), "--overwrite")
    refused(capsys, tmp_path, before, rc, "it is the current directory")


def test_overwrite_replaces_an_existing_dataset_with_a_clean_conversion(tmp_path, capsys, ray_session):
    rec = recording(tmp_path / "work")
    old_dataset(tmp_path / "ds")
    inputs = {k: v for k, v in snapshot(tmp_path).items() if k.startswith("work")}
    assert convert(rec, tmp_path / "ds", "--overwrite") == 0, capsys.readouterr().err
    assert read_info(tmp_path / "ds").num_episodes == 2 and len(load_episodes(tmp_path / "ds")) == 2
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k.startswith("work")} == inputs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "work"]  # no temporary or old copy left


def test_overwrite_with_every_record_quarantined_keeps_the_old_dataset(tmp_path, capsys, ray_session):
    rec = recording(tmp_path / "work", broken=True)
    old_dataset(tmp_path / "ds")
    before = snapshot(tmp_path)
    rc = convert(rec, tmp_path / "ds", "--overwrite")
    refused(capsys, tmp_path, before, rc, "2 record(s) were quarantined", "existing dataset at", "was kept",
            "--allow-quarantine", "new -o")
    assert read_info(tmp_path / "ds").num_episodes == 20


def test_overwrite_with_every_record_quarantined_keeps_the_dataset_even_allowed(tmp_path, capsys, ray_session):
    """--allow-quarantine accepts losing records, not replacing a dataset with one of no episodes."""
    rec = recording(tmp_path / "work", broken=True)
    old_dataset(tmp_path / "ds")
    before = snapshot(tmp_path)
    assert convert(rec, tmp_path / "ds", "--overwrite", "--allow-quarantine") == 2
    assert "no episodes were converted (2 record(s) quarantined), so the existing dataset at" in (
        capsys.readouterr().err)
    assert snapshot(tmp_path) == before
    # into a new place: written, with the quarantine to read, and exit 2
    assert convert(rec, tmp_path / "new", "--allow-quarantine") == 2
    assert read_info(tmp_path / "new").num_episodes == 0
    assert (tmp_path / "new" / "_quarantine" / "records.jsonl").read_text().count("\n") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "new", "work"]


def test_collect_onto_its_policy_checkpoint(tmp_path, capsys):
    # The refusal comes before the checkpoint is read, so a directory with the checkpoint marker is enough.
    ckpt = tmp_path / "runs" / "ckpt"
    ckpt.mkdir(parents=True)
    (ckpt / "algorithm.json").write_text('{"algorithm": "BC"}\n')
    before = snapshot(tmp_path)
    for out, why in ((ckpt, "is an input of this command"), (tmp_path / "runs", "holds the input")):
        rc = main(["collect", "--env", "CartPole-v1", "--episodes", "1", "--policy", str(ckpt), "-o", str(out),
                   "--overwrite", "--no-progress"])
        text = capsys.readouterr().err
        assert rc == 2 and text.startswith("offlinerl collect: ") and why in text, text
        assert snapshot(tmp_path) == before


def test_export_onto_its_input_dataset(tmp_path, capsys):
    ds = tmp_path / "root" / "ns" / "d-v0"
    old_dataset(ds)
    before = snapshot(tmp_path)
    for root, why in ((tmp_path / "root", "is an input of this command"), (ds, "lies inside the input directory")):
        rc = main(["export", "minari", str(ds), "--dataset-id", "ns/d-v0", "--root", str(root), "--overwrite"])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("offlinerl export minari: error: ") and why in err, err
        assert snapshot(tmp_path) == before


_SLOW_WRITER = """
import sys, time
import gymnasium as gym, numpy as np
from offlinerl.episodes import write_dataset
from tests.episodes.builders import make_episode

obs, act = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), gym.spaces.Discrete(3)
def slow():
    for i in range(10_000):
        yield make_episode(i, obs, act, steps=3, terminated=True)
        time.sleep(0.02)
write_dataset(slow(), sys.argv[1], observation_space=obs, action_space=act, rows_per_file=1, overwrite=True)
"""


def start_slow_writer(out: Path) -> tuple[subprocess.Popen, Path]:
    """A writer streaming episodes into ``out`` slowly; returns it and its temporary directory once it holds files."""
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out)], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        tmps = list(out.parent.glob(f".{out.name}.tmp-*"))
        if tmps and len(list(tmps[0].glob("*.parquet"))) >= 3:
            return proc, tmps[0]
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the writer did not start writing within 60 s")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()  # reaped: its pid is gone


def collect_into(out: Path, *flags: str) -> int:
    return main(["collect", "--env", "CartPole-v1", "--episodes", "1", "--seed", "0", "-o", str(out), "--no-progress",
                 *flags])


def test_kill_during_a_first_write_leaves_nothing_and_the_next_writer_cleans_up(tmp_path, capsys):
    out = tmp_path / "ds"
    proc, tmp = start_slow_writer(out)
    assert json.loads((tmp / OWNER_FILE).read_text())["pid"] == proc.pid
    kill(proc)
    assert not out.exists() and tmp.is_dir()  # nothing at the target; the killed writer's directory stays

    assert collect_into(out) == 0
    err = capsys.readouterr().err
    assert f"offlinerl collect: removed {tmp.resolve()}" in err and f"pid {proc.pid}" in err and "no longer running" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"] and len(load_episodes(out)) == 1


def test_kill_during_an_overwrite_keeps_the_old_dataset_and_the_next_writer_cleans_up(tmp_path, capsys):
    out = tmp_path / "ds"
    old_dataset(out)
    before = snapshot(out)
    proc, tmp = start_slow_writer(out)
    kill(proc)
    assert snapshot(out) == before and read_info(out).num_episodes == 20

    assert collect_into(out, "--overwrite") == 0
    assert f"removed {tmp.resolve()}, a temporary directory left by an interrupted writer" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"] and len(load_episodes(out)) == 1


def test_an_interrupted_replace_is_restored_not_deleted(tmp_path, capsys):
    """A writer killed between moving the old output aside and renaming the new one into place."""
    out = tmp_path / "ds"
    old_dataset(tmp_path / "complete")
    before = snapshot(tmp_path / "complete")
    os.rename(tmp_path / "complete", tmp_path / ".ds.old-0badc0de")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / ".ds.tmp-0badc0de").mkdir()
    (tmp_path / ".ds.tmp-0badc0de" / OWNER_FILE).write_text(json.dumps(
        {"pid": int(dead.stdout), "hostname": socket.gethostname(), "started": time.time(), "process_start": "1"}))

    assert collect_into(out) == 2  # the restored dataset exists: not replaced without --overwrite
    captured = capsys.readouterr()
    assert f"restored {out.resolve()} from .ds.old-0badc0de" in captured.err and "already exists" in captured.err
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_a_live_writers_directory_is_never_removed(tmp_path):
    out = tmp_path / "ds"
    proc, tmp = start_slow_writer(out)
    try:
        fresh, old = tmp_path / ".ds.tmp-noowner1", tmp_path / ".ds.tmp-noowner2"
        fresh.mkdir()
        old.mkdir()
        hours_ago = time.time() - STALE_AFTER_S - 60
        os.utime(old, (hours_ago, hours_ago))
        done = clean_stale_siblings(out.resolve())
        assert tmp.is_dir() and (tmp / OWNER_FILE).is_file() and fresh.is_dir() and not old.exists()
        assert done == [f"removed {old.resolve()}, a temporary directory left by an interrupted writer: "
                        f"no owner file, last modified 61 min ago"]
    finally:
        kill(proc)


def test_a_checkpoint_writer_never_replaces_a_dataset(tmp_path):
    """Kinds are told apart by their marker file: --overwrite of a checkpoint onto a dataset is refused."""
    from offlinerl.episodes import UnsafeOutputError, atomic_directory

    old_dataset(tmp_path / "ds")
    before = snapshot(tmp_path)
    with pytest.raises(UnsafeOutputError, match=r"is a non-empty directory that is not a checkpoint \(no algorithm.json\)"):
        with atomic_directory(tmp_path / "ds", overwrite=True, kind="checkpoint"):
            pass
    assert snapshot(tmp_path) == before
