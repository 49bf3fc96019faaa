"""MuJoCo's warnings reach logging once each, not stdout and ./MUJOCO_LOG.TXT (offlinerl.simulator_log).

The env-making cases run in a fresh interpreter each: MuJoCo's handler is per process, and the point is what a
user's first env prints."""

import json
import logging
import subprocess
import sys

import pytest

from offlinerl.simulator_log import mujoco_warning

pytest.importorskip("mujoco")

WARNING_TEXT = "compiler attribute 'settotalmass' is deprecated"

SCRIPT = """
import json, logging, sys
import mujoco
seen = []
logging.basicConfig(level=logging.DEBUG, format="LOG %(levelname)s %(name)s %(message)s", stream=sys.stderr)
mode = sys.argv[1]
if mode == "own-handler":
    mujoco.set_mju_user_warning(seen.append)
if mode == "plain":
    import gymnasium as gym
    for _ in range(2):
        gym.make("HalfCheetah-v5").close()
else:
    from offlinerl.trusted import make_env
    for _ in range(2):
        make_env("HalfCheetah-v5", explicit=True).close()
print("SEEN " + json.dumps(seen))
"""


def _run(mode: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=True)


def test_plain_gymnasium_prints_the_warning_here(tmp_path):
    # what the routing replaces: without it this MuJoCo prints the deprecation per env and writes a log file
    out = _run("plain", tmp_path)
    if WARNING_TEXT not in out.stdout + out.stderr:
        pytest.skip("this MuJoCo does not warn about gymnasium's HalfCheetah model")
    assert (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_make_env_logs_mujoco_warnings_once_and_writes_no_file(tmp_path):
    out = _run("ours", tmp_path)
    lines = (out.stdout + out.stderr).splitlines()
    ours = [line for line in lines if WARNING_TEXT in line]
    if not ours:
        pytest.skip("this MuJoCo does not warn about gymnasium's HalfCheetah model")
    assert len(ours) == 1, ours  # two envs made, the message logged once
    assert ours[0].startswith("LOG DEBUG offlinerl.mujoco MuJoCo: ")
    assert not any(line.startswith("WARNING:") for line in lines)  # MuJoCo's own printing is off
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_a_users_own_mujoco_handler_is_kept(tmp_path):
    out = _run("own-handler", tmp_path)
    seen = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("SEEN "))[5:])
    assert not any("offlinerl.mujoco" in line for line in out.stderr.splitlines())
    if seen:  # this MuJoCo warns: the user's handler got every message, ours none
        assert len(seen) == 2 and all(WARNING_TEXT in m for m in seen)


def test_other_messages_are_warnings_each_logged_once(caplog):
    caplog.set_level(logging.DEBUG, logger="offlinerl.mujoco")
    text = "Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable. (offlinerl test)"
    for _ in range(3):
        mujoco_warning(text)
    mujoco_warning("an attribute is deprecated (offlinerl test)")
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "offlinerl.mujoco"]
    assert records == [(logging.WARNING, f"MuJoCo: {text}"),
                       (logging.DEBUG, "MuJoCo: an attribute is deprecated (offlinerl test)")]
