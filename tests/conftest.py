"""Shared fixtures: one real local Ray per test session, paths to the recordings in tests/fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Real recordings made by other tools (copied from the team's shared fixtures; see tests/fixtures/*/README.md).
SHARED_FIXTURES = Path(os.environ.get("OFFLINERL_SHARED_FIXTURES", REPO / "tests" / "fixtures"))
DATASETS = REPO / "datasets"


def pytest_configure(config):
    """One torch thread in the test process: Ray's workers share the same 2 cores, and the
    in-process learning loops (small MLPs) ran several times slower oversubscribed."""
    import tempfile

    import torch

    torch.set_num_threads(1)
    # Records of validated datasets (offlinerl.episodes.validated) go to a directory of this session, not ~/.cache:
    # every session starts validating from scratch, and CLI subprocesses inherit the setting.
    os.environ.setdefault("OFFLINERL_CACHE_DIR", tempfile.mkdtemp(prefix="offlinerl-cache-"))
    # Not the user's own settings file (its env-package allow-list): tests that need one name their own.
    os.environ.setdefault("OFFLINERL_SETTINGS", os.path.join(tempfile.gettempdir(), "offlinerl-no-settings.yaml"))


@pytest.fixture(scope="session")
def ray_session():
    """A real private local Ray, started once per test session (2 CPUs, no dashboard)."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never a running cluster
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    # Ray is shut down by its atexit hook at the end of the session.


@pytest.fixture
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {SHARED_FIXTURES} (set OFFLINERL_SHARED_FIXTURES)")
    return SHARED_FIXTURES
