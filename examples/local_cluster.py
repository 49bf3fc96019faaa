"""A local multi-node Ray cluster, started the way users start one: a head and worker nodes as separate
raylets (``ray start --head``, then ``ray start --address``), each with its own CPUs and temp dir.

    python examples/local_cluster.py up [--dir DIR] [--workers N] [--head-cpus C] [--worker-cpus C]
                                        [--object-store-mb MB]
    python examples/local_cluster.py env [--dir DIR]     # the shell lines that make commands join it
    python examples/local_cluster.py down [--dir DIR]
    make cluster-up / make cluster-down                   # the same, with the defaults

Every node is one ``ray start --block`` process (its gcs_server, raylet, agents and workers are its
descendants), so ``down`` stops exactly the processes ``up`` started, by pid: never ``ray stop``, which
stops every Ray on the machine, other people's included. ``DIR/cluster.json`` records the address and
the pids; ``DIR/<node>/`` holds each node's Ray temp dir and ``DIR/<node>.log`` its output.

Authentication: the nodes keep Ray's token authentication (``RAY_AUTH_MODE=token``; a token is made in
``~/.ray/auth_token`` if there is none, or in ``$RAY_AUTH_TOKEN_PATH`` if that is set and missing).
A command joining with ``--address`` must set ``RAY_AUTH_MODE=token`` too (Ray never sends a token to
an address it was given unless told to); ``env`` prints those lines. ``RAY_AUTH_MODE=disabled`` in the
environment of ``up`` starts the cluster without authentication (clients then set the same).

The commands join only when told (``--address`` or ``RAY_ADDRESS``): the nodes' temp dirs are not
Ray's default ``/tmp/ray``, so a plain ``ray.init()`` elsewhere keeps starting its own local Ray.
docs/scaling.md ("Run on a cluster") says what runs where.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

__all__ = ["up", "down", "client_env", "DEFAULT_DIR"]

DEFAULT_DIR = Path("/tmp") / f"offlinerl-cluster-{os.environ.get('USER', 'user')}"
"""Short on purpose: Ray's unix sockets live under it, and a socket path is limited to ~100 bytes."""

_STARTED = "Ray runtime started"


def _ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if not found:
        raise FileNotFoundError("no `ray` executable beside this Python or on PATH (pip install 'ray[data]')")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


_DEFAULT_TOKEN = Path.home() / ".ray" / "auth_token"


def _ensure_token(env: Mapping[str, str]) -> str | None:
    """Where the cluster's token is read from (made if missing); None when ``RAY_AUTH_TOKEN`` holds it."""
    if env.get("RAY_AUTH_TOKEN"):
        return None
    path = Path(env.get("RAY_AUTH_TOKEN_PATH") or _DEFAULT_TOKEN).expanduser()
    if not path.exists():  # what `ray get-auth-token --generate` writes: 256 random bits, hex
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return str(path)


