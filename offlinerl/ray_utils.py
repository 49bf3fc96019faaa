"""Starting or joining Ray, the same way for every command and test."""

from __future__ import annotations

import logging
import os

__all__ = ["init_ray", "quiet_ray_data"]


def quiet_ray_data() -> None:
    """Keep Ray Data's per-job INFO lines out of a command's output.

    Ray Data sets up its logging when it is imported, so import it first, then lower the level.
    """
    import ray.data  # noqa: F401

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    # init_ray(quiet=True) turns Ray Data's progress bars off on purpose (our commands draw their own);
    # Ray Data then warns once that they are off, which would only be noise in our output.
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


def init_ray(address: str | None = None, num_cpus: int | None = None, quiet: bool = True) -> None:
    """Join the cluster at ``address`` (or ``$RAY_ADDRESS``), else start a local Ray.

    Does nothing if Ray is already initialised in this process.
    """
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs = {"include_dashboard": False, "log_to_driver": not quiet}
    if quiet:
        kwargs["logging_level"] = logging.WARNING
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)
    if quiet:
        quiet_ray_data()
        ray.data.DataContext.get_current().enable_progress_bars = False
