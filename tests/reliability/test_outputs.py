"""Outputs and resumed directories, through the real CLI (docs/safety.md, "Writers: what --overwrite may replace"
and "Resumed directories"): a report or policy file never lands on or inside what the command reads, nor inside
any dataset or checkpoint; ``--resume`` refuses a run or sweep directory with a link to outside it; every sweep
trial validates its own dataset; a read-only or full disk is one message and leaves nothing half-written.

Each case asserts the exit code, the one-line message and, by hashing every file, that nothing outside the job
changed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from offlinerl.cli import main
from offlinerl.episodes import load_episodes, write_dataset
from offlinerl.episodes.stats import StatsError, dataset_stats, plot_stats
from offlinerl.jobs.sweep import SweepSpec, plan_trials
from tests.conftest import REPO
from tests.datagen import make_dataset


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``, links not followed: a file's sha256, ``dir``, or ``-> TARGET`` for a link."""
    out = {}
    for parent, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(parent, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def without_logging_errors(text: str) -> str:
    """``text`` less the "--- Logging error ---" reports of a Ray logging handler still bound to the stderr of an
    earlier test (pytest's capsys closes it): noise of the test session, not output of the command."""
    kept, noise = [], False
    for line in text.splitlines(keepends=True):
        noise = noise or line.startswith("--- Logging error ---")
        if not noise:
            kept.append(line)
        noise = noise and not line.startswith("Arguments: ")
    return "".join(kept)


def one_line(capsys, prefix: str) -> str:
    """The command's message: exactly one stderr line starting with ``prefix``, no traceback."""
    captured = capsys.readouterr()
    err = without_logging_errors(captured.err)
    assert "Traceback" not in without_logging_errors(captured.out) + err, err
    lines = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, err
    return lines[0]


def _job_file(path: Path, dataset: Path, **extra) -> Path:
    path.write_text(yaml.safe_dump({
        "algorithm": "bc", "dataset": str(dataset),
        "config": {"updates_per_iteration": 5, "train_batch_size": 16, "model": {"hidden": [8]},
                   "evaluation": {"episodes": 1, "interval": 0}},
        "stop": {"iterations": 2}, "checkpoint_interval": 1, **extra}))
    return path


@pytest.fixture(scope="module")
def job(tmp_path_factory, ray_session):
    """A dataset, a job file on it and a finished run of that job (its checkpoints and metrics)."""
    root = tmp_path_factory.mktemp("outputs")
    data = make_dataset(root / "cartpole", episodes=4)
    job_file = _job_file(root / "bc.yaml", data)
    run = root / "run"
    assert main(["train", str(job_file), "-o", str(run), "--no-progress"]) == 0
    return data, job_file, run


def test_a_file_output_never_lands_on_or_inside_what_the_command_reads(job, tmp_path, capsys):
    data, job_file, run = job
    ckpt = run / "checkpoints" / "final"
    before = {"data": tree(data), "run": tree(run)}
    ope = ["ope", str(ckpt), "--dataset", str(data), "--method", "fqe", "--fqe-updates", "5", "--resamples", "5",
           "--skip-validation"]
    refusals = [
        (data / "dataset.json", "lies inside the input directory"),  # used to replace it, exit 0
        (ckpt / "algorithm.json", "lies inside the input directory"),
        (data / "report.json", "lies inside the input directory"),
        (run / "checkpoints" / "iter-000001" / "report.json", "lies inside the checkpoint"),  # not an input: any
        (data, "is an input of this command"),
        (run, "holds the input"),  # a parent of one
        (tmp_path, "is a directory"),
        (Path("/dev/null"), "not a regular file"),
    ]
    for out, why in refusals:
        code = main([*ope, "--out", str(out), "--overwrite"])
        message = one_line(capsys, "offlinerl ope: ")
        assert code == 2 and why in message, message
    code = main(["export", "policy", str(ckpt), "--format", "torchscript", "-o", str(data / "policy.pt"),
                 "--overwrite"])
    message = one_line(capsys, "offlinerl export policy: error: ")
    assert code == 2 and "lies inside the dataset" in message, message
    code = main(["sweep", str(job_file), "-o", str(ckpt / "sweep"), "--no-progress"])
    message = one_line(capsys, "offlinerl sweep: ")
    assert code == 1 and "lies inside the checkpoint" in message, message
    code = main(["train", str(job_file), "-o", str(data / "run"), "--no-progress", "--skip-validation"])
    message = one_line(capsys, "offlinerl train: ")  # refused before Ray starts, naming the dataset as the input
    assert code == 1 and "lies inside the input directory" in message and "(the dataset it reads)" in message, message
    with pytest.raises(StatsError, match="lies inside the input directory"):  # offlinerl inspect --plot
        plot_stats(dataset_stats(data), data / "histograms.png")
    assert {"data": tree(data), "run": tree(run)} == before

    # A missing directory is created (it used to be a traceback); an existing report needs --overwrite.
    out = tmp_path / "reports" / "new" / "ope.json"
    assert main([*ope, "--out", str(out)]) == 0
    report = out.read_bytes()
    assert json.loads(report)["results"][0]["methods"][0]["method"] == "fqe"
    capsys.readouterr()
    code = main([*ope, "--out", str(out)])
    message = one_line(capsys, "offlinerl ope: ")
    assert code == 2 and "already exists" in message and "--overwrite" in message
    assert out.read_bytes() == report and sorted(p.name for p in out.parent.iterdir()) == ["ope.json"]
    assert {"data": tree(data), "run": tree(run)} == before


def test_resume_refuses_a_directory_with_a_link_to_outside_it(job, tmp_path, capsys):
    data, job_file, run = job
    before = tree(run)

    # checkpoints/ linked into another run: resuming used to change 6 of that run's files.
    linked = tmp_path / "linked"
    linked.mkdir()
    shutil.copy(run / "config.yaml", linked / "config.yaml")
    (linked / "checkpoints").symlink_to(run / "checkpoints")
    # a copy of the run whose metrics.jsonl is the other run's
    copied = tmp_path / "copied"
    shutil.copytree(run, copied)
    (copied / "metrics.jsonl").unlink()
    (copied / "metrics.jsonl").symlink_to(run / "metrics.jsonl")
    for resumed, link in ((linked, "checkpoints"), (copied, "metrics.jsonl")):
        mine = tree(resumed)
        code = main(["train", "--resume", str(resumed), "--set", "stop.iterations=4", "--no-progress"])
        message = one_line(capsys, "offlinerl train: ")
        assert code == 1 and f"{resumed / link}: a symbolic link to {run / link}" in message, message
        assert "outside the run directory" in message
        assert tree(resumed) == mine and tree(run) == before

    # A sweep whose trial directory is linked elsewhere: --resume used to delete the files there (exit 0).
    sweep = tmp_path / "sweep"
    (sweep / "trials").mkdir(parents=True)
    spec = SweepSpec(job=str(job_file), workdir=str(tmp_path), overrides=[], grid={}, seeds=[],
                     trials=plan_trials({}, []))
    (sweep / "sweep.json").write_text(spec.to_json())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("not the sweep's\n")
    (sweep / "trials" / spec.trials[0].name).symlink_to(elsewhere)
    outside, mine = tree(elsewhere), tree(sweep)
    code = main(["sweep", "--resume", str(sweep), "--no-progress"])
    message = one_line(capsys, "offlinerl sweep: ")
    assert code == 1 and "a symbolic link to" in message and "outside the sweep directory" in message, message
    assert tree(elsewhere) == outside and tree(sweep) == mine and tree(run) == before


def test_every_sweep_trial_validates_its_own_dataset(job, ray_session, tmp_path, capsys):
    """The grid varies the dataset; the second one has a NaN reward. Only the first grid point's data used to be
    validated, and that trial trained to the end on data `train` refuses."""
    data, job_file, _ = job
    env = gym.make("CartPole-v1")
    episodes = load_episodes(data)
    rewards = np.array(episodes[1].rewards, dtype=np.float64)
    rewards[2] = np.nan
    episodes[1] = dataclasses.replace(episodes[1], rewards=rewards)
    bad = tmp_path / "nan-reward"
    write_dataset(episodes, bad, observation_space=env.observation_space, action_space=env.action_space,
                  env_id="CartPole-v1")
    before = {"data": tree(data), "bad": tree(bad)}
    sweep = tmp_path / "sweep"
    code = main(["sweep", str(job_file), "--grid", f"dataset={data},{bad}", "--set", "stop.iterations=1",
                 "--max-concurrent", "1", "-o", str(sweep), "--no-progress",
                 "--address", ray_session.get_runtime_context().gcs_address])
    captured = capsys.readouterr()
    err = without_logging_errors(captured.err)
    assert code == 1 and "Traceback" not in err, err
    first, second = (t.name for t in SweepSpec.from_file(sweep / "sweep.json").trials)
    assert (sweep / "trials" / first / "result.json").is_file()  # the valid dataset's trial ran
    not_run = [line for line in err.splitlines() if line.startswith(f"offlinerl sweep: trial {second} ")]
    assert not_run == [f"offlinerl sweep: trial {second} not run: {bad} failed validation (finite: "
                       f"part-00000.parquet row 2 episode 'ep1': rewards[2] = nan)"], err
    assert f"1 trial(s) failed: {second}" in err
    assert not (sweep / "trials" / second).exists()  # no update: no run directory at all
    assert "rewards[2] = nan" in (sweep / "trials" / f"{second}.log").read_text()
    assert {"data": tree(data), "bad": tree(bad)} == before


# -- a read-only or full filesystem ---------------------------------------------------------------------------

_NO_MOUNT = 97  # the shell's exit code when no private filesystem could be mounted


def _in_own_filesystem(mount: Path, size: str, read_only: bool,
                       steps: list[list[str] | str]) -> list[tuple[int, str]]:
    """Run each step, an ``offlinerl`` command (argv) or a shell line, with a fresh tmpfs of ``size`` mounted at
    ``mount`` in a mount namespace of its own (nothing else sees it); returns (exit code, stdout + stderr) per
    command, then (0, the paths the tmpfs held at the end)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a private filesystem")
    at, here = shlex.quote(str(mount)), shlex.quote(str(mount.parent))
    script = [f"mount -t tmpfs -o size={size} tmpfs {at} || exit {_NO_MOUNT}"]
    if read_only:  # mounted, then made read-only (as a disk the kernel remounts after errors)
        script.append(f"mount -o remount,ro {at} || exit {_NO_MOUNT}")
    commands = [step for step in steps if not isinstance(step, str)]
    for step in steps:
        if isinstance(step, str):
            script.append(step)
            continue
        i = commands.index(step)
        line = shlex.join([sys.executable, "-m", "offlinerl", *step])
        script.append(f"{line} > {here}/out-{i} 2>&1; echo $? > {here}/rc-{i}")
    script.append(f"find {at} -mindepth 1 > {here}/left")
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    proc = subprocess.run(["unshare", *user, "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    if proc.returncode == _NO_MOUNT or proc.returncode and "unshare" in proc.stderr:
        pytest.skip(f"cannot mount a private tmpfs here: {proc.stderr.strip()}")
    results = [(int((mount.parent / f"rc-{i}").read_text()), (mount.parent / f"out-{i}").read_text())
               for i in range(len(commands))]
    return results + [(0, (mount.parent / "left").read_text())]


def _refuse_writes(directory: Path) -> None:
    """Make ``directory`` one this test's commands may not write into: mode 0o555 and, as root (which writes
    anyway), owned by nobody, for a command run in a user namespace (``_unprivileged``)."""
    if os.geteuid() == 0:
        os.chown(directory, 65534, 65534)
    directory.chmod(0o555)


def _unprivileged() -> list[str]:
    """The prefix that runs a command without root's right to write anywhere: none for a user; for root, a user
    namespace (root there has no rights over files of users it does not map)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "--map-root-user", "true"]).returncode:
        pytest.skip("root, and no user namespace to drop its rights in")
    return ["unshare", "--user", "--map-root-user"]


