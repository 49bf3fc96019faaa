"""``init_ray`` starting a local Ray: token authentication stays on, Ray's notice about it is not shown; what Ray
Data's workers import stays free of torch; a running cluster is joined only when named (``--address``), and the
one line printed says which; a Ray failure is reported as Ray's, not as bad data."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from offlinerl.ray_utils import local_cpus, _token_auth_default_notice
from tests.conftest import REPO


def test_only_rays_default_token_auth_notice_is_dropped():
    """The filter init_ray puts on Ray's authentication logger drops Ray's own 'enabled by default' notice
    (the real message, so a reworded one in a newer Ray fails here) and nothing else, e.g. the warning that a
    cluster runs *without* authentication."""
    from ray._private.authentication import authentication_token_setup as setup

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger = logging.getLogger(setup.__name__)
    logger.addHandler(handler)
    logger.addFilter(_token_auth_default_notice)
    try:
        setup._warn_token_auth_enabled()
        setup._warn_token_auth_disabled()
    finally:
        logger.removeFilter(_token_auth_default_notice)
        logger.removeHandler(handler)
    assert len(seen) == 1 and seen[0].startswith("Token authentication is disabled")


def test_joining_a_token_cluster_without_the_token_says_what_to_set(monkeypatch):
    """Ray's own error (a ConnectionError, raised from a RuntimeError, raised from the AuthenticationError) is
    recognised through the chain and replaced by one line naming the fix; other connection errors are not."""
    from ray.exceptions import AuthenticationError

    from offlinerl.ray_utils import _auth_help, _auth_refused

    try:
        try:
            raise AuthenticationError("RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
        except AuthenticationError as auth:
            raise RuntimeError("Failed to connect to GCS") from auth
    except RuntimeError as gcs:
        refused = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
        refused.__cause__ = gcs
    assert _auth_refused(refused) and not _auth_refused(ConnectionError("Failed to connect to Ray cluster"))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "set RAY_AUTH_MODE=token" in _auth_help("10.0.0.1:6379")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "refused this client's token" in _auth_help("10.0.0.1:6379")
    # a refused token is not 'Ray failed, run it again': the command's one line is the fix itself
    from offlinerl.cli import ray_failure_line
    from offlinerl.ray_utils import RayAuthError, ray_failure

    refused_here = RayAuthError(_auth_help("10.0.0.1:6379"))
    assert ray_failure(refused_here) is None
    assert ray_failure_line("offlinerl train", refused_here) == f"offlinerl train: {_auth_help('10.0.0.1:6379')}"


@pytest.mark.parametrize("module", ["offlinerl.data.offline_data", "offlinerl.connectors", "offlinerl.episodes.validate",
                                    "offlinerl.convert.samplebatch", "offlinerl.convert.rllib"])
def test_what_ray_data_workers_import_does_not_import_torch(module):
    """Ray Data's workers unpickle transforms from these modules: importing torch there made every worker start
    ~2 s later (a cold in-memory load of a small dataset: 5.5 s -> 2.5 s without it) and hold more memory."""
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_background_import_that_fails_is_left_to_the_real_import():
    from offlinerl.ray_utils import _import_in_background

    _import_in_background("offlinerl.no_such_module").join()  # no exception escapes the thread


# ---------------------------------------------------------------- local by default; Ray failures as Ray failures


def test_a_dead_worker_is_a_ray_failure_and_a_tasks_own_error_is_not(ray_session):
    """A real worker that dies under its task (WorkerCrashedError) is named as Ray's failure; an error the task's
    own code raised (RayTaskError carrying a ValueError, e.g. malformed data) is not."""
    import os

    import ray

    from offlinerl.cli import ray_failure_line
    from offlinerl.ray_utils import RAY_FAILURE_HELP, ray_failure

    @ray.remote(max_retries=0)
    def dies():
        os._exit(1)

    @ray.remote(max_retries=0)
    def raises():
        raise ValueError("row 3: bad action")

    with pytest.raises(ray.exceptions.WorkerCrashedError) as crashed:
        ray.get(dies.remote())
    assert ray_failure(crashed.value).startswith("WorkerCrashedError: The worker died unexpectedly")
    line = ray_failure_line("offlinerl validate", crashed.value)  # what offlinerl.cli.main prints, and exits 1
    assert line.startswith("offlinerl validate: Ray failed (WorkerCrashedError: The worker died unexpectedly")
    assert line.endswith(f"); {RAY_FAILURE_HELP}") and "\n" not in line
    with pytest.raises(ray.exceptions.RayTaskError) as own:
        ray.get(raises.remote())
    assert ray_failure(own.value) is None


def test_reading_a_dataset_blames_ray_not_the_data_when_ray_goes_away():
    """The connection error Ray raises when its GCS is gone is an OSError: ``reading`` used to call that an
    unreadable dataset. Now it is a RayFailure, in one line that says so; real bad data is still the data's."""
    from offlinerl.data.errors import DatasetReadError, reading
    from offlinerl.ray_utils import RAY_FAILURE_HELP, RayFailure

    with pytest.raises(RayFailure) as failed:
        with reading("datasets/pendulum-mixed"):
            raise ConnectionError("Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.")
    assert str(failed.value) == (
        f"Ray failed (ConnectionError: Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.); "
        f"{RAY_FAILURE_HELP}")
    assert "\n" not in str(failed.value)
    with pytest.raises(DatasetReadError, match=r"^ds: cannot read the dataset as training data \(ValueError: no\)"):
        with reading("ds"):
            raise ValueError("no")


