"""Starting or joining Ray, the same way for every command and test."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading

__all__ = ["init_ray", "local_cpus", "quiet_ray_data", "node_id", "cluster_node_ids", "RayFailure", "RayAuthError",
           "ray_failure", "RAY_FAILURE_HELP"]

log = logging.getLogger(__name__)

RAY_FAILURE_HELP = ("this is Ray failing (the cluster went away, a worker or node died, or Ray could not be reached), "
                    "not a problem with the data or the config: run the command again (without --address and "
                    "$RAY_ADDRESS it starts a private local Ray; for a cluster, `ray status --address ADDR` shows "
                    "its state)")
"""What to do after a Ray failure, the end of the one line a command prints for it."""


class RayAuthError(ConnectionError):
    """The cluster refused this client's token (or its lack of one); the message names the fix. Not a
    :func:`ray_failure`: running the command again changes nothing."""


class RayFailure(RuntimeError):
    """Ray itself failed under a command; the message (``Ray failed (FAILURE); what to do``) is one line."""

    def __init__(self, failure: str) -> None:
        self.failure = failure
        """``Type: first line`` of Ray's error (:func:`ray_failure`)."""
        super().__init__(f"Ray failed ({failure}); {RAY_FAILURE_HELP}")


def quiet_ray_data() -> None:
    """Keep Ray Data's per-job INFO lines out of a command's output.

    Ray Data sets up its logging when it is imported, so import it first, then lower the level.
    """
    import ray.data  # noqa: F401

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    # init_ray(quiet=True) turns Ray Data's progress bars off on purpose (our commands draw their own);
    # Ray Data then warns once that they are off, which would only be noise in our output.
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
    # A task that raised is announced by Ray Data at ERROR (with a stack) before the exception reaches the command,
    # which reports it itself in one line naming the input; the announcement stays for -v only.
    verbose = logging.getLogger("offlinerl").getEffectiveLevel() <= logging.DEBUG
    for name in _TASK_ERROR_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.CRITICAL)


#: Ray Data's loggers that announce a failed task before its exception is raised in the driver.
_TASK_ERROR_LOGGERS = ("ray.data._internal.execution.streaming_executor_state", "ray.data.exceptions")


def _token_auth_default_notice(record: logging.LogRecord) -> bool:
    """False for Ray's notice that a new local cluster uses token authentication by default."""
    return not record.getMessage().startswith("Token authentication is enabled for this Ray cluster")


def _auth_refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is the cluster refusing this client's token."""
    from ray.exceptions import AuthenticationError

    while exc is not None:
        if isinstance(exc, AuthenticationError) or "InvalidAuthToken" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _auth_help(address: str) -> str:
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return (f"the Ray cluster at {address} refused this client's token: give it the cluster's token (in "
                "~/.ray/auth_token, $RAY_AUTH_TOKEN_PATH or $RAY_AUTH_TOKEN; docs/training.md, 'Ray authentication')")
    return (f"the Ray cluster at {address} uses token authentication and this client sent no token: set "
            "RAY_AUTH_MODE=token (with the cluster's token in ~/.ray/auth_token, $RAY_AUTH_TOKEN_PATH or "
            "$RAY_AUTH_TOKEN; docs/training.md, 'Ray authentication')")


def _import_in_background(module: str) -> threading.Thread:
    """Import ``module`` on a daemon thread (an import that fails is left for the real import to report)."""

    def run() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001
            pass

    thread = threading.Thread(target=run, name=f"import {module}", daemon=True)
    thread.start()
    return thread


def ray_failure(exc: BaseException | None) -> str | None:
    """``Type: first line`` of the Ray failure in ``exc``'s chain (a dead actor, worker, node or raylet, a lost
    object, an unreachable GCS), or None when ``exc`` is not one. A task's own error (``RayTaskError`` whose
    cause is the user's code, e.g. malformed data) is not a Ray failure; nor is anything in a process that never
    imported Ray (a job that ran without it), which this does not import Ray to find out."""
    rex = sys.modules.get("ray.exceptions")
    if rex is None:
        return None

    system = (rex.RaySystemError, rex.RayActorError, rex.WorkerCrashedError, rex.NodeDiedError, rex.ObjectLostError,
              rex.LocalRayletDiedError, rex.RpcError)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, RayFailure):
            return exc.failure
        if isinstance(exc, RayAuthError):
            return None
        if isinstance(exc, rex.RayTaskError):
            exc = exc.cause
            continue
        text = str(exc).strip()
        gcs = isinstance(exc, (ConnectionError, RuntimeError)) and ("GCS" in text or "Ray cluster" in text)
        if isinstance(exc, system) or gcs:
            first = text.splitlines()[0] if text else ""
            return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        exc = exc.__cause__ or exc.__context__
    return None


