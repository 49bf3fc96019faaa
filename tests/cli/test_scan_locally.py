"""``validate`` and ``inspect`` on a small dataset run in the command's process, without starting Ray (a newcomer's
first commands take a second, not Ray's start-up); a named cluster, a running Ray or a large dataset keep the
Ray Data job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from offlinerl.episodes.io import parquet_files
from offlinerl.episodes.scan import LOCAL_SCAN_MAX_BYTES, scan_locally

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "datasets" / "cartpole-mixed"


def test_small_datasets_on_no_named_cluster_are_scanned_here(monkeypatch, tmp_path):
    files = parquet_files(DATA)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    import ray

    assert scan_locally(files) is (not ray.is_initialized()) and scan_locally(DATA) is scan_locally(files)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert scan_locally(files) is False  # --address / RAY_ADDRESS: the cluster does the work
    monkeypatch.delenv("RAY_ADDRESS")
    big = tmp_path / "part-00000.parquet"
    with open(big, "wb") as f:
        f.truncate(LOCAL_SCAN_MAX_BYTES + 1)  # sparse: its size is what counts
    assert scan_locally([big]) is False


def test_validate_and_inspect_a_shipped_dataset_without_ray():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    for argv in (["validate", str(DATA), "--json"], ["inspect", str(DATA), "--json"]):
        proc = subprocess.run([sys.executable, "-m", "offlinerl.cli", *argv], env=env, cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "starting Ray" not in proc.stderr and "Traceback" not in proc.stderr
        out = json.loads(proc.stdout)
        if argv[0] == "validate":
            assert out["exit_code"] == 0 and out["ray_nodes"] == []
        else:
            assert out["steps"] == 51_250