@pytest.fixture(scope="module")
def stray_cluster():
    """Someone else's cluster on this machine, started with ``ray start --head`` (1 CPU) and recorded where Ray's
    own default ``ray.init()`` looks for one to join (``$RAY_TMPDIR/ray/ray_current_cluster``); the tests point
    ``RAY_TMPDIR`` at a directory of their own, so no other Ray on the machine sees it. Stopped by pid after."""
    import shutil
    import tempfile
    from pathlib import Path

    from examples import local_cluster

    try:
        local_cluster._ray_executable()
    except FileNotFoundError as exc:
        pytest.skip(f"`ray start` is not available: {exc}")
    root = Path(tempfile.mkdtemp(prefix="orls-", dir="/tmp"))  # short: Ray's unix sockets live under it
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(root / "auth_token")}
    try:
        info = local_cluster.up(root, workers=0, head_cpus=1, object_store_mb=128, env=env)
        (root / "ray").mkdir()
        (root / "ray" / "ray_current_cluster").write_text(info["address"])
        client = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        yield info["address"], {**client, **env, "RAY_TMPDIR": str(root), "PYTHONPATH": str(REPO)}
    finally:
        local_cluster.down(root)
        shutil.rmtree(root, ignore_errors=True)


def _validate(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlinerl", "validate", str(REPO / "datasets" / "cartpole-mixed"),
                           *extra], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_command_starts_its_own_ray_instead_of_joining_a_running_cluster(stray_cluster, tmp_path):
    """Ray's plain ``ray.init()`` would join the stray cluster (with 'Found multiple active Ray instances' when
    there are several); a command without --address starts a private local Ray and says so in one line."""
    address, env = stray_cluster
    probe = "from ray._private.services import canonicalize_bootstrap_address as c; print(c(None))"
    joined = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert joined.strip() == address  # what Ray's own default would have joined
    # a data operation always runs on Ray (validate checks a dataset this small in its own process)
    proc = subprocess.run([sys.executable, "-m", "offlinerl", "data", "filter", str(REPO / "datasets" / "cartpole-mixed"),
                           "--top", "10%", "-o", str(tmp_path / "top")], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    cpus = local_cpus(None)
    assert proc.stderr.splitlines()[0] == f"offlinerl data: starting Ray (local, {cpus} CPUs) ..."
    assert address not in proc.stdout + proc.stderr and "Connecting to latest cluster" not in proc.stderr


@pytest.mark.slow
def test_address_joins_the_cluster_and_names_it(stray_cluster):
    address, env = stray_cluster
    proc = _validate(env, "--address", address)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[:2] == [f"offlinerl validate: joining the Ray cluster at {address} ...",
                                            f"offlinerl validate: joined the Ray cluster at {address}: 1 node, 1 CPUs"]


def test_quiet_drops_the_ray_line_and_verbose_keeps_it(tmp_path, capsys):
    """The level each flag chooses, and --quiet dropping the library's INFO line while a warning stays."""
    import argparse
    import logging

    from offlinerl.cli.output import configured, log_level

    def ns(**kw):
        return argparse.Namespace(**{"quiet": False, "verbose": 0, "log_level": None, **kw})

    assert [log_level(ns()), log_level(ns(quiet=True)), log_level(ns(verbose=1)),
            log_level(ns(quiet=True, log_level="error"))] == [logging.INFO, logging.WARNING, logging.DEBUG,
                                                               logging.ERROR]
    lib = logging.getLogger("offlinerl.ray_utils")
    with configured(logging.WARNING, "offlinerl x"):
        lib.info("starting Ray (local, 2 CPUs) ...")
        lib.warning("a warning")
    with configured(logging.INFO, "offlinerl y"):
        lib.info("starting Ray (local, 2 CPUs) ...")
    assert capsys.readouterr().err == ("offlinerl x: a warning\n"
                                       "offlinerl y: starting Ray (local, 2 CPUs) ...\n")
    assert logging.getLogger("offlinerl").level == logging.NOTSET  # restored after the command