def _cluster_line(address: str) -> str:
    """``address: N nodes, M CPUs`` of the cluster just joined."""
    import ray

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    cpus = ray.cluster_resources().get("CPU", 0)
    return f"joined the Ray cluster at {address}: {nodes} node{'s' * (nodes != 1)}, {cpus:g} CPUs"


def local_cpus(num_cpus: int | None) -> int:
    """The CPUs a local Ray will have: ``num_cpus``, else what Ray counts (cgroup limits included)."""
    if num_cpus is not None:
        return num_cpus
    try:
        from ray._private.utils import get_num_cpus

        return int(get_num_cpus())
    except Exception:  # noqa: BLE001 - a private helper that moved: the plain count is near enough for one line
        return os.cpu_count() or 1


def init_ray(address: str | None = None, num_cpus: int | None = None, quiet: bool | None = None) -> None:
    """Join the cluster at ``address`` (or ``$RAY_ADDRESS``), else start a private local Ray.

    Does nothing if Ray is already initialised in this process. Without an address this never joins a running
    cluster (Ray's own default joins the newest ``ray start`` cluster on the machine): it always passes
    ``address="local"``. Logs (``offlinerl.ray_utils``, INFO) one line before Ray starts -- ``starting Ray
    (local, N CPUs) ...`` or ``joining the Ray cluster at ADDR ...`` -- and, after joining, the cluster's
    size. ``quiet`` (default: unless the ``offlinerl`` logger is at DEBUG, i.e. ``-v``): Ray's own INFO lines,
    its workers' output and Ray Data's progress bars are kept out of the command's output.

    A local Ray we start ourselves keeps Ray's default, token authentication (a token is made in
    ``~/.ray/auth_token`` if there is none), without Ray's warning about it on every command.
    Joining a cluster leaves authentication and its messages to Ray: how that cluster was started
    decides (docs/training.md, "Ray authentication").
    """
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    if quiet is None:
        quiet = not logging.getLogger("offlinerl").isEnabledFor(logging.DEBUG)
    # A process that will train has imported torch; its first optimizer then imports torch._dynamo (~2 s).
    # ray.init mostly waits on the processes it starts, so that import happens meanwhile, and is finished
    # (joined) before anything else imports: two threads importing at once could deadlock on module locks.
    warm = _import_in_background("torch._dynamo") if "torch" in sys.modules else None
    kwargs = {"include_dashboard": False, "log_to_driver": not quiet}
    if quiet:
        kwargs["logging_level"] = logging.WARNING
    try:
        if address:
            log.info(f"joining the Ray cluster at {address} ...")
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError) as exc:
                if not _auth_refused(exc):
                    raise
                raise RayAuthError(_auth_help(address)) from exc
            log.info(_cluster_line(address))
        else:
            log.info(f"starting Ray (local, {local_cpus(num_cpus)} CPUs) ...")
            auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
            auth_log.addFilter(_token_auth_default_notice)
            try:
                ray.init(address="local", num_cpus=num_cpus, **kwargs)
            finally:
                auth_log.removeFilter(_token_auth_default_notice)
    finally:
        if warm is not None:
            warm.join()
    if quiet:
        quiet_ray_data()
        ray.data.DataContext.get_current().enable_progress_bars = False


def node_id() -> str | None:
    """The id (hex) of the Ray node this code runs on: in a task or actor, the node that runs it; in a
    driver, the node it joined. None when Ray is not initialised in this process."""
    import ray

    if not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_node_id()


def cluster_node_ids() -> list[str]:
    """The ids of the cluster's alive nodes (sorted); ``[]`` when Ray is not initialised."""
    import ray

    if not ray.is_initialized():
        return []
    return sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
