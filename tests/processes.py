"""Running an ``offlinerl`` command in a child process and killing it at a chosen point (kill -9 tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run_until_written(argv: list[str], marker: Path, timeout: float, **popen: object) -> subprocess.Popen:
    """Start ``python -m offlinerl ARGV`` (joining the test session's Ray) and return it once ``marker`` exists."""
    import ray

    proc = subprocess.Popen(
        [sys.executable, "-m", "offlinerl", *argv, "--no-progress", "--address", ray.get_runtime_context().gcs_address],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
        **popen,
    )
    deadline = time.time() + timeout
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline, f"the job wrote no {marker.name} in time"
        time.sleep(0.05)
    return proc


def kill_once_written(argv: list[str], marker: Path, timeout: float = 300) -> None:
    """Run ``python -m offlinerl ARGV`` (joining the test session's Ray), SIGKILL it as soon as ``marker`` exists
    (e.g. a periodic checkpoint), and check that it had not finished: no ``checkpoints/final`` beside ``marker``."""
    proc = _run_until_written(argv, marker, timeout)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (marker.parent / "final").exists(), "killed too late: the job had finished"


def interrupt_once_written(argv: list[str], marker: Path, timeout: float = 300) -> tuple[int, str]:
    """Run ``python -m offlinerl ARGV`` (joining the test session's Ray) with Ctrl-C's default action, send it SIGINT
    as soon as ``marker`` exists, and return its exit code and stderr once it has ended."""
    proc = _run_until_written(argv, marker, timeout,  # a test runner may start us ignoring SIGINT
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()
