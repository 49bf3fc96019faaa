"""MuJoCo's warnings through Python logging, each distinct message once per process.

MuJoCo's own warning handler prints every warning on stdout and appends it to ``MUJOCO_LOG.TXT`` in the working
directory. Under MuJoCo ≥ 3.3 that is one "compiler attribute 'settotalmass' is deprecated" per HalfCheetah,
Hopper or Walker2d env made (gymnasium's own model files): dozens of lines through a benchmark's progress and a
file left in the user's directory. :func:`route_mujoco_warnings` installs :func:`mujoco_warning` instead, once per
process, and only where no handler was installed before (a user's own stays): a message that says something is
deprecated goes to the ``offlinerl.mujoco`` logger at debug level (it is about the env's model file, nothing the
user can change), any other (e.g. an unstable simulation's "Nan, Inf or huge value in QACC") as a warning.
``offlinerl.trusted.make_env`` calls it before every env is made.
"""

from __future__ import annotations

import logging
import sys
import threading

__all__ = ["LOGGER", "MAX_DISTINCT", "mujoco_warning", "route_mujoco_warnings"]

LOGGER = logging.getLogger("offlinerl.mujoco")

#: Distinct messages remembered for deduplication; past this many, new ones are still logged, not remembered.
MAX_DISTINCT = 1000

_seen: set[str] = set()
_lock = threading.Lock()


def mujoco_warning(message: str) -> None:
    """MuJoCo's warning handler: log ``message`` the first time this process sees it (debug for deprecations)."""
    text = str(message).strip()
    with _lock:
        if text in _seen:
            return
        if len(_seen) < MAX_DISTINCT:
            _seen.add(text)
    LOGGER.log(logging.DEBUG if "deprecated" in text else logging.WARNING, "MuJoCo: %s", text)


def route_mujoco_warnings() -> bool:
    """Make :func:`mujoco_warning` MuJoCo's warning handler if MuJoCo is loaded in this process and has none
    installed; whether it is the handler now. Imports nothing: an env that needs MuJoCo has loaded it."""
    mujoco = sys.modules.get("mujoco")
    if mujoco is None or not hasattr(mujoco, "set_mju_user_warning"):
        return False
    current = mujoco.get_mju_user_warning()
    if current is None:
        mujoco.set_mju_user_warning(mujoco_warning)
        return True
    return current is mujoco_warning