def _node_env(env: Mapping[str, str], mode: str) -> dict[str, str]:
    out = {**env, "RAY_AUTH_MODE": mode, "RAY_USAGE_STATS_ENABLED": "0",
           # SIGTERM to a `ray start --block` tears its node down now (Ray's default first drains it for
           # up to a minute, for Ray Serve; nothing here serves traffic).
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    out.pop("RAY_ADDRESS", None)
    return out


def _start_node(name: str, args: list[str], root: Path, env: dict[str, str], timeout_s: float,
                nodes: list[dict[str, Any]]) -> None:
    """``ray start --block`` one node; append it to ``nodes`` (and ``root/cluster.json``) as soon as it has a pid,
    so that ``down`` finds it even if this process dies while the node starts; return once it is up."""
    temp_dir, log = root / name, root / f"{name}.log"
    cmd = [_ray_executable(), "start", "--block", f"--temp-dir={temp_dir}", "--disable-usage-stats",
           f"--dashboard-agent-listen-port={_free_port()}", f"--node-name={name}", *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    node = {"name": name, "pid": proc.pid, "temp_dir": str(temp_dir), "log": str(log), "command": cmd}
    nodes.append(node)
    _write_state(root, {"nodes": nodes})
    deadline = time.monotonic() + timeout_s
    while _STARTED not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            why = (f"exited with code {proc.returncode}" if proc.poll() is not None
                   else f"was not up after {timeout_s:.0f} s")
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"Ray node {name!r} {why}; the end of {log}:\n{tail}")
        time.sleep(0.2)


def _write_state(root: Path, info: dict[str, Any]) -> None:
    tmp = root / "cluster.json.tmp"
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    tmp.replace(root / "cluster.json")


def up(root: str | Path = DEFAULT_DIR, *, workers: int = 1, head_cpus: int = 2, worker_cpus: int = 2,
       object_store_mb: int | None = None, env: Mapping[str, str] | None = None, timeout_s: float = 120
       ) -> dict[str, Any]:
    """Start a head and ``workers`` worker nodes under ``root``; return (and write) ``root/cluster.json``.

    ``env``: added to the nodes' environment (e.g. ``PYTHONPATH``: a node's workers import offlinerl from
    the node's environment, not from the driver's). If a node fails to start, the nodes started so far are
    stopped and the error names the node's log."""
    root = Path(root).resolve()
    if (root / "cluster.json").exists():
        raise RuntimeError(f"{root / 'cluster.json'} exists: a cluster is up there (stop it first: "
                           f"python examples/local_cluster.py down --dir {root})")
    root.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, **(env or {})}
    mode = base.get("RAY_AUTH_MODE", "token").lower()
    token = _ensure_token(base) if mode == "token" else None
    node_env = _node_env(base, mode)
    store = [f"--object-store-memory={object_store_mb * 1024 * 1024}"] if object_store_mb else []
    head = ["--head", f"--port={_free_port()}", f"--num-cpus={head_cpus}", "--include-dashboard=false",
            f"--dashboard-port={_free_port()}", f"--ray-client-server-port={_free_port()}", *store]
    nodes: list[dict[str, Any]] = []
    try:
        _start_node("head", head, root, node_env, timeout_s, nodes)
        address = (root / "head" / "ray_current_cluster").read_text().strip()
        for i in range(workers):
            worker = [f"--address={address}", f"--num-cpus={worker_cpus}", *store]
            _start_node(f"worker-{i + 1}", worker, root, node_env, timeout_s, nodes)
    except BaseException:
        down(root)
        raise
    info = {"address": address, "auth_mode": mode, "token_path": token, "root": str(root), "nodes": nodes,
            "cpus": head_cpus + workers * worker_cpus, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write_state(root, info)
    (root / "env").write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in _join_vars(info).items()))
    return info


def _join_vars(info: dict[str, Any]) -> dict[str, str]:
    """What a client sets to join: the address, the auth mode, and the token file unless it is Ray's default."""
    out = {"RAY_ADDRESS": info["address"], "RAY_AUTH_MODE": info["auth_mode"]}
    if info.get("token_path") and Path(info["token_path"]) != _DEFAULT_TOKEN:
        out["RAY_AUTH_TOKEN_PATH"] = info["token_path"]
    return out


