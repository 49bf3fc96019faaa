"""``init_ray`` starting a local Ray: token authentication stays on, Ray's notice about it is not shown; what Ray
Data's workers import stays free of torch."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from offlinerl.ray_utils import _token_auth_default_notice


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
