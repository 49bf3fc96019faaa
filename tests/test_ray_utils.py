"""``init_ray`` starting a local Ray: token authentication stays on, Ray's notice about it is not shown."""

from __future__ import annotations

import logging

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