def client_env(root: str | Path = DEFAULT_DIR, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus what a command needs to join the cluster."""
    info = json.loads((Path(root) / "cluster.json").read_text())
    return {**(os.environ if base is None else base), **_join_vars(info)}


# -- stopping exactly what up started ----------------------------------------------------------------------
def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process (``ps``: Linux and macOS; ``-ww``: whole command lines,
    whatever ``$COLUMNS`` says)."""
    out = subprocess.run(["ps", "-ww", "-A", "-o", "pid=,ppid=,args="], capture_output=True, text=True,
                         check=True).stdout
    procs = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2:
            procs[int(parts[0])] = (int(parts[1]), parts[2] if len(parts) > 2 else "")
    return procs


_RAY_PROCESS = re.compile(r"packages/ray/|/ray start |^ray::")


def _node_processes(node: dict[str, Any]) -> dict[int, str]:
    """pid -> command line of the node's processes: its ``ray start`` (while it is the one we started: the
    command names the node's temp dir) and every descendant, plus Ray processes naming that temp dir whose
    launcher is gone (left behind by a node that died)."""
    procs = _processes()
    names_dir = re.compile(re.escape(node["temp_dir"]) + r"(/|\s|$)")
    mine = {pid for pid, (_, args) in procs.items() if names_dir.search(args) and _RAY_PROCESS.search(args)}
    frontier = set(mine)
    while frontier:
        frontier = {pid for pid, (ppid, _) in procs.items() if ppid in frontier and pid not in mine}
        mine |= frontier
    return {pid: procs[pid][1] for pid in mine}


def _still_running(procs: dict[int, str]) -> dict[int, str]:
    """Those of ``procs`` still running as the same process (not a new one that got a reused pid)."""
    now = _processes()
    return {pid: args for pid, args in procs.items() if pid in now and now[pid][1] == args}


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _stop_node(node: dict[str, Any], timeout_s: float = 20) -> list[int]:
    """SIGTERM the node's ``ray start --block`` (it stops its processes; without it, each process), then SIGKILL
    whatever of the node is left after ``timeout_s``. Returns the pids stopped."""
    procs = _node_processes(node)
    for pid in [node["pid"]] if node["pid"] in procs else procs:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    left = _still_running(procs)
    while left and time.monotonic() < deadline:
        time.sleep(0.25)
        left = _still_running(left)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    try:
        os.waitpid(node["pid"], os.WNOHANG)  # reap it if this process started it
    except ChildProcessError:
        pass
    return sorted(procs)


def down(root: str | Path = DEFAULT_DIR, timeout_s: float = 20) -> list[int]:
    """Stop the cluster recorded in ``root/cluster.json`` (workers first); return the pids stopped."""
    state = Path(root) / "cluster.json"
    if not state.exists():
        return []
    info = json.loads(state.read_text())
    stopped = []
    for node in reversed(info["nodes"]):
        stopped += _stop_node(node, timeout_s)
    state.unlink()
    (Path(root) / "env").unlink(missing_ok=True)
    return stopped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("up", "down", "env"))
    p.add_argument("--dir", default=str(DEFAULT_DIR), help=f"where the nodes' temp dirs, logs and cluster.json go "
                   f"(default {DEFAULT_DIR})")
    p.add_argument("--workers", type=int, default=1, help="worker nodes besides the head (default 1)")
    p.add_argument("--head-cpus", type=int, default=2, help="CPUs the head node offers (default 2)")
    p.add_argument("--worker-cpus", type=int, default=2, help="CPUs each worker node offers (default 2)")
    p.add_argument("--object-store-mb", type=int, default=None, help="object store per node (default: Ray's)")
    args = p.parse_args(argv)
    state = Path(args.dir) / "cluster.json"
    if args.action == "down":
        stopped = down(args.dir)
        print(f"stopped {len(stopped)} processes of the cluster in {args.dir}" if stopped
              else f"no cluster in {args.dir}")
        return 0
    if args.action == "env":
        if not state.exists():
            print(f"no cluster in {args.dir} (make cluster-up)", file=sys.stderr)
            return 1
        print("".join(f"export {k}={shlex.quote(v)}\n" for k, v in _join_vars(json.loads(state.read_text())).items()),
              end="")
        return 0
    try:
        info = up(args.dir, workers=args.workers, head_cpus=args.head_cpus, worker_cpus=args.worker_cpus,
                  object_store_mb=args.object_store_mb)
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"local_cluster.py up: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(f"{n['name']} (pid {n['pid']})" for n in info["nodes"])
    print(f"Ray cluster up: {len(info['nodes'])} nodes, {info['cpus']} CPUs: {names}")
    print(f"address: {info['address']}")
    print(f"join it (auth {info['auth_mode']}):  source {info['root']}/env   # or:")
    for k, v in _join_vars(info).items():
        print(f"  export {k}={shlex.quote(v)}")
    print("then e.g.:  offlinerl train jobs/cartpole-bc.yaml --set config.num_learners=2")
    at = "" if Path(info["root"]) == DEFAULT_DIR.resolve() else f" CLUSTER_DIR={info['root']}"
    print(f"stop it:  make cluster-down{at}   (or: python examples/local_cluster.py down --dir {info['root']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