def _collect(out: Path, episodes: int = 200) -> list[str]:
    return ["collect", "--env", "CartPole-v1", "--episodes", str(episodes), "--seed", "0", "-o", str(out),
            "--no-progress"]


@pytest.mark.parametrize("disk", ["read-only", "full", "no-permission"])
def test_a_read_only_or_full_disk_is_one_message_and_leaves_nothing(job, tmp_path, capsys, disk):
    data, _, run = job
    work = tmp_path / "work"
    mount = work / "disk"
    mount.mkdir(parents=True)
    before = {"data": tree(data), "run": tree(run)}
    if disk == "no-permission":  # a 0o555 directory; as root, one of another user, seen from a user namespace
        _refuse_writes(mount)
        try:
            proc = subprocess.run([*_unprivileged(), sys.executable, "-m", "offlinerl", *_collect(mount / "ds", 2)],
                                  env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True,
                                  text=True, timeout=120)
        finally:
            mount.chmod(0o755)
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"offlinerl collect: {mount / 'ds'}: cannot write: permission denied (EACCES); "
                                      "nothing was left half-written") and proc.stderr.count("\n") == 1, proc.stderr
        assert list(mount.iterdir()) == [] and {"data": tree(data), "run": tree(run)} == before
        return
    ope = ["ope", str(run / "checkpoints" / "final"), "--dataset", str(data), "--method", "fqe", "--fqe-updates",
           "5", "--resamples", "5", "--skip-validation", "--quiet", "--out", str(mount / "ope.json")]  # no progress
    size, problem = {"read-only": ("1m", "the filesystem is read-only (EROFS)"),
                     "full": ("16k", "no space is left on the device (ENOSPC)")}[disk]
    # collect fails mid-write (full) or at its first directory (read-only); ope's report on a disk filled to the
    # last byte fails at its write (full) or before any fitting (read-only).
    fill = f"dd if=/dev/zero of={shlex.quote(str(mount / 'filler'))} bs=4k 2>/dev/null; true"
    results = _in_own_filesystem(mount, size, disk == "read-only", [_collect(mount / "ds"), fill, ope])
    (collect_rc, collect_out), (ope_rc, ope_out), (_, left) = results
    for rc, text, prefix, out in ((collect_rc, collect_out, "offlinerl collect: ", mount / "ds"),
                                  (ope_rc, ope_out, "offlinerl ope: ", mount / "ope.json")):
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        assert rc == 1 and "Traceback" not in text and len(lines) == 1, text
        assert lines[0].startswith(f"{prefix}{out}: cannot write: {problem}; nothing was left half-written"), text
    # no dataset, report, temporary directory or file left behind
    assert left.split() == ([str(mount / "filler")] if disk == "full" else [])
    assert list(mount.iterdir()) == []  # the private filesystem is gone; the directory under it was never written
    assert {"data": tree(data), "run": tree(run)} == before
